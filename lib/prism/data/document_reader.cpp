#include "prism/data/document_reader.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "prism/data/decompress.h"
#include "prism/data/input_error.h"
#include "prism/data/parquet_reader.h"
#include "prism/data/tokenizer.h"

namespace prism {

namespace {

constexpr const char* kUtf8Fix =
    "convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8) or leave it out, or pass --skip-bad to skip such documents";

std::string fix_for(InputFormat format, const std::string& problem) {
  if (problem.find("UTF-8") != std::string::npos) return kUtf8Fix;
  if (problem.find("no key") != std::string::npos) return "name the text's key with --text-key, or pass --skip-bad to skip such lines";
  if (format == InputFormat::parquet) return "pass --skip-bad to skip such rows";
  return "fix or remove the line, or pass --skip-bad to skip such lines";
}

bool is_blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; });
}

size_t leading_newlines(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && (s[n] == '\n' || s[n] == '\r')) ++n;
  return n;
}

std::string_view trim_newlines(std::string_view s) {
  s.remove_prefix(leading_newlines(s));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Text cut into documents by the split rule. A document is a run of whole lines,
// so its bytes are one range of the file: [first line's offset, last line's end).
class TextReader : public DocumentReader {
 public:
  TextReader(const InputFile& f, const ReadOptions& o) : file_(f.path, /*detect=*/false), lines_(file_), opt_(o) {}

  bool next(Record& r, std::string_view& bytes) override {
    return opt_.split == "file" ? next_file(r, bytes) : next_split(r, bytes);
  }

  void skip_to(uint64_t index) override {
    if (opt_.split == "file") {
      done_ = done_ || index > 0;
      return;
    }
    file_.skip_to(index);  // a document's first line follows a separator: start afresh there
    lines_ = LineReader(file_);
  }

  uint64_t bytes_read() const override { return file_.file_bytes_read(); }

 private:
  bool next_file(Record& r, std::string_view& bytes) {
    while (!done_) {
      done_ = true;
      doc_.clear();
      char buf[1 << 16];
      for (size_t n; (n = file_.read(buf, sizeof buf)) > 0;) doc_.append(buf, n);
      if (is_blank(trim_newlines(doc_))) return false;
      r = {Record::Kind::text, 0, 0};
      bytes = doc_;
      return true;
    }
    return false;
  }

  bool next_split(Record& r, std::string_view& bytes) {
    std::string_view line;
    bool in_doc = false;
    uint64_t begin = 0;
    doc_.clear();
    for (;;) {
      const bool got = lines_.next(line);
      const bool separator = got && is_separator(line);
      if (!got || separator) {
        if (in_doc) {
          const size_t lead = leading_newlines(doc_);
          const std::string_view text = trim_newlines(doc_);
          if (!is_blank(text)) {
            r = {Record::Kind::text, begin, begin + lead};
            bytes = text;
            return true;
          }
          in_doc = false;
          doc_.clear();
        }
        if (!got) return false;
        continue;
      }
      if (!in_doc) {
        in_doc = true;
        begin = lines_.line_offset();
      } else {
        doc_ += '\n';
      }
      doc_.append(line.data(), line.size());
    }
  }

  bool is_separator(std::string_view line) const {
    if (opt_.split == "blank-line") return is_blank(line);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return line == opt_.marker;
  }

  DecompressedFile file_;
  LineReader lines_;
  ReadOptions opt_;
  std::string doc_;
  bool done_ = false;
};

class JsonlReader : public DocumentReader {
 public:
  explicit JsonlReader(const InputFile& f) : file_(f.path), lines_(file_) {}

  bool next(Record& r, std::string_view& bytes) override {
    std::string_view line;
    while (lines_.next(line)) {
      if (lines_.line_number() < skip_below_ || is_blank(line)) continue;
      r = {Record::Kind::json_line, lines_.line_number(), lines_.line_number()};
      bytes = line;
      return true;
    }
    return false;
  }

  void skip_to(uint64_t index) override { skip_below_ = std::max(skip_below_, index); }
  uint64_t bytes_read() const override { return file_.file_bytes_read(); }

 private:
  DecompressedFile file_;
  LineReader lines_;
  uint64_t skip_below_ = 0;
};

class ParquetReader : public DocumentReader {
 public:
  ParquetReader(const InputFile& f, const ReadOptions& o) : column_(f.path, o.text_column) {}

  bool next(Record& r, std::string_view& bytes) override {
    const uint64_t row = column_.row();
    bool null = false;
    if (!column_.next(bytes, null)) return false;
    r = {null ? Record::Kind::bad : Record::Kind::text, row, row};
    if (null) bytes = "the text is null";
    return true;
  }

  void skip_to(uint64_t index) override { column_.skip_to(index); }

  uint64_t bytes_read() const override {
    return column_.rows() == 0 ? column_.file_size()
                               : static_cast<uint64_t>(static_cast<double>(column_.file_size()) *
                                                       static_cast<double>(column_.row()) / static_cast<double>(column_.rows()));
  }

 private:
  ParquetColumnReader column_;
};

}  // namespace

std::unique_ptr<DocumentReader> open_document_reader(const InputFile& file, const ReadOptions& options) {
  switch (file.format) {
    case InputFormat::jsonl: return std::make_unique<JsonlReader>(file);
    case InputFormat::parquet: return std::make_unique<ParquetReader>(file, options);
    default: return std::make_unique<TextReader>(file, options);
  }
}

std::string_view decode_record(const Record& record, std::string_view bytes, const std::string& text_key,
                               std::string& storage) {
  if (record.kind != Record::Kind::json_line) return bytes;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(bytes.begin(), bytes.end());
  } catch (const nlohmann::json::exception& e) {
    const size_t bad = utf8_error_offset(bytes);
    if (bad != std::string_view::npos) throw InputError(fmt::format("not valid UTF-8 at byte {} of the line", bad), "", "");
    std::string what = e.what();
    if (what.rfind("[json.exception.", 0) == 0 && what.find("] ") != std::string::npos) what = what.substr(what.find("] ") + 2);
    throw InputError(fmt::format("not valid JSON ({})", what), "", "");
  }
  if (!j.is_object()) throw InputError(fmt::format("a JSON {}, not an object", j.type_name()), "", "");
  auto it = j.find(text_key);
  if (it == j.end()) {
    std::string keys;
    for (auto k = j.begin(); k != j.end() && keys.size() < 200; ++k) keys += (keys.empty() ? "" : ", ") + k.key();
    throw InputError(fmt::format("no key \"{}\" (the object has: {})", text_key, keys.empty() ? "no keys" : keys), "", "");
  }
  if (!it->is_string()) throw InputError(fmt::format("\"{}\" is a JSON {}, not a string", text_key, it->type_name()), "", "");
  storage = std::move(it->get_ref<std::string&>());
  return storage;
}

std::string_view document_text(InputFormat format, const Record& record, std::string_view bytes,
                               const std::string& text_key, std::string& storage, std::string& problem,
                               std::string& fix) {
  problem.clear();
  if (record.kind == Record::Kind::bad) {
    problem = fmt::format("{}: {}", record_place(format, record.locator), bytes);
    fix = fix_for(format, problem);
    return {};
  }
  std::string_view text;
  try {
    text = decode_record(record, bytes, text_key, storage);
  } catch (const InputError& e) {
    problem = fmt::format("{}: {}", record_place(format, record.locator), e.what_part());
    fix = fix_for(format, problem);
    return {};
  }
  const size_t bad = utf8_error_offset(text);
  if (bad != std::string_view::npos) {
    problem = format == InputFormat::text
                  ? fmt::format("not valid UTF-8 at byte {}", record.locator + bad)
                  : fmt::format("{}: the text is not valid UTF-8 at byte {}", record_place(format, record.locator), bad);
    fix = kUtf8Fix;
    return {};
  }
  return text;
}

std::string record_place(InputFormat format, uint64_t locator) {
  switch (format) {
    case InputFormat::jsonl: return fmt::format("line {}", locator);
    case InputFormat::parquet: return fmt::format("row {}", locator);
    default: return fmt::format("byte {}", locator);
  }
}

}  // namespace prism
