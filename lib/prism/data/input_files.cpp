#include "prism/data/input_files.h"

#include <algorithm>
#include <filesystem>

#include <sys/stat.h>

#include "prism/error.h"

namespace prism {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool is_jsonl_name(const std::string& name) {
  for (const char* base : {".jsonl", ".ndjson"})
    for (const char* z : {"", ".gz", ".zst"})
      if (ends_with(name, std::string(base) + z)) return true;
  return false;
}

// Whether a file found in a directory is an input of `format` ("auto": of any format).
bool listed(const fs::path& p, const std::string& format) {
  const std::string name = p.filename().string();
  const bool text = p.extension() == ".txt", jsonl = is_jsonl_name(name), parquet = p.extension() == ".parquet";
  if (format == "text") return text;
  if (format == "jsonl") return jsonl;
  if (format == "parquet") return parquet;
  return text || jsonl || parquet;
}

InputFile describe(const std::string& path, const std::string& format) {
  InputFile f;
  f.path = path;
  f.format = format == "auto" ? format_of(path)
             : format == "jsonl" ? InputFormat::jsonl
             : format == "parquet" ? InputFormat::parquet
                                   : InputFormat::text;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    f.bytes = static_cast<uint64_t>(st.st_size);
    f.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  }
  return f;
}

}  // namespace

const char* format_name(InputFormat f) {
  switch (f) {
    case InputFormat::jsonl: return "jsonl";
    case InputFormat::parquet: return "parquet";
    default: return "text";
  }
}

InputFormat format_of(const std::string& path) {
  const std::string name = fs::path(path).filename().string();
  if (ends_with(name, ".parquet")) return InputFormat::parquet;
  if (is_jsonl_name(name)) return InputFormat::jsonl;
  return InputFormat::text;
}

std::vector<InputFile> input_files(const std::vector<std::string>& inputs, const std::string& format,
                                   const std::string& fetch_hint) {
  if (format != "auto" && format != "text" && format != "jsonl" && format != "parquet")
    throw Error("unknown input format '" + format + "'", "--format", "use auto, text, jsonl or parquet");
  const std::string kinds = format == "auto" ? "input files (*.txt, *.jsonl[.gz|.zst], *.ndjson, *.parquet)"
                            : format == "text" ? "*.txt files"
                            : format == "jsonl" ? "*.jsonl / *.ndjson files (.gz, .zst)"
                                                : "*.parquet files";
  std::vector<InputFile> files;
  for (const auto& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::recursive_directory_iterator(in))
        if (e.is_regular_file() && listed(e.path(), format)) found.push_back(e.path().string());
      if (found.empty())
        throw Error("no " + kinds + " in the input directory", in,
                    fetch_hint.empty() ? "put the corpus there, or name the files" : fetch_hint);
      std::sort(found.begin(), found.end());
      for (const auto& f : found) files.push_back(describe(f, format));
    } else if (fs::is_regular_file(in, ec)) {
      files.push_back(describe(in, format));
    } else {
      throw Error("input not found", in, fetch_hint.empty() ? "check the path" : fetch_hint);
    }
  }
  if (files.empty()) throw Error("no input given", "prism data", "give input files or directories, or --recipe");
  return files;
}

}  // namespace prism
