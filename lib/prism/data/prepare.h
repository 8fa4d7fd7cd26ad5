#pragma once
// Corpus preparation: UTF-8 text files -> GPT-2 token shards in llm.c's format.
// Each document becomes EOT (50256) followed by its tokens; the stream of all
// documents, in a fixed order, fills the validation shard first
// (<name>_val_000000.bin, val_tokens tokens) and then training shards of
// shard_tokens tokens (<name>_train_000001.bin, ...). A document may run across
// a shard boundary, as in llm.c. Tokenisation runs on many threads; the output
// is byte for byte the same for any thread count.
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
  uint64_t bytes_done = 0, bytes_total = 0;  // text bytes tokenised / to tokenise
  uint64_t documents = 0, tokens = 0;
  double seconds = 0;
};

struct PrepareOptions {
  std::vector<std::string> inputs;  // text files, or directories (every *.txt below them, by path)
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
  int threads = 0;                       // 0: every hardware thread
  std::optional<uint64_t> shuffle_seed;  // shuffle the document order (then the val shard samples the whole corpus)
  bool force = false;                    // replace a prepared directory
  std::string recipe;                    // recorded in prepare.json
  std::string fetch_hint;                // how to get the inputs, for the "input missing" error
  std::function<void(const PrepareProgress&)> progress;  // called from the calling thread
};

struct PrepareSummary {
  std::string output;
  uint64_t files = 0, documents = 0, bytes = 0;
  uint64_t tokens = 0, val_tokens = 0, train_tokens = 0;
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

// Throws prism::Error for missing inputs, non-UTF-8 text (file and byte), too
// little text for a validation and a training shard, an already prepared
// output without `force`, or a write failure (the previous shards stay intact).
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
std::vector<std::string> text_files(const std::vector<std::string>& inputs, const std::string& fetch_hint = "");

// The summary stored in <dir>/prepare.json, if the directory holds a finished
// preparation.
std::optional<PrepareSummary> read_prepared(const std::string& dir);

}  // namespace prism
