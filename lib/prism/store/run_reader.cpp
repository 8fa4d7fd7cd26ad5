#include "prism/store/run_reader.h"

#include <H5Cpp.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <thread>

#include "prism/error.h"
#include "prism/store/hdf5_support.h"

namespace fs = std::filesystem;

namespace prism {

using hdf5::QuietHdf5;

struct RunReader::Impl {
  std::unique_ptr<H5::H5File> file;
  RunAttributes attrs;
  std::string status;
};

namespace {

const char* const kReadFix = "check that it is the run.h5 of a prism run (prism train writes one per run directory)";

H5::FileAccPropList read_plist() {
  H5::FileAccPropList fapl;
  // A writer in SWMR mode takes no HDF5 file lock, and readers need none.
  hdf5::check(H5Pset_file_locking(fapl.getId(), false, true), "H5Pset_file_locking");
  // A SWMR reader retries metadata whose checksum fails (a writer may be mid-update),
  // doubling its sleep each time: HDF5's default of 100 attempts turns one damaged
  // block into an endless wait. 20 attempts still wait out a live writer (~1 s).
  hdf5::check(H5Pset_metadata_read_attempts(fapl.getId(), 20), "H5Pset_metadata_read_attempts");
  return fapl;
}

// A series column's extent {rows, width}: 1-D (width 1) or rows x width. Any other rank is
// refused before HDF5 writes the dimensions (a rank-3 dataset would overrun the array).
std::array<hsize_t, 2> extent(const H5::DataSet& ds, const std::string& name) {
  H5::DataSpace space = ds.getSpace();
  const int rank = space.getSimpleExtentNdims();
  if (rank != 1 && rank != 2)
    throw H5::DataSetIException("read", fmt::format("{} has rank {}; a series column has rank 1 or 2", name, rank));
  hsize_t dims[2] = {0, 1};
  space.getSimpleExtentDims(dims);
  return {dims[0], dims[1]};
}

// The number of rows a series claims: len(<group>/step).
hsize_t rows(const H5::H5File& file, const std::string& group) {
  return extent(file.openDataSet(group + "/step"), group + "/step")[0];
}

// The first n rows (at most) of a 1-D or rows x width dataset.
template <class T>
std::vector<T> read_rows(const H5::H5File& file, const std::string& name, hsize_t n, const H5::PredType& type,
                         hsize_t* width = nullptr) {
  H5::DataSet ds = file.openDataSet(name);
  H5::DataSpace space = ds.getSpace();
  const int rank = space.getSimpleExtentNdims();
  const auto dims = extent(ds, name);
  n = std::min(n, dims[0]);
  if (width) *width = dims[1];
  // Rows the file claims but does not store (an extent far beyond the dataset's allocated
  // storage: damaged, or never written) would be read as fill values into memory sized by
  // the claim. Compressed data stores less than it holds, hence the generous factor.
  const double claimed = double(n) * double(dims[1]) * double(sizeof(T));
  if (claimed > 64.0 * double(ds.getStorageSize()) + double(1 << 20))
    throw H5::DataSetIException("read", fmt::format("{} claims {} rows of {} values but stores {} bytes: its extent is damaged",
                                                    name, n, dims[1], ds.getStorageSize()));
  std::vector<T> out(n * dims[1]);
  if (out.empty()) return out;
  hsize_t start[2] = {0, 0}, count[2] = {n, dims[1]};
  space.selectHyperslab(H5S_SELECT_SET, count, start);
  ds.read(out.data(), type, H5::DataSpace(rank, count), space);
  return out;
}

// The first n rows (at most) of a one-value-per-row column (1-D, or rows x 1).
template <class T>
std::vector<T> read_column(const H5::H5File& file, const std::string& name, hsize_t n, const H5::PredType& type) {
  hsize_t width = 1;
  auto out = read_rows<T>(file, name, n, type, &width);
  if (width != 1)
    throw H5::DataSetIException("read", fmt::format("{} holds {} values per row; a series column holds one", name, width));
  return out;
}

}  // namespace

std::string find_run_store(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (fs::is_regular_file(p, ec) && p.extension() == ".h5") return p.string();
  if (fs::is_regular_file(p, ec)) p = p.parent_path();  // model.safetensors -> its checkpoint dir
  // A run dir, or a checkpoint dir under <run>/checkpoints/.
  for (const fs::path& dir : {p, p.parent_path().parent_path()})
    if (fs::is_regular_file(dir / "run.h5", ec)) return (dir / "run.h5").string();
  return "";
}

RunReader::RunReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
  std::error_code ec;
  path_ = fs::is_directory(path, ec) ? (fs::path(path) / "run.h5").string() : path;
  if (!fs::exists(path_, ec))
    throw Error("no run store here", path_, "pass a run.h5 or a run directory written by prism train");
  QuietHdf5 quiet;
  if (H5Fis_hdf5(path_.c_str()) <= 0) throw Error("not an HDF5 file", path_, kReadFix);
  // A writer briefly leaves SWMR mode to write attributes or results, and HDF5 refuses
  // readers meanwhile ("already open for write", "not ... open for SWMR writing"): retry
  // then. Any other failure (a damaged file) is reported at once.
  for (int attempt = 0;; ++attempt) {
    try {
      impl_->file = std::make_unique<H5::H5File>(path_, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ,
                                                 H5::FileCreatPropList::DEFAULT, read_plist());
      break;
    } catch (const H5::Exception& e) {
      const std::string why = hdf5::detail(e);
      const bool writer_busy = why.find("open for") != std::string::npos;
      if (attempt >= 20 || !writer_busy)
        throw Error(fmt::format("cannot open the run store: {}", why), path_, kReadFix);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  try {
    H5::H5File& f = *impl_->file;
    for (const char* a : {"config", "heads", "seed", "status", "prism_version"})
      if (!f.attrExists(a)) throw Error(fmt::format("not a Prism run store (no root attribute '{}')", a), path_, kReadFix);
    impl_->attrs.config = hdf5::read_string_attribute(f, "config");
    impl_->attrs.prism_version = hdf5::read_string_attribute(f, "prism_version");
    impl_->status = hdf5::read_string_attribute(f, "status");
    H5::Attribute heads = f.openAttribute("heads");
    impl_->attrs.heads.resize(heads.getSpace().getSimpleExtentNpoints());
    heads.read(H5::PredType::NATIVE_INT, impl_->attrs.heads.data());
    f.openAttribute("seed").read(H5::PredType::NATIVE_UINT64, &impl_->attrs.seed);
    if (f.attrExists("world_size")) f.openAttribute("world_size").read(H5::PredType::NATIVE_INT, &impl_->attrs.world_size);
    if (f.attrExists("unigram_val_loss"))
      f.openAttribute("unigram_val_loss").read(H5::PredType::NATIVE_DOUBLE, &impl_->attrs.unigram_val_loss);
    if (f.attrExists("dtype")) impl_->attrs.dtype = hdf5::read_string_attribute(f, "dtype");
    if (f.attrExists("dtype_reason")) impl_->attrs.dtype_reason = hdf5::read_string_attribute(f, "dtype_reason");
  } catch (const H5::Exception& e) {
    throw Error(fmt::format("cannot read the run store: {}", hdf5::detail(e)), path_, kReadFix);
  }
}

RunReader::~RunReader() = default;
RunReader::RunReader(RunReader&&) noexcept = default;
RunReader& RunReader::operator=(RunReader&&) noexcept = default;

const RunAttributes& RunReader::attributes() const { return impl_->attrs; }
std::string RunReader::status() const { return impl_->status; }

std::vector<TrainRow> RunReader::train() const {
  QuietHdf5 quiet;
  try {
    const H5::H5File& f = *impl_->file;
    const hsize_t n = rows(f, "train");
    auto step = read_column<int64_t>(f, "train/step", n, H5::PredType::NATIVE_INT64);
    auto tokens = read_column<int64_t>(f, "train/tokens", n, H5::PredType::NATIVE_INT64);
    auto loss = read_column<double>(f, "train/loss", n, H5::PredType::NATIVE_DOUBLE);
    auto lr = read_column<double>(f, "train/lr", n, H5::PredType::NATIVE_DOUBLE);
    auto grad = read_column<double>(f, "train/grad_norm", n, H5::PredType::NATIVE_DOUBLE);
    auto time = read_column<double>(f, "train/time_s", n, H5::PredType::NATIVE_DOUBLE);
    // The rows every column has (a column cut short, e.g. by a writer killed mid-append).
    std::vector<TrainRow> out(std::min({step.size(), tokens.size(), loss.size(), lr.size(), grad.size(), time.size()}));
    for (size_t i = 0; i < out.size(); ++i) out[i] = {step[i], tokens[i], loss[i], lr[i], grad[i], time[i]};
    return out;
  } catch (const H5::Exception& e) {
    throw Error(fmt::format("cannot read /train: {}", hdf5::detail(e)), path_, kReadFix);
  }
}

std::vector<ValRow> RunReader::val() const {
  QuietHdf5 quiet;
  try {
    const H5::H5File& f = *impl_->file;
    const hsize_t n = rows(f, "val");
    auto step = read_column<int64_t>(f, "val/step", n, H5::PredType::NATIVE_INT64);
    auto tokens = read_column<int64_t>(f, "val/tokens", n, H5::PredType::NATIVE_INT64);
    auto loss = read_column<double>(f, "val/loss", n, H5::PredType::NATIVE_DOUBLE);
    // Files written before /val/loss_se existed have none: NaN.
    auto se = f.nameExists("val/loss_se") ? read_column<double>(f, "val/loss_se", n, H5::PredType::NATIVE_DOUBLE)
                                          : std::vector<double>();
    std::vector<ValRow> out(std::min({step.size(), tokens.size(), loss.size()}));
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = {step[i], tokens[i], loss[i]};
      if (i < se.size()) out[i].loss_se = se[i];
    }
    return out;
  } catch (const H5::Exception& e) {
    throw Error(fmt::format("cannot read /val: {}", hdf5::detail(e)), path_, kReadFix);
  }
}

AttentionSeries RunReader::attention() const {
  QuietHdf5 quiet;
  try {
    const H5::H5File& f = *impl_->file;
    const hsize_t n = rows(f, "attention");
    AttentionSeries s;
    s.step = read_column<int64_t>(f, "attention/step", n, H5::PredType::NATIVE_INT64);
    const auto& heads = impl_->attrs.heads;
    // Every layer first: the series keeps the rows that all of them have.
    std::vector<std::vector<double>> layers(heads.size());
    std::vector<hsize_t> widths(heads.size(), 0);
    size_t complete = s.step.size();
    for (size_t l = 0; l < heads.size(); ++l) {
      layers[l] = read_rows<double>(f, fmt::format("attention/layer_{:02d}/distance", l), n,
                                    H5::PredType::NATIVE_DOUBLE, &widths[l]);
      complete = std::min<size_t>(complete, widths[l] == 0 ? 0 : layers[l].size() / widths[l]);
    }
    s.step.resize(complete);
    s.per_head.assign(complete, std::vector<std::vector<double>>(heads.size()));
    for (size_t l = 0; l < heads.size(); ++l)
      for (size_t r = 0; r < complete; ++r)
        s.per_head[r][l].assign(layers[l].begin() + static_cast<std::ptrdiff_t>(r * widths[l]),
                                layers[l].begin() + static_cast<std::ptrdiff_t>((r + 1) * widths[l]));
    return s;
  } catch (const H5::Exception& e) {
    throw Error(fmt::format("cannot read /attention: {}", hdf5::detail(e)), path_, kReadFix);
  }
}

std::vector<EvalEntry> RunReader::eval() const {
  QuietHdf5 quiet;
  try {
    std::vector<EvalEntry> out;
    if (!impl_->file->nameExists("eval")) return out;
    H5::Group eval = impl_->file->openGroup("eval");
    for (hsize_t i = 0; i < eval.getNumObjs(); ++i) {
      std::string task = eval.getObjnameByIdx(i);
      if (eval.childObjType(task) != H5O_TYPE_GROUP || task.find(".partial") != std::string::npos) continue;
      out.push_back({task, hdf5::read_result_group(eval.openGroup(task))});
    }
    return out;
  } catch (const H5::Exception& e) {
    throw Error(fmt::format("cannot read /eval: {}", hdf5::detail(e)), path_, kReadFix);
  }
}

std::vector<std::string> RunReader::groups_under(const std::string& group) const {
  std::vector<std::string> out;
  if (!has_group(group)) return out;
  QuietHdf5 quiet;
  try {
    H5::Group g = impl_->file->openGroup(group);
    for (hsize_t i = 0; i < g.getNumObjs(); ++i) {
      std::string name = g.getObjnameByIdx(i);
      if (g.childObjType(name) == H5O_TYPE_GROUP && name.find(".partial") == std::string::npos) out.push_back(name);
    }
  } catch (const H5::Exception& e) {
    throw Error(fmt::format("cannot read /{}: {}", group, hdf5::detail(e)), path_, kReadFix);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool RunReader::has_group(const std::string& group) const {
  QuietHdf5 quiet;
  try {
    // Checked part by part: HDF5 fails, rather than says no, when a parent is missing.
    std::string prefix;
    for (size_t start = 0; start <= group.size();) {
      size_t end = std::min(group.find('/', start), group.size());
      prefix = group.substr(0, end);
      if (!impl_->file->nameExists(prefix)) return false;
      start = end + 1;
    }
    return impl_->file->childObjType(group) == H5O_TYPE_GROUP;
  } catch (const H5::Exception&) {
    return false;
  }
}

ResultGroup RunReader::read_group(const std::string& group) const {
  if (!has_group(group))
    throw Error(fmt::format("no /{} in this run store", group), path_,
                "measure it first (prism distance for attention/, prism eval for eval/, prism eval --position-loss "
                "for val/by_position/)");
  QuietHdf5 quiet;
  try {
    return hdf5::read_result_group(impl_->file->openGroup(group));
  } catch (const H5::Exception& e) {
    throw Error(fmt::format("cannot read /{}: {}", group, hdf5::detail(e)), path_, kReadFix);
  }
}

}  // namespace prism
