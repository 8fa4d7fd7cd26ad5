#pragma once
// What a run needs to know about its data directory before it builds a model:
// the vocabulary the shards were made with (so the model's vocab_size and the
// tokenizer of sample/eval/distance follow the data) and the unigram baseline
// every reported loss is compared with. A directory prepared by prism says so
// in prepare.json; llm.c's shards (no manifest) are GPT-2's.
#include <limits>
#include <string>

#include "prism/config/config.h"

namespace prism {

struct DataDescription {
  bool prepared = false;     // prepare.json is there
  std::string vocab;         // the ranks file ("" = GPT-2's default path)
  int vocab_size = 50257;    // ids with end-of-text
  double unigram_val_loss = std::numeric_limits<double>::quiet_NaN();  // nats per token; NaN unknown
};

// Reads <dir>/prepare.json when there is one. Throws prism::Error for a damaged manifest.
DataDescription describe_data(const std::string& dir);

// Takes model.vocab_size (when `auto`) and data.vocab (when empty) from data.dir's
// prepare.json where the directory is reachable and prepared, and says in
// Config::vocab_source where the vocabulary came from. The config still reads
// `vocab_size: auto` (to_yaml), so a sweep's stored trials do not change with the
// data. Throws prism::Error when an explicit model.vocab_size is smaller than the
// data's vocabulary (its ids would not fit the embedding), or the manifest is damaged.
void resolve_vocabulary(Config& c);

// resolve_vocabulary, and the config then records the number (a run's config.yaml).
void resolve_data_settings(Config& c);

// The one way every command reads a config file: train, sweep (its base and each
// trial), schedule, bench. Composes `path` with its defaults list and the
// overrides (config/compose.h: `group=option`, `key=value`, interpolation; path ""
// composes the overrides alone), parses it strictly (config/config.h), and
// resolves the vocabulary from the data (resolve_vocabulary), so every figure
// that depends on it (parameters, FLOPs, cost) uses the data's.
Config compose_run_config(const std::string& path, const std::vector<std::string>& overrides = {},
                          SweepSection sweep = SweepSection::Refuse);

// The resolved config as `--print-config` shows it: to_yaml, then where the
// vocabulary came from when the config says `auto`.
std::string print_config(const Config& c);

// The tokenizer file of a config: data.vocab, else GPT-2's (default_vocab_path).
std::string vocab_path_for(const Config& c);

class Gpt2Tokenizer;
// The tokenizer of a trained model: `explicit_path` when given, else the vocabulary
// its config names. Throws prism::Error naming the file and the fix when it is
// missing, or when the tokenizer has more ids than the model's embedding.
Gpt2Tokenizer open_tokenizer(const Config& c, const std::string& explicit_path = "");

}  // namespace prism
