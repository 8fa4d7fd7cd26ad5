#pragma once
// Documents of one input file, read in order with bounded memory, as records:
// the unit data preparation tokenises, skips or resumes at.
//
//   text     documents by a split rule: the whole file ("file"), paragraphs
//            (runs of non-blank lines, "blank-line"), or the text between lines
//            equal to a marker ("marker"); leading and trailing newlines are cut,
//            blank documents dropped. A record's index is the byte offset of its
//            first line, its locator the byte where its text starts.
//   jsonl    one record per non-blank line, index and locator the line number
//            (1-based); the text is the string under `text_key`, taken out
//            (decode_record) by whoever tokenises, so JSON is parsed on many threads.
//            An empty string is a document of its own (EOT alone), as in llm.c.
//   parquet  one record per row of `text_column`, index and locator the row (0-based);
//            a null value is a bad record.
//
// A record the reader finds bad (a null Parquet value) comes as a Record::Kind::bad
// with the reason as its bytes; a file the reader cannot go on with throws
// InputError (input_error.h), naming the file and the line or row.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "prism/data/input_files.h"

namespace prism {

struct ReadOptions {
  std::string split = "file";  // text: file | blank-line | marker
  std::string marker;
  std::string text_key = "text";     // jsonl
  std::string text_column = "text";  // parquet
};

struct Record {
  enum class Kind : uint8_t { text, json_line, bad };
  Kind kind = Kind::text;
  uint64_t index = 0;    // the position a reader can skip to (resume)
  uint64_t locator = 0;  // for messages: byte (text), line (jsonl), row (parquet)
};

class DocumentReader {
 public:
  virtual ~DocumentReader() = default;
  // The next record: its bytes (the text, the JSON line, or the reason it is bad) are
  // valid until the next call. False at the end of the file.
  virtual bool next(Record& record, std::string_view& bytes) = 0;
  // Before the first next() (resume): makes next() start at the first record whose
  // index is >= `index`.
  virtual void skip_to(uint64_t index) = 0;
  // Bytes of the file consumed so far (progress; compressed bytes for a compressed file).
  virtual uint64_t bytes_read() const = 0;
};

// Throws prism::Error if the file cannot be opened, InputError if it is not of its format.
std::unique_ptr<DocumentReader> open_document_reader(const InputFile& file, const ReadOptions& options);

// The text of a record: a text record's bytes as they are, a JSON line's string under
// `text_key` (written to `storage`). Throws InputError for a line that is not a JSON
// object, has no such key, or holds something else than a string there.
std::string_view decode_record(const Record& record, std::string_view bytes, const std::string& text_key,
                               std::string& storage);

// The text of a record, checked: decode_record, then valid UTF-8. For a record that
// cannot become a document (a bad one, a line decode_record refuses, text that is not
// UTF-8) returns nothing and sets `problem`, said with its place ("line 7: not valid
// JSON (...)", "not valid UTF-8 at byte 15" for a text file), and `fix`.
std::string_view document_text(InputFormat format, const Record& record, std::string_view bytes,
                               const std::string& text_key, std::string& storage, std::string& problem,
                               std::string& fix);

// Where a record is, for messages: "line 12", "row 3", "byte 4096".
std::string record_place(InputFormat format, uint64_t locator);

}  // namespace prism
