#include "prism/store/run_store.h"

#include <H5Cpp.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <utility>

#include "prism/error.h"
#include "prism/store/hdf5_support.h"

namespace prism {
namespace {

using hdf5::check;
using hdf5::last_error;
using hdf5::QuietHdf5;
using hdf5::read_string_attribute;
using hdf5::write_string_attribute;

constexpr hsize_t kSeriesChunk = 512;    // rows per chunk of a 1-D series (4 KiB)
constexpr hsize_t kAttentionChunk = 64;  // rows per chunk of a k x width table
// The writer's OFD lock covers one byte far past any data HDF5 writes; on Linux
// OFD locks and HDF5's flock() never conflict, so readers are not affected.
constexpr off_t kLockByte = off_t{1} << 62;

const std::vector<std::string> kTrainColumns = {"tokens", "loss", "lr", "grad_norm", "time_s"};
const std::vector<std::string> kValColumns = {"tokens", "loss", "loss_se"};
const std::vector<std::string> kSearchColumns = {"heads", "weights", "temperature"};
const std::vector<std::string> kSearchScoreColumns = {"score", "choice"};
const char* const kStatuses[] = {"running", "completed", "failed"};
// The status attribute is created this wide (the longest status), so that every later
// status is written in place, padded, whatever the attribute's history.
constexpr size_t kStatusWidth = 9;  // "completed"

const char* const kAppendFix =
    "check free disk space and that nothing else writes the file; the rows flushed so far "
    "are kept and the run can continue with --resume";

const char* const kOpenFix = "check that it is the run.h5 of a prism run and that the disk is not full";

std::string layer_group(size_t layer) { return fmt::format("layer_{:02d}", layer); }

// /attention columns in write order: per layer, then the layer means.
std::vector<std::string> attention_columns(size_t layers) {
  std::vector<std::string> names;
  for (size_t l = 0; l < layers; ++l) names.push_back(layer_group(l) + "/distance");
  names.push_back("distance");
  return names;
}

H5::FileAccPropList access_plist(bool clear_stale_marks) {
  H5::FileAccPropList fapl;
  // SWMR needs the 1.10 file format.
  check(H5Pset_libver_bounds(fapl.getId(), H5F_LIBVER_LATEST, H5F_LIBVER_LATEST), "H5Pset_libver_bounds");
  // Live SWMR readers hold HDF5's shared flock; taking HDF5's exclusive lock
  // would make the end-of-run status update fail while one is attached. The
  // superblock's open-for-write mark still keeps plain readers out meanwhile.
  check(H5Pset_file_locking(fapl.getId(), false, true), "H5Pset_file_locking");
  if (clear_stale_marks) {
    // A killed writer leaves the superblock marked open-for-write; this is the
    // property h5clear -s sets. Only set while we hold the run's writer lock.
    hbool_t clear = true;
    if (H5Pset(fapl.getId(), "clear_status_flags", &clear) < 0)
      last_error().clear();  // a library without it: the open then says to run h5clear -s
  }
  return fapl;
}

void write_world_size(H5::H5File& file, int world_size) {
  if (file.attrExists("world_size")) file.removeAttr("world_size");
  file.createAttribute("world_size", H5::PredType::STD_I32LE, H5::DataSpace(H5S_SCALAR))
      .write(H5::PredType::NATIVE_INT, &world_size);
}

void write_root_attributes(H5::H5File& file, const RunAttributes& attrs) {
  write_string_attribute(file, "config", attrs.config);
  hsize_t layers = attrs.heads.size();
  file.createAttribute("heads", H5::PredType::STD_I32LE, H5::DataSpace(1, &layers))
      .write(H5::PredType::NATIVE_INT, attrs.heads.data());
  file.createAttribute("seed", H5::PredType::STD_U64LE, H5::DataSpace(H5S_SCALAR))
      .write(H5::PredType::NATIVE_UINT64, &attrs.seed);
  write_string_attribute(file, "status", "running", kStatusWidth);
  write_string_attribute(file, "prism_version", attrs.prism_version);
  write_world_size(file, attrs.world_size);
  file.createAttribute("unigram_val_loss", H5::PredType::IEEE_F64LE, H5::DataSpace(H5S_SCALAR))
      .write(H5::PredType::NATIVE_DOUBLE, &attrs.unigram_val_loss);
  if (!attrs.dtype.empty()) write_string_attribute(file, "dtype", attrs.dtype);
  if (!attrs.dtype_reason.empty()) write_string_attribute(file, "dtype_reason", attrs.dtype_reason);
}

// A file written by an older Prism holds its strings variable-length (in the
// unchecksummed global heap); a writer converts them, outside SWMR mode, so that
// a resumed run continues in the current format.
void convert_string_attributes(H5::H5File& file, const RunAttributes& attrs, const std::string& status) {
  if (hdf5::is_variable_string_attribute(file, "config")) write_string_attribute(file, "config", attrs.config);
  if (hdf5::is_variable_string_attribute(file, "prism_version"))
    write_string_attribute(file, "prism_version", attrs.prism_version);
  if (hdf5::is_variable_string_attribute(file, "status")) write_string_attribute(file, "status", status, kStatusWidth);
}

RunAttributes read_root_attributes(const H5::H5File& file) {
  RunAttributes attrs;
  attrs.config = read_string_attribute(file, "config");
  attrs.prism_version = read_string_attribute(file, "prism_version");
  H5::Attribute heads = file.openAttribute("heads");
  attrs.heads.resize(heads.getSpace().getSimpleExtentNpoints());
  heads.read(H5::PredType::NATIVE_INT, attrs.heads.data());
  file.openAttribute("seed").read(H5::PredType::NATIVE_UINT64, &attrs.seed);
  if (file.attrExists("world_size")) file.openAttribute("world_size").read(H5::PredType::NATIVE_INT, &attrs.world_size);
  if (file.attrExists("unigram_val_loss"))
    file.openAttribute("unigram_val_loss").read(H5::PredType::NATIVE_DOUBLE, &attrs.unigram_val_loss);
  if (file.attrExists("dtype")) attrs.dtype = read_string_attribute(file, "dtype");
  if (file.attrExists("dtype_reason")) attrs.dtype_reason = read_string_attribute(file, "dtype_reason");
  // H5Lexists fails (rather than answers false) when an intermediate group is missing.
  if (file.nameExists("search") && file.nameExists("search/step")) {
    H5::Group search = file.openGroup("search");
    H5::Attribute choices = search.openAttribute("choices");
    attrs.search.choices.resize(choices.getSpace().getSimpleExtentNpoints());
    choices.read(H5::PredType::NATIVE_INT, attrs.search.choices.data());
    search.openAttribute("slots").read(H5::PredType::NATIVE_INT, &attrs.search.slots);
    search.openAttribute("layers").read(H5::PredType::NATIVE_INT, &attrs.search.layers);
    attrs.search.method = read_string_attribute(search, "method");
  }
  return attrs;
}

// An empty extendible table: 1-D (width 0) or k x width, chunked by rows.
void create_table(H5::Group& group, const std::string& name, const H5::PredType& file_type,
                  const H5::PredType& fill_type, const void* fill, hsize_t width = 0) {
  int rank = width ? 2 : 1;
  hsize_t dims[2] = {0, width};
  hsize_t max_dims[2] = {H5S_UNLIMITED, width};
  hsize_t chunk[2] = {width ? kAttentionChunk : kSeriesChunk, width};
  H5::DSetCreatPropList plist;
  plist.setChunk(rank, chunk);
  plist.setFillValue(fill_type, fill);  // unwritten rows read as NaN / -1, never as data
  group.createDataSet(name, file_type, H5::DataSpace(rank, dims, max_dims), plist);
}

// /search (RunAttributes::search): its series and the layout as attributes.
void create_search_schema(H5::H5File& file, const SearchLayout& layout) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const int64_t none = -1;
  const auto L = static_cast<hsize_t>(layout.layers), K = static_cast<hsize_t>(layout.choices.size());
  H5::Group search = file.createGroup("search");
  hsize_t k = K;
  search.createAttribute("choices", H5::PredType::STD_I32LE, H5::DataSpace(1, &k))
      .write(H5::PredType::NATIVE_INT, layout.choices.data());
  for (const auto& [name, value] : {std::make_pair("slots", layout.slots), std::make_pair("layers", layout.layers)})
    search.createAttribute(name, H5::PredType::STD_I32LE, H5::DataSpace(H5S_SCALAR)).write(H5::PredType::NATIVE_INT, &value);
  write_string_attribute(search, "method", layout.method);
  create_table(search, "step", H5::PredType::STD_I64LE, H5::PredType::NATIVE_INT64, &none);
  create_table(search, "heads", H5::PredType::STD_I64LE, H5::PredType::NATIVE_INT64, &none,
               static_cast<hsize_t>(layout.slots) * L);
  create_table(search, "weights", H5::PredType::IEEE_F64LE, H5::PredType::NATIVE_DOUBLE, &nan, L * K);
  create_table(search, "temperature", H5::PredType::IEEE_F64LE, H5::PredType::NATIVE_DOUBLE, &nan);
  H5::Group scores = search.createGroup("scores");
  create_table(scores, "step", H5::PredType::STD_I64LE, H5::PredType::NATIVE_INT64, &none);
  create_table(scores, "score", H5::PredType::IEEE_F64LE, H5::PredType::NATIVE_DOUBLE, &nan, L * K);
  create_table(scores, "choice", H5::PredType::STD_I64LE, H5::PredType::NATIVE_INT64, &none, L);
}

void create_schema(H5::H5File& file, const std::vector<int>& heads) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const int64_t none = -1;
  auto int_table = [&](H5::Group& g, const std::string& name) {
    create_table(g, name, H5::PredType::STD_I64LE, H5::PredType::NATIVE_INT64, &none);
  };
  auto real_table = [&](H5::Group& g, const std::string& name, hsize_t width = 0) {
    create_table(g, name, H5::PredType::IEEE_F64LE, H5::PredType::NATIVE_DOUBLE, &nan, width);
  };
  H5::Group train = file.createGroup("train");
  int_table(train, "step");
  int_table(train, "tokens");
  for (const char* c : {"loss", "lr", "grad_norm", "time_s"}) real_table(train, c);
  H5::Group val = file.createGroup("val");
  int_table(val, "step");
  int_table(val, "tokens");
  real_table(val, "loss");
  real_table(val, "loss_se");
  H5::Group attention = file.createGroup("attention");
  int_table(attention, "step");
  real_table(attention, "distance", heads.size());
  for (size_t l = 0; l < heads.size(); ++l) {
    H5::Group layer = attention.createGroup(layer_group(l));
    real_table(layer, "distance", static_cast<hsize_t>(heads[l]));
  }
  file.createGroup("eval");
}

// The dimensions of a series column into dims[2], its rank checked first (HDF5 writes as
// many dimensions as the dataset has; a damaged file could claim more than two).
void column_dims(const H5::DataSpace& space, hsize_t dims[2]) {
  const int rank = space.getSimpleExtentNdims();
  if (rank != 1 && rank != 2)
    throw H5::DataSetIException("column_dims", fmt::format("a series column of rank {} (1 or 2 expected)", rank));
  space.getSimpleExtentDims(dims);
}

hsize_t row_count(const H5::DataSet& ds) {
  hsize_t dims[2] = {0, 0};
  column_dims(ds.getSpace(), dims);
  return dims[0];
}

// Writes row `row` of `ds` (resizing it to row + 1 rows) and flushes it.
void write_row(H5::DataSet& ds, hsize_t row, const void* data, const H5::PredType& type) {
  H5::DataSpace space = ds.getSpace();
  int rank = space.getSimpleExtentNdims();
  hsize_t dims[2] = {0, 1};
  column_dims(space, dims);
  dims[0] = row + 1;  // also trims a column that a failed append left one row longer
  ds.extend(dims);
  H5::DataSpace file_space = ds.getSpace();
  hsize_t start[2] = {row, 0};
  hsize_t count[2] = {1, rank == 2 ? dims[1] : 1};
  file_space.selectHyperslab(H5S_SELECT_SET, count, start);
  ds.write(data, type, H5::DataSpace(rank, count), file_space);
  check(H5Dflush(ds.getId()), "H5Dflush");
}

std::vector<int64_t> read_steps(const H5::DataSet& step) {
  std::vector<int64_t> steps(row_count(step));
  if (!steps.empty()) step.read(steps.data(), H5::PredType::NATIVE_INT64);
  return steps;
}

const char* const kExistsFix =
    "continue that run with --resume, replace it with --force, or choose another run directory";

// Opens `file` (creating it when `create`) and takes the run's writer lock on it;
// errors name `path`, the run store the user asked for.
int lock_run_file(const std::string& file, const std::string& path, bool create) {
  int flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0);
  int fd = ::open(file.c_str(), flags, 0644);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT && create)
      throw Error("cannot create the run store: the directory does not exist", path,
                  "create the run directory first or choose another one");
    if (err == ENOENT)
      throw Error("no run store here", path, "check the run directory, or start the run without --resume");
    throw Error(fmt::format("cannot {} the run store: {}", create ? "create" : "open", std::strerror(err)), path,
                "choose a run directory you can write to");
  }
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = kLockByte;
  lock.l_len = 1;
  if (fcntl(fd, F_OFD_SETLK, &lock) != 0) {
    int err = errno;
    ::close(fd);
    if (create) ::unlink(file.c_str());
    if (err == EAGAIN || err == EACCES)
      throw Error("the run store is being written by another process", path,
                  "wait for that run to finish or stop it; a run has exactly one writer");
    throw Error(fmt::format("cannot lock the run store: {}", std::strerror(err)), path,
                "use a local file system that supports fcntl locks");
  }
  return fd;
}

// Gives the finished new store its final name, never replacing an existing file.
void publish(const std::string& temp, const std::string& path) {
  if (::link(temp.c_str(), path.c_str()) != 0) {
    int err = errno;
    if (err == EEXIST) throw Error("a run store already exists here", path, kExistsFix);
    // File systems without hard links: a plain rename after a last check.
    if (std::error_code ec; std::filesystem::exists(path, ec))
      throw Error("a run store already exists here", path, kExistsFix);
    if (::rename(temp.c_str(), path.c_str()) != 0)
      throw Error(fmt::format("cannot create the run store: {}", std::strerror(errno)), path,
                  "choose a run directory you can write to");
    return;
  }
  ::unlink(temp.c_str());
}

// Points HDF5's descriptor `fd` at an in-memory copy of its file, so that what
// HDF5 still writes (at close) lands there and never in the file on disk.
void redirect_to_memory(int fd) {
  int sink = memfd_create("prism-run-store", MFD_CLOEXEC);
  if (sink < 0) return;
  std::vector<char> buffer(1 << 20);
  for (off_t offset = 0;;) {
    ssize_t n = pread(fd, buffer.data(), buffer.size(), offset);
    if (n <= 0 || pwrite(sink, buffer.data(), size_t(n), offset) != n) break;
    offset += n;
  }
  dup2(sink, fd);
  ::close(sink);
}

// HDF5 1.10 may tear down a file or dataset whose close failed (a full disk)
// yet keep its id, and closing it again crashes. Handles are therefore held by
// unique_ptr, closed explicitly once, and leaked rather than retried on failure.
using DataSetHandle = std::unique_ptr<H5::DataSet>;

void close_once(DataSetHandle& ds) {
  if (!ds) return;
  ds->close();  // throws and keeps the id on failure: the caller abandons it
  ds.reset();
}

// One row-aligned group: `columns` are written and flushed first and `step`
// last, so len(step) counts complete rows even if the writer dies mid-append.
struct Series {
  DataSetHandle step;
  std::vector<DataSetHandle> columns;
  int64_t last_step = std::numeric_limits<int64_t>::min();

  void open(const H5::H5File& file, const std::string& group, const std::vector<std::string>& names) {
    step = std::make_unique<H5::DataSet>(file.openDataSet(group + "/step"));
    columns.clear();
    for (const auto& name : names)
      columns.push_back(std::make_unique<H5::DataSet>(file.openDataSet(group + "/" + name)));
    std::vector<int64_t> steps = read_steps(*step);
    last_step = steps.empty() ? std::numeric_limits<int64_t>::min() : steps.back();
  }
  H5::DataSet& column(size_t i) { return *columns.at(i); }
  hsize_t next_row(const std::string& path, const std::string& group, int64_t new_step) const {
    if (new_step <= last_step)
      throw Error(fmt::format("step {} does not follow step {} in /{}", new_step, last_step, group), path,
                  "append steps in increasing order; to continue from a checkpoint open the run with resume()");
    return row_count(*step);
  }
  void close() {
    for (auto& c : columns) close_once(c);
    columns.clear();
    close_once(step);
  }
  void abandon() {
    for (auto& c : columns) static_cast<void>(c.release());
    columns.clear();
    static_cast<void>(step.release());
  }
};

}  // namespace

struct RunStore::Impl {
  std::string path;
  int lock_fd = -1;
  // Not an H5File value: its assignment copies the id without a reference, and
  // after a failed close it must be leaked (see close_once).
  std::unique_ptr<H5::H5File> file;
  bool is_open = false;
  bool live = false;    // SWMR writing: appends only
  bool failed = false;  // stopped by an HDF5 failure
  RunAttributes attrs;
  std::string status;
  Series train, val, attention, search, search_scores;

  // Plain read-write mode, for attributes, new groups and shrinking.
  void open_plain(bool clear_stale_marks) {
    file = std::make_unique<H5::H5File>(path, H5F_ACC_RDWR, H5::FileCreatPropList::DEFAULT,
                                        access_plist(clear_stale_marks));
    is_open = true;
    // A SWMR writer does not keep the superblock's end-of-allocation current; after
    // a kill it lies below the data, and closing would truncate the file to it.
    // Raise it to the real end first (what h5clear --increment=0 does).
    if (clear_stale_marks) check(H5Fincrement_filesize(file->getId(), 0), "H5Fincrement_filesize");
  }
  // Appends need SWMR mode; an edit that failed half-way may have left the file plain or closed.
  void ensure_live() {
    if (live) return;
    if (!is_open) open_plain(false);
    start_live();
  }
  void start_live() {
    check(H5Fstart_swmr_write(file->getId()), "H5Fstart_swmr_write");
    live = true;
    train.open(*file, "train", kTrainColumns);
    val.open(*file, "val", kValColumns);
    attention.open(*file, "attention", attention_columns(attrs.heads.size()));
    if (attrs.search.enabled()) {
      search.open(*file, "search", kSearchColumns);
      search_scores.open(*file, "search/scores", kSearchScoreColumns);
    }
  }
  void close_file() {
    is_open = live = false;
    try {
      for (Series* s : {&train, &val, &attention, &search, &search_scores}) s->close();
      if (file) file->close();
      file.reset();
    } catch (const H5::Exception&) {
      for (Series* s : {&train, &val, &attention, &search, &search_scores}) s->abandon();
      static_cast<void>(file.release());
      throw;
    }
  }
  // SWMR forbids attribute and group changes, so an edit leaves it: close,
  // reopen plain, edit, flush, and go live again.
  template <class F>
  void edit(F&& change) {
    close_file();
    open_plain(false);
    change();
    file->flush(H5F_SCOPE_GLOBAL);
    start_live();
  }
  void unlock() {
    if (lock_fd >= 0) ::close(lock_fd);
    lock_fd = -1;
  }
  // After a failed write HDF5 1.10 keeps the unwritten data dirty and fails every
  // later flush; a failed close then leaves a dangling id that crashes the process
  // at exit (in H5close). The file on disk is whole as of the last flush (SWMR
  // order), so HDF5 is pointed at an in-memory copy and closed cleanly there; the
  // disk file reads like a killed run's and resume() continues it.
  void stop_after_failure() {
    QuietHdf5 quiet;
    void* handle = nullptr;
    if (file && H5Fget_vfd_handle(file->getId(), H5P_DEFAULT, &handle) >= 0 && handle)
      redirect_to_memory(*static_cast<int*>(handle));  // the sec2 driver's handle is its fd
    try {
      close_file();
    } catch (const H5::Exception&) {
      // close_file has abandoned the handles.
    }
    failed = true;
  }
  // Runs HDF5 calls on the open file; on an HDF5 failure stops the store and
  // throws prism::Error with HDF5's own reason.
  template <class F>
  void attempt(const std::string& action, const std::string& fix, F&& body) {
    QuietHdf5 quiet;
    try {
      body();
    } catch (const H5::Exception& e) {
      std::string detail = hdf5::detail(e);
      stop_after_failure();
      throw Error(fmt::format("cannot {}: {}", action, detail), path, fix);
    }
  }
};

namespace {

void validate_heads(const std::string& path, const std::vector<int>& heads) {
  if (heads.empty()) throw Error("the head schedule is empty", path, "pass the run's heads (one count per layer)");
  for (size_t l = 0; l < heads.size(); ++l)
    if (heads[l] <= 0)
      throw Error(fmt::format("layer {} has {} heads", l, heads[l]), path, "every layer needs at least one head");
}

// Series columns added after a file was written (/val/loss_se) are created on
// open, NaN for the rows already there, so older runs resume and take results.
void add_missing_columns(H5::H5File& file) {
  if (file.nameExists("val/loss_se") || !file.nameExists("val/loss")) return;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  H5::Group val = file.openGroup("val");
  create_table(val, "loss_se", H5::PredType::IEEE_F64LE, H5::PredType::NATIVE_DOUBLE, &nan);
  hsize_t dims[1] = {row_count(val.openDataSet("loss"))};
  val.openDataSet("loss_se").extend(dims);
}

void require_schema(const std::string& path, const H5::H5File& file, size_t layers, const SearchLayout& search) {
  std::vector<std::string> paths = {"train/step", "val/step", "attention/step", "eval"};
  if (search.enabled()) {
    paths.push_back("search/scores/step");
    for (const auto& c : kSearchColumns) paths.push_back("search/" + c);
    for (const auto& c : kSearchScoreColumns) paths.push_back("search/scores/" + c);
  }
  for (const auto& c : kTrainColumns) paths.push_back("train/" + c);
  for (const auto& c : kValColumns) paths.push_back("val/" + c);
  for (const auto& c : attention_columns(layers)) paths.push_back("attention/" + c);
  for (const char* a : {"config", "heads", "seed", "status", "prism_version"})
    if (!file.attrExists(a))
      throw Error(fmt::format("not a Prism run store (no root attribute '{}')", a), path, kOpenFix);
  for (const auto& p : paths)
    if (!file.nameExists(p)) throw Error(fmt::format("not a Prism run store (no /{})", p), path, kOpenFix);
}

// Drops the rows of `group` whose step is above `keep_through_step`, and any
// partial row a killed writer left in the other columns.
void truncate_group(const std::string& path, H5::H5File& file, const std::string& group,
                    const std::vector<std::string>& columns, int64_t keep_through_step) {
  H5::DataSet step = file.openDataSet(group + "/step");
  std::vector<int64_t> steps = read_steps(step);
  hsize_t keep = std::upper_bound(steps.begin(), steps.end(), keep_through_step) - steps.begin();
  for (const auto& name : columns) {
    H5::DataSet ds = file.openDataSet(group + "/" + name);
    hsize_t dims[2] = {0, 1};
    column_dims(ds.getSpace(), dims);
    if (dims[0] < keep)
      throw Error(fmt::format("/{}/{} is shorter than /{}/step", group, name, group), path,
                  "the file was not written by RunStore; start a new run directory");
    dims[0] = keep;
    ds.extend(dims);
  }
  hsize_t dims[1] = {keep};
  step.extend(dims);
}

}  // namespace

RunStore RunStore::create(const std::string& path, const RunAttributes& attrs) {
  validate_heads(path, attrs.heads);
  if (std::error_code ec; std::filesystem::exists(path, ec))
    throw Error("a run store already exists here", path, kExistsFix);
  // Built under a temporary name and published complete, so a crash while the
  // schema is written never leaves a half-made run.h5 that blocks the next run.
  const std::string temp = fmt::format("{}.{}.creating", path, ::getpid());
  RunStore store;
  store.path_ = path;
  store.impl_ = new Impl;
  Impl& s = *store.impl_;
  s.path = path;
  s.attrs = attrs;
  s.lock_fd = lock_run_file(temp, path, /*create=*/true);
  try {
    s.attempt("create the run store", "choose a writable run directory with free space", [&] {
      s.file = std::make_unique<H5::H5File>(temp, H5F_ACC_TRUNC, H5::FileCreatPropList::DEFAULT, access_plist(false));
      s.is_open = true;
      write_root_attributes(*s.file, attrs);
      create_schema(*s.file, attrs.heads);
      if (attrs.search.enabled()) create_search_schema(*s.file, attrs.search);
      s.file->flush(H5F_SCOPE_GLOBAL);
      s.status = "running";
      s.start_live();
    });
    publish(temp, path);
  } catch (...) {
    if (!s.failed) s.stop_after_failure();  // closes without touching the temp file further
    ::unlink(temp.c_str());
    throw;
  }
  return store;
}

RunStore RunStore::open_existing(const std::string& path) {
  RunStore store;
  store.path_ = path;
  store.impl_ = new Impl;
  Impl& s = *store.impl_;
  s.path = path;
  s.lock_fd = lock_run_file(path, path, /*create=*/false);
  s.attempt("open the run store", kOpenFix, [&] {
    // We hold the writer lock, so an open-for-write mark is left from a killed writer.
    s.open_plain(/*clear_stale_marks=*/true);
    s.attrs = read_root_attributes(*s.file);
    add_missing_columns(*s.file);
    require_schema(path, *s.file, s.attrs.heads.size(), s.attrs.search);
    s.status = read_string_attribute(*s.file, "status");
    convert_string_attributes(*s.file, s.attrs, s.status);
  });
  return store;  // on a throw, ~RunStore closes the file and releases the lock
}

RunStore RunStore::resume(const std::string& path, int64_t keep_through_step) {
  RunStore store = open_existing(path);
  Impl& s = *store.impl_;
  s.attempt("resume the run store", kOpenFix, [&] {
    truncate_group(path, *s.file, "train", kTrainColumns, keep_through_step);
    truncate_group(path, *s.file, "val", kValColumns, keep_through_step);
    truncate_group(path, *s.file, "attention", attention_columns(s.attrs.heads.size()), keep_through_step);
    if (s.attrs.search.enabled()) {
      truncate_group(path, *s.file, "search", kSearchColumns, keep_through_step);
      truncate_group(path, *s.file, "search/scores", kSearchScoreColumns, keep_through_step);
    }
    write_string_attribute(*s.file, "status", "running", kStatusWidth);
    s.status = "running";
    s.file->flush(H5F_SCOPE_GLOBAL);
    s.start_live();
  });
  return store;
}

RunStore RunStore::open(const std::string& path) {
  RunStore store = open_existing(path);
  store.impl_->attempt("open the run store", kOpenFix, [&] { store.impl_->start_live(); });
  return store;
}

RunStore::Impl& RunStore::open_impl() const {
  if (impl_ && impl_->failed)
    throw Error("the run store stopped after a failed write", path_,
                "fix the cause reported then (often a full disk) and continue the run with --resume");
  if (!impl_ || !impl_->is_open)
    throw Error("the run store is closed", path_, "keep the RunStore open until the run has written everything");
  return *impl_;
}

void RunStore::append_train(const TrainRow& row) {
  Impl& impl = open_impl();
  Series& s = impl.train;
  impl.attempt("append to /train", kAppendFix, [&] {
    impl.ensure_live();
    hsize_t r = s.next_row(path_, "train", row.step);
    write_row(s.column(0), r, &row.tokens, H5::PredType::NATIVE_INT64);
    write_row(s.column(1), r, &row.loss, H5::PredType::NATIVE_DOUBLE);
    write_row(s.column(2), r, &row.lr, H5::PredType::NATIVE_DOUBLE);
    write_row(s.column(3), r, &row.grad_norm, H5::PredType::NATIVE_DOUBLE);
    write_row(s.column(4), r, &row.time_s, H5::PredType::NATIVE_DOUBLE);
    write_row(*s.step, r, &row.step, H5::PredType::NATIVE_INT64);
  });
  s.last_step = row.step;
}

void RunStore::append_val(const ValRow& row) {
  Impl& impl = open_impl();
  Series& s = impl.val;
  impl.attempt("append to /val", kAppendFix, [&] {
    impl.ensure_live();
    hsize_t r = s.next_row(path_, "val", row.step);
    write_row(s.column(0), r, &row.tokens, H5::PredType::NATIVE_INT64);
    write_row(s.column(1), r, &row.loss, H5::PredType::NATIVE_DOUBLE);
    write_row(s.column(2), r, &row.loss_se, H5::PredType::NATIVE_DOUBLE);
    write_row(*s.step, r, &row.step, H5::PredType::NATIVE_INT64);
  });
  s.last_step = row.step;
}

void RunStore::append_attention(int64_t step, const std::vector<std::vector<double>>& per_head) {
  Impl& impl = open_impl();
  const std::vector<int>& heads = impl.attrs.heads;
  if (per_head.size() != heads.size())
    throw Error(fmt::format("attention distances for {} layers, the run has {}", per_head.size(), heads.size()),
                path_, "pass one row of per-head distances per layer");
  std::vector<double> layer_mean(heads.size());
  for (size_t l = 0; l < heads.size(); ++l) {
    if (per_head[l].size() != static_cast<size_t>(heads[l]))
      throw Error(fmt::format("layer {}: {} head distances, the layer has {} heads", l, per_head[l].size(), heads[l]),
                  path_, "pass one distance per head of the run's schedule");
    double sum = 0;
    for (double d : per_head[l]) sum += d;
    layer_mean[l] = sum / heads[l];
  }
  Series& s = impl.attention;
  impl.attempt("append to /attention", kAppendFix, [&] {
    impl.ensure_live();
    hsize_t r = s.next_row(path_, "attention", step);
    for (size_t l = 0; l < heads.size(); ++l)
      write_row(s.column(l), r, per_head[l].data(), H5::PredType::NATIVE_DOUBLE);
    write_row(s.column(heads.size()), r, layer_mean.data(), H5::PredType::NATIVE_DOUBLE);
    write_row(*s.step, r, &step, H5::PredType::NATIVE_INT64);
  });
  s.last_step = step;
}

void RunStore::append_search(const SearchRow& row) {
  Impl& impl = open_impl();
  const SearchLayout& layout = impl.attrs.search;
  if (!layout.enabled())
    throw Error("search rows for a run without /search", path_, "create the run with RunAttributes::search set");
  const size_t L = static_cast<size_t>(layout.layers), K = layout.choices.size();
  if (row.heads.size() != static_cast<size_t>(layout.slots) * L || row.weights.size() != L * K)
    throw Error(fmt::format("a search row of {} head counts and {} weights; the run records {} x {} and {} x {}",
                            row.heads.size(), row.weights.size(), layout.slots, L, L, K),
                path_, "pass one count per slot and layer, one weight per layer and choice");
  Series& s = impl.search;
  impl.attempt("append to /search", kAppendFix, [&] {
    impl.ensure_live();
    hsize_t r = s.next_row(path_, "search", row.step);
    write_row(s.column(0), r, row.heads.data(), H5::PredType::NATIVE_INT64);
    write_row(s.column(1), r, row.weights.data(), H5::PredType::NATIVE_DOUBLE);
    write_row(s.column(2), r, &row.temperature, H5::PredType::NATIVE_DOUBLE);
    write_row(*s.step, r, &row.step, H5::PredType::NATIVE_INT64);
  });
  s.last_step = row.step;
}

void RunStore::append_search_scores(const SearchScoresRow& row) {
  Impl& impl = open_impl();
  const SearchLayout& layout = impl.attrs.search;
  if (!layout.enabled())
    throw Error("search scores for a run without /search", path_, "create the run with RunAttributes::search set");
  const size_t L = static_cast<size_t>(layout.layers), K = layout.choices.size();
  if (row.score.size() != L * K || row.choice.size() != L)
    throw Error(fmt::format("search scores of {} values and {} choices; the run records {} x {} and {}",
                            row.score.size(), row.choice.size(), L, K, L),
                path_, "pass one score per layer and choice, one choice per layer");
  Series& s = impl.search_scores;
  impl.attempt("append to /search/scores", kAppendFix, [&] {
    impl.ensure_live();
    hsize_t r = s.next_row(path_, "search/scores", row.step);
    write_row(s.column(0), r, row.score.data(), H5::PredType::NATIVE_DOUBLE);
    write_row(s.column(1), r, row.choice.data(), H5::PredType::NATIVE_INT64);
    write_row(*s.step, r, &row.step, H5::PredType::NATIVE_INT64);
  });
  s.last_step = row.step;
}

void RunStore::write_eval(const std::string& task, double acc, double acc_norm, int64_t n) {
  Impl& impl = open_impl();
  if (task.empty() || task == "." || task == ".." || task.find('/') != std::string::npos)
    throw Error(fmt::format("invalid eval task name '{}'", task), path_, "name the task without '/' (e.g. hellaswag)");
  impl.attempt(fmt::format("write /eval/{}", task), kAppendFix, [&] {
    impl.edit([&] {
      H5::Group eval = impl.file->openGroup("eval");
      H5::Group group = eval.nameExists(task) ? eval.openGroup(task) : eval.createGroup(task);
      auto scalar = [&](const char* name, const H5::PredType& file_type, const H5::PredType& mem_type,
                        const void* value) {
        H5::DataSet ds = group.nameExists(name) ? group.openDataSet(name)
                                                : group.createDataSet(name, file_type, H5::DataSpace(H5S_SCALAR));
        ds.write(value, mem_type);
      };
      scalar("acc", H5::PredType::IEEE_F64LE, H5::PredType::NATIVE_DOUBLE, &acc);
      scalar("acc_norm", H5::PredType::IEEE_F64LE, H5::PredType::NATIVE_DOUBLE, &acc_norm);
      scalar("n", H5::PredType::STD_I64LE, H5::PredType::NATIVE_INT64, &n);
    });
  });
}

void RunStore::write_group(const std::string& path, const ResultGroup& group) {
  Impl& impl = open_impl();
  const size_t slash = path.find('/');
  const std::string top = path.substr(0, slash);
  const bool search = top == "search" && impl.attrs.search.enabled();
  // Under /val only results by position (analysis/position_loss.h): the rest of /val is the series.
  const bool by_position = path.rfind("val/by_position/", 0) == 0;
  bool valid = (top == "attention" || top == "eval" || search || by_position) && slash != std::string::npos &&
               path.back() != '/' && path != "search/scores";
  for (size_t start = 0; valid && start <= path.size();) {
    size_t end = std::min(path.find('/', start), path.size());
    std::string part = path.substr(start, end - start);
    valid = !part.empty() && part != "." && part != ".." && part.find(".partial") == std::string::npos;
    start = end + 1;
  }
  if (!valid)
    throw Error(fmt::format("invalid result group '{}'", path), path_,
                "name a group under attention/, eval/ or val/by_position/ (or a search run's search/), e.g. "
                "attention/heldout, eval/piqa, val/by_position/T1024 or search/ranking");
  const std::string leaf = path.substr(path.rfind('/') + 1);
  const std::string parent = path.substr(0, path.rfind('/'));
  for (size_t l = 0; l < impl.attrs.heads.size(); ++l)
    if (path == "attention/" + layer_group(l))
      throw Error(fmt::format("/{} holds the training-time series", path), path_, "choose another group name");
  impl.attempt(fmt::format("write /{}", path), kAppendFix, [&] {
    impl.edit([&] {
      H5::H5File& file = *impl.file;
      // Intermediate groups (e.g. /eval/<suite>) are created on the way.
      std::vector<std::string> parts;
      for (size_t start = 0; start < parent.size();) {
        size_t end = std::min(parent.find('/', start), parent.size());
        parts.push_back(parent.substr(0, end));
        start = end + 1;
      }
      for (const auto& p : parts)
        if (!file.nameExists(p)) file.createGroup(p);
      H5::Group container = file.openGroup(parent);
      if (container.nameExists(leaf) && container.childObjType(leaf) != H5O_TYPE_GROUP)
        throw Error(fmt::format("/{} is a dataset of the run's schema", path), path_, "choose another group name");
      const std::string partial = leaf + ".partial";
      if (container.nameExists(partial)) container.unlink(partial);
      hdf5::write_result_group(container, partial, group);
      file.flush(H5F_SCOPE_GLOBAL);
      if (container.nameExists(leaf)) container.unlink(leaf);
      container.move(partial, leaf);
    });
  });
}

void RunStore::set_status(const std::string& status) {
  Impl& impl = open_impl();
  if (std::find(std::begin(kStatuses), std::end(kStatuses), status) == std::end(kStatuses))
    throw Error(fmt::format("unknown run status '{}'", status), path_, "use running, completed or failed");
  if (status == impl.status) return;
  impl.attempt("write the status attribute", kAppendFix, [&] {
    impl.edit([&] { write_string_attribute(*impl.file, "status", status, kStatusWidth); });
  });
  impl.status = status;
}

void RunStore::set_world_size(int world_size) {
  Impl& impl = open_impl();
  if (world_size == impl.attrs.world_size) return;
  impl.attempt("write the world_size attribute", kAppendFix, [&] {
    impl.edit([&] { write_world_size(*impl.file, world_size); });
  });
  impl.attrs.world_size = world_size;
}

std::string RunStore::status() const {
  return open_impl().status;
}

const RunAttributes& RunStore::attributes() const {
  return open_impl().attrs;
}

void RunStore::close() {
  if (!impl_) return;
  std::unique_ptr<Impl> impl(std::exchange(impl_, nullptr));
  struct Unlock {
    Impl& impl;
    ~Unlock() { impl.unlock(); }
  } unlock{*impl};
  impl->attempt("close the run store", kAppendFix, [&] { impl->close_file(); });
}

RunStore::~RunStore() {
  try {
    close();
  } catch (...) {
    // A destructor must not throw; the rows flushed so far are on disk.
  }
}

RunStore::RunStore(RunStore&& other) noexcept
    : impl_(std::exchange(other.impl_, nullptr)), path_(std::move(other.path_)) {}

RunStore& RunStore::operator=(RunStore&& other) noexcept {
  if (this != &other) {
    try {
      close();
    } catch (...) {
    }
    impl_ = std::exchange(other.impl_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

std::string run_dtype(const RunAttributes& attrs) {
  if (!attrs.dtype.empty()) return attrs.dtype;
  try {
    const YAML::Node train = YAML::Load(attrs.config)["train"];
    if (train && train["dtype"] && train["dtype"].IsScalar()) {
      const auto d = train["dtype"].as<std::string>();
      if (d == "fp32" || d == "bf16") return d;
    }
  } catch (const std::exception&) {
    // An unreadable config leaves the dtype unknown.
  }
  return "";
}

}  // namespace prism
