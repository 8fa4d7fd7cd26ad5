#pragma once
// The records of a whole corpus in the order they become tokens: the input
// files in order, each file's records in order (document_reader.h); or, with a
// shuffle seed, the documents of text files in a seeded random order (the
// documents are indexed first: 24 bytes each in memory, the text read back by
// offset). A source starts at any position of that order (resume).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "prism/data/document_reader.h"
#include "prism/data/input_files.h"

namespace prism {

// A place in a source's order: (file, record index in it); in a shuffled source
// (0, place in the shuffled order).
struct SourcePosition {
  uint32_t file = 0;
  uint64_t index = 0;
};

struct SourceRecord {
  Record record;
  uint32_t file = 0;  // the input file it comes from
  SourcePosition position;
};

class DocumentSource {
 public:
  // Throws prism::Error for a shuffle of inputs that are not all text files.
  DocumentSource(std::vector<InputFile> files, ReadOptions options, std::optional<uint64_t> shuffle_seed = std::nullopt);
  ~DocumentSource();
  DocumentSource(const DocumentSource&) = delete;
  DocumentSource& operator=(const DocumentSource&) = delete;

  // Before the first next(): start at `p`.
  void seek(const SourcePosition& p);
  // The next record (bytes valid until the next call); false at the end. A file that
  // cannot be read on throws (InputError when its data is bad); skip_file() then goes
  // on with the next file.
  bool next(SourceRecord& r, std::string_view& bytes);
  void skip_file();
  // The position next() would read next (where skip_file() resumes after a failure).
  SourcePosition position() const;

  const std::vector<InputFile>& files() const;
  const ReadOptions& options() const;
  uint64_t bytes_read() const;   // input bytes consumed (progress)
  uint64_t bytes_total() const;  // of all inputs

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prism
