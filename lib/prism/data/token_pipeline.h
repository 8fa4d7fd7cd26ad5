#pragma once
// Tokenises a DocumentSource on many threads and hands the tokens back in input
// order. One thread reads records into batches of about `batch_bytes`; the
// workers each take a whole batch, parse JSON lines and tokenise (EOT, then the
// document's ids); the caller takes finished batches in order. At most
// `batches_in_flight` batches exist at once, so memory is bounded by that many
// batches whatever the corpus's size, and the tokens do not depend on the number
// of threads.
//
// Bad input does not stop the pipeline by itself: a record that cannot become a
// document (not JSON, no text key, not UTF-8, a null value) comes back with its
// problem, and so does a file that cannot be read on when `skip_bad_files` is set
// (one record for the rest of the file); the caller decides to skip or to stop.
// Other failures, and an unreadable file without `skip_bad_files`, end the stream:
// the batch that holds the records before it carries the error.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "prism/data/document_source.h"
#include "prism/error.h"

namespace prism {

class Gpt2Tokenizer;

struct TokenizedRecord {
  uint32_t file = 0;
  uint64_t locator = 0;      // line, row or byte (record_place)
  SourcePosition position;   // in the source's order
  uint32_t tokens = 0;       // EOT + the document's ids, next in the batch's `tokens`
  uint64_t text_bytes = 0;   // bytes of the document's text
  uint64_t input_bytes = 0;  // of the source read once this record was (progress)
  std::string problem;       // not empty: a bad record, said with its place; no tokens
  std::string fix;           // for a bad record
};

struct TokenBatch {
  std::vector<uint16_t> tokens;
  std::vector<TokenizedRecord> records;
  std::optional<Error> error;  // after these records the stream ends with this error
};

struct PipelineOptions {
  int threads = 1;                     // tokenising threads
  size_t batch_bytes = size_t(1) << 20;
  int batches_in_flight = 0;           // 0: 2 x threads + 2
  bool skip_bad_files = false;
};

class TokenPipeline {
 public:
  // Starts reading `source` where it stands (seek it first) and tokenising.
  TokenPipeline(DocumentSource& source, const Gpt2Tokenizer& tokenizer, const PipelineOptions& options);
  ~TokenPipeline();  // stops and joins the threads
  TokenPipeline(const TokenPipeline&) = delete;
  TokenPipeline& operator=(const TokenPipeline&) = delete;

  // The next batch in input order; false once the source is exhausted (or the
  // batch with the error was taken).
  bool next(TokenBatch& batch);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One record's tokens, into `ids`: EOT, then the ids of its text (a JSON line's
// string under `text_key`), whose size goes to `text_bytes`. Returns "" or, for a record that cannot become a
// document, the problem with its place ("line 7: not valid JSON (...)"), and sets
// `fix`. Used by the pipeline's workers and by single-threaded passes.
std::string tokenize_record(const Gpt2Tokenizer& tokenizer, InputFormat format, const Record& record,
                            std::string_view bytes, const std::string& text_key, std::vector<uint32_t>& ids,
                            uint64_t& text_bytes, std::string& fix);

}  // namespace prism
