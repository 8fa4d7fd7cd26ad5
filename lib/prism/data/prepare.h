#pragma once
// Corpus preparation: text, JSONL (.gz, .zst) or Parquet corpora -> GPT-2 token
// shards in llm.c's format (input_files.h, document_reader.h). Each document
// becomes EOT (50256) followed by its tokens; the stream of all documents, in a
// fixed order, fills the validation shard first (<name>_val_000000.bin,
// val_tokens tokens) and then training shards of shard_tokens tokens
// (<name>_train_000001.bin, ...). A document may run across a shard boundary, as
// in llm.c. With val_tokens = shard_tokens = 10^8 and the documents in llm.c's
// order, the shards are byte for byte those of llm.c's dev/data/fineweb.py.
//
// Scale: the inputs are streamed (memory: one shard of tokens, 200 MB at 10^8,
// plus a few MB per thread, whatever the corpus's size; a shuffled text corpus
// also keeps 24 bytes per document); tokenisation runs on many threads and the
// output is byte for byte the same for any thread count. A preparation that
// stops (kill -9, a full disk, bad input) keeps its complete shards and
// continues from the last one when run again with the same settings
// (prepare_state.h); the result is byte for byte an uninterrupted run's.
//
// Bad input (a damaged file, a line that is not JSON, a missing key or column,
// text that is not UTF-8) stops with an error naming the file and the line, row
// or byte; with skip_bad such records (or the rest of such a file) are skipped
// and listed in prepare.json.
//
// The vocabulary is GPT-2's by default, any tiktoken ranks file (`vocab`), or a
// compact one trained here (`train_vocab` ids) on the training documents only:
// the documents that fill the validation shard never shape the vocabulary. The
// vocabulary used is copied to <output>/vocab.tiktoken, so a prepared corpus
// carries the tokenizer that reads it.
//
// A finished preparation also leaves prepare.json (what was read, counts, the
// vocabulary and its size, the shard list, and the unigram baseline: the
// cross-entropy on the validation shard of token frequencies counted on the
// training shards); it is written last, so its presence means the shards are whole.
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace prism {

struct PrepareProgress {
  uint64_t bytes_done = 0, bytes_total = 0;  // input bytes read / to read (as on disk: compressed)
  uint64_t text_bytes = 0;                   // document text tokenised
  uint64_t documents = 0, tokens = 0, skipped = 0;
  uint64_t max_tokens = 0;                   // the prefix asked for (0: everything)
  size_t shards = 0;                         // complete shards
  // Already done when this run started (a resumed preparation): rates count this run's work only.
  uint64_t resumed_bytes = 0, resumed_text_bytes = 0, resumed_tokens = 0;
  double seconds = 0;                        // of this run
  bool done = false;                         // the last report
};

struct PrepareOptions {
  std::vector<std::string> inputs;  // files, or directories (every input file below them, by path: input_files.h)
  std::string format = "auto";      // auto (by file name) | text | jsonl | parquet
  std::string text_key = "text";    // JSONL: the key of the text
  std::string text_column = "text"; // Parquet: the column of the text
  std::string output;               // directory for the shards (created)
  std::string name;                 // shard file prefix; default: the output directory's name
  std::string vocab;                // a tiktoken ranks file; default: default_vocab_path() (GPT-2's)
  int train_vocab = 0;              // > 0: train a compact vocabulary of this many ids instead (bpe_trainer.h)
  // How files divide into documents: "file" (one per file), "blank-line"
  // (paragraphs: runs of non-blank lines), "marker" (lines equal to `marker`).
  std::string split = "file";
  std::string marker;
  int64_t val_tokens = 100000;
  int64_t shard_tokens = 100000000;
  uint64_t max_tokens = 0;               // > 0: only the first max_tokens tokens (val included), e.g. 10B of a larger set
  bool skip_bad = false;                 // skip bad records (and unreadable rest of files), listed in prepare.json
  int threads = 0;                       // 0: every hardware thread
  size_t batch_bytes = size_t(1) << 20;  // text read per batch a thread tokenises
  std::optional<uint64_t> shuffle_seed;  // shuffle the document order (then the val shard samples the whole corpus)
  bool force = false;                    // replace a prepared directory
  std::string recipe;                    // recorded in prepare.json
  std::string fetch_hint;                // how to get the inputs, for the "input missing" error
  std::function<void(const PrepareProgress&)> progress;  // called from the calling thread
  std::function<void(const std::string&)> notice;         // a line worth telling (resuming, starting over)
};

struct PrepareSummary {
  std::string output;
  uint64_t files = 0, documents = 0, bytes = 0;
  uint64_t tokens = 0, val_tokens = 0, train_tokens = 0;
  uint64_t skipped = 0;              // bad records skipped (skip_bad)
  size_t resumed_shards = 0;         // shards a stopped run had written, kept
  std::vector<std::string> shards;  // paths, val first
  std::string vocab;                // the vocabulary's path: <output>/vocab.tiktoken ("" for GPT-2 in an old manifest)
  int vocab_size = 50257;           // ids, end-of-text included
  bool vocab_trained = false;       // a compact vocabulary trained on this corpus
  // Unigram baseline, in nats per token: add-1/2 (Krichevsky-Trofimov) smoothed
  // frequencies of the training shards, scored on the validation shard. A model
  // that does not beat it has learned nothing that uses context. NaN if unknown.
  double unigram_val_loss = std::numeric_limits<double>::quiet_NaN();
  double seconds = 0;
};

// Throws prism::Error for missing inputs, bad input (InputError: file and line,
// row or byte), too little text for a validation and a training shard, an
// already prepared output without `force`, or a write failure (the previous
// shards stay intact; the new complete ones are kept for the rerun).
PrepareSummary prepare_corpus(const PrepareOptions& opt);

// A recipe: a YAML file naming the inputs and settings of one corpus, e.g.
// data/recipes/austen.yaml. `name_or_path` is a file path, or a name looked up
// as data/recipes/<name>.yaml under the current directory. Relative paths in a
// recipe are relative to the recipe file.
PrepareOptions load_recipe(const std::string& name_or_path);

// The recipe under data/recipes/ (of the current directory) whose output is `dir`,
// by name, if there is one: for errors that say how to make a missing corpus.
std::optional<std::string> recipe_for_output(const std::string& dir);

// How to make `dir`'s shards, for an error's fix: `prism data prepare --recipe NAME`
// when a recipe writes it, else the general advice.
std::string prepare_hint(const std::string& dir);

// The text files of `inputs`: files as given, directories as every *.txt below
// them (sorted by path). Throws prism::Error for a missing input (with
// `fetch_hint` as the fix when there is one) or an empty directory.
// (input_files(inputs, "text", fetch_hint), paths only: what `data vocab` reads.)
std::vector<std::string> text_files(const std::vector<std::string>& inputs, const std::string& fetch_hint = "");

// The summary stored in <dir>/prepare.json, if the directory holds a finished
// preparation.
std::optional<PrepareSummary> read_prepared(const std::string& dir);

}  // namespace prism
