#pragma once
// The input files of a corpus and their formats. Given paths are taken as they
// are; a directory stands for every input file below it (any depth), sorted by
// path, which is the order Hugging Face's `datasets` reads a snapshot's files in
// (FineWeb's sample/10BT/000_00000.parquet, 001_00000.parquet, ...).
//
// Formats, by name (or all one format, `format`):
//   text     *.txt (and, given by name, any other file): UTF-8 text, cut into
//            documents by a split rule (document_reader.h)
//   jsonl    *.jsonl *.ndjson, plain or compressed (.gz, .zst: recognised by
//            their magic bytes): one JSON object per line, the text under a key
//   parquet  *.parquet: the text in a string column
#include <cstdint>
#include <string>
#include <vector>

namespace prism {

enum class InputFormat { text, jsonl, parquet };
const char* format_name(InputFormat f);

struct InputFile {
  std::string path;
  InputFormat format = InputFormat::text;
  uint64_t bytes = 0;     // size on disk
  int64_t mtime_ns = 0;   // modification time (a resumed preparation checks its inputs did not change)
};

// The format a file name implies: .parquet, .jsonl/.ndjson (+ .gz/.zst), else text.
InputFormat format_of(const std::string& path);

// `format`: "auto" (by name), "text", "jsonl" or "parquet". Throws prism::Error for a
// missing input (with `fetch_hint` as the fix when there is one), a directory without
// input files, or an unknown format.
std::vector<InputFile> input_files(const std::vector<std::string>& inputs, const std::string& format = "auto",
                                   const std::string& fetch_hint = "");

}  // namespace prism
