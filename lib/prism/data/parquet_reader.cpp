// The one TU that sees Arrow (parquet_reader.h says why). Compiled as C++20 in
// the object library prism_parquet; without Arrow (PRISM_WITH_PARQUET unset) it
// only refuses, naming the fix. No fmt here: LibTorch's copy of fmt's headers
// shadows the system's in the other TUs, and two versions must not meet.
#include "prism/data/parquet_reader.h"

#include <algorithm>
#include <exception>
#include <string>
#include <vector>

#include "prism/data/input_error.h"

#if PRISM_WITH_PARQUET
#include <arrow/array/array_binary.h>
#include <arrow/io/file.h>
#include <arrow/io/memory.h>
#include <arrow/memory_pool.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/schema.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/properties.h>
#endif

namespace prism {

namespace {

constexpr const char* kBadFileFix =
    "check the file (python -c \"import pyarrow.parquet as pq; pq.read_table('FILE')\"), fetch it again, "
    "or pass --skip-bad to skip it";

}  // namespace

#if PRISM_WITH_PARQUET

bool parquet_supported() { return true; }

struct ParquetColumnReader::Impl {
  std::string path, column;
  std::shared_ptr<arrow::io::RandomAccessFile> file;
  std::unique_ptr<parquet::arrow::FileReader> reader;
  int leaf = -1;
  uint64_t size = 0, total = 0;
  std::vector<uint64_t> first_row;  // of each row group, then the total
  std::unique_ptr<arrow::RecordBatchReader> batches;
  std::shared_ptr<arrow::Array> array;  // the current batch's column
  int64_t at = 0;                        // next index in `array`
  size_t group = 0;                      // the row group `batches` reads
  uint64_t row = 0;                      // next row of the file

  InputError error(const std::string& what) const { return InputError(what, path, kBadFileFix); }

  // Arrow reports some damage by exceptions (parquet::ParquetException), some by Status.
  void open(std::shared_ptr<arrow::io::RandomAccessFile> f) {
    try {
      open_file(std::move(f));
    } catch (const InputError&) {
      throw;
    } catch (const std::exception& e) {
      throw error(std::string("not a readable Parquet file: ") + e.what());
    }
  }

  void open_file(std::shared_ptr<arrow::io::RandomAccessFile> f) {
    file = std::move(f);
    // The system allocator: bounded by what is live (a caching allocator would keep
    // its peak), and seen by the sanitizers when the reader is fuzzed.
    arrow::MemoryPool* pool = arrow::system_memory_pool();
    parquet::ReaderProperties props(pool);
    props.enable_buffered_stream();  // pages are read as they are decoded, not a column chunk at once
    props.set_buffer_size(int64_t(1) << 20);
    parquet::ArrowReaderProperties arrow_props;
    arrow_props.set_use_threads(false);
    arrow_props.set_pre_buffer(false);
    arrow_props.set_batch_size(1024);
    std::unique_ptr<parquet::ParquetFileReader> raw = parquet::ParquetFileReader::Open(file, props);
    const auto meta = raw->metadata();
    first_row.push_back(0);
    for (int g = 0; g < meta->num_row_groups(); ++g) {
      const int64_t n = meta->RowGroup(g)->num_rows();
      if (n < 0) throw error("damaged footer: row group " + std::to_string(g) + " has " + std::to_string(n) + " rows");
      first_row.push_back(first_row.back() + static_cast<uint64_t>(n));
    }
    total = first_row.back();
    auto made = parquet::arrow::FileReader::Make(pool, std::move(raw), arrow_props);
    if (!made.ok()) throw error("not a readable Parquet file: " + made.status().ToString());
    reader = std::move(made).ValueUnsafe();
    find_column();
  }

  void find_column() {
    std::string names;
    for (const auto& f : reader->manifest().schema_fields) {
      if (!f.field) continue;
      names += (names.empty() ? "" : ", ") + f.field->name();
      if (f.field->name() != column) continue;
      const auto id = f.field->type()->id();
      if (!f.is_leaf() || (id != arrow::Type::STRING && id != arrow::Type::LARGE_STRING && id != arrow::Type::STRING_VIEW))
        throw InputError("column '" + column + "' holds " + f.field->type()->ToString() + ", not strings", path,
                         "name the text column with --text-column");
      leaf = f.column_index;
    }
    if (leaf < 0)
      throw InputError("no column '" + column + "' (the file has: " + (names.empty() ? "no columns" : names) + ")", path,
                       "name the text column with --text-column, or pass --skip-bad to skip such files");
  }

  // Starts reading at row group `g`. Each row group is read by its own batch
  // reader, so that its rows are the ones its footer entry counts: a reader over
  // several groups would let a group whose data holds more values than its footer
  // says spill them into the next group's rows, and skip_to (which starts at a
  // group's footer row) would then give other rows than a read from the start.
  void start_at(size_t g) {
    array.reset();
    at = 0;
    group = g;
    row = first_row[g];
    batches.reset();
    if (g + 1 >= first_row.size()) return;
    try {
      auto r = reader->GetRecordBatchReader(std::vector<int>{static_cast<int>(g)}, std::vector<int>{leaf});
      if (!r.ok()) throw error("cannot read from row " + std::to_string(row) + ": " + r.status().ToString());
      batches = std::move(r).ValueUnsafe();
    } catch (const InputError&) {
      throw;
    } catch (const std::exception& e) {
      throw error("cannot read from row " + std::to_string(row) + ": " + e.what());
    }
  }

  // Makes `array` hold row `row`; false at the end.
  bool load() {
    while (!array || at >= array->length()) {
      if (!batches) return false;
      std::shared_ptr<arrow::RecordBatch> batch;
      try {
        auto st = batches->ReadNext(&batch);
        if (!st.ok()) throw error("damaged data at row " + std::to_string(row) + ": " + st.ToString());
      } catch (const InputError&) {
        throw;
      } catch (const std::exception& e) {
        throw error("damaged data at row " + std::to_string(row) + ": " + e.what());
      }
      if (!batch) {
        const uint64_t end = first_row[group + 1];
        if (row != end)
          throw error("row group " + std::to_string(group) + ": the footer announces " +
                      std::to_string(end - first_row[group]) + " rows, the data holds " +
                      std::to_string(row - first_row[group]));
        start_at(group + 1);
        continue;
      }
      if (batch->num_columns() != 1) throw error("a batch of " + std::to_string(batch->num_columns()) + " columns");
      if (row + static_cast<uint64_t>(batch->num_rows()) > first_row[group + 1])
        throw error("row group " + std::to_string(group) + ": the footer announces " +
                    std::to_string(first_row[group + 1] - first_row[group]) + " rows, the data holds more");
      array = batch->column(0);
      at = 0;
    }
    return true;
  }

  bool next(std::string_view& value, bool& null) {
    if (!load()) return false;
    null = array->IsNull(at);
    value = {};
    if (!null) {
      switch (array->type_id()) {
        case arrow::Type::STRING: value = static_cast<const arrow::StringArray&>(*array).GetView(at); break;
        case arrow::Type::LARGE_STRING: value = static_cast<const arrow::LargeStringArray&>(*array).GetView(at); break;
        case arrow::Type::STRING_VIEW: value = static_cast<const arrow::StringViewArray&>(*array).GetView(at); break;
        default: throw error("column '" + column + "' read as " + array->type()->ToString() + ", not strings");
      }
    }
    ++at;
    ++row;
    return true;
  }
};

ParquetColumnReader::ParquetColumnReader(const std::string& path, const std::string& column)
    : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  impl_->column = column;
  auto f = arrow::io::ReadableFile::Open(path, arrow::system_memory_pool());
  if (!f.ok()) throw Error("cannot open: " + f.status().message(), path, "check the file and its permissions");
  auto size = (*f)->GetSize();
  impl_->size = size.ok() ? static_cast<uint64_t>(*size) : 0;
  impl_->open(*f);
  impl_->start_at(0);
}

ParquetColumnReader::ParquetColumnReader(std::string_view bytes, const std::string& name, const std::string& column)
    : impl_(std::make_unique<Impl>()) {
  impl_->path = name;
  impl_->column = column;
  impl_->size = bytes.size();
  auto buffer = std::make_shared<arrow::Buffer>(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                static_cast<int64_t>(bytes.size()));
  impl_->open(std::make_shared<arrow::io::BufferReader>(buffer));
  impl_->start_at(0);
}

ParquetColumnReader::~ParquetColumnReader() = default;

bool ParquetColumnReader::next(std::string_view& value, bool& null) { return impl_->next(value, null); }

uint64_t ParquetColumnReader::row() const { return impl_->row; }

void ParquetColumnReader::skip_to(uint64_t row) {
  Impl& m = *impl_;
  if (row <= m.row) return;
  if (row >= m.total) {
    m.start_at(m.first_row.size() - 1);
    return;
  }
  const size_t g = static_cast<size_t>(std::upper_bound(m.first_row.begin(), m.first_row.end(), row) - m.first_row.begin()) - 1;
  if (m.first_row[g] > m.row) m.start_at(g);
  std::string_view v;
  bool null = false;
  while (m.row < row && m.next(v, null)) {
  }
}

uint64_t ParquetColumnReader::rows() const { return impl_->total; }
int ParquetColumnReader::row_groups() const { return static_cast<int>(impl_->first_row.size()) - 1; }
uint64_t ParquetColumnReader::file_size() const { return impl_->size; }
const std::string& ParquetColumnReader::path() const { return impl_->path; }

#else  // built without Arrow

bool parquet_supported() { return false; }

struct ParquetColumnReader::Impl {
  std::string path;
};

namespace {
[[noreturn]] void refuse(const std::string& path) {
  throw Error("a Parquet file, and this prism was built without Arrow C++", path,
              "install pyarrow into the venv (scripts/setup.sh does) and reconfigure and rebuild prism "
              "(cmake/PrismFindArrow.cmake), or convert the file to JSONL");
}
}  // namespace

ParquetColumnReader::ParquetColumnReader(const std::string& path, const std::string&) { refuse(path); }
ParquetColumnReader::ParquetColumnReader(std::string_view, const std::string& name, const std::string&) { refuse(name); }
ParquetColumnReader::~ParquetColumnReader() = default;
bool ParquetColumnReader::next(std::string_view&, bool&) { return false; }
uint64_t ParquetColumnReader::row() const { return 0; }
void ParquetColumnReader::skip_to(uint64_t) {}
uint64_t ParquetColumnReader::rows() const { return 0; }
int ParquetColumnReader::row_groups() const { return 0; }
uint64_t ParquetColumnReader::file_size() const { return 0; }
const std::string& ParquetColumnReader::path() const { return impl_->path; }

#endif

}  // namespace prism
