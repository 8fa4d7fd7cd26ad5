#include "prism/data/dataset.h"

#include <fmt/format.h>

#include <filesystem>

#include "prism/data/prepare.h"
#include "prism/data/tokenizer.h"
#include "prism/error.h"

namespace prism {

DataDescription describe_data(const std::string& dir) {
  DataDescription d;
  if (dir.empty()) return d;
  if (auto p = read_prepared(dir)) {
    d.prepared = true;
    d.vocab = p->vocab;
    d.vocab_size = p->vocab_size;
    d.unigram_val_loss = p->unigram_val_loss;
  }
  return d;
}

void resolve_vocabulary(Config& c) {
  const DataDescription d = describe_data(c.data.dir);
  if (!c.model.vocab_from_data) {
    c.vocab_source = "model.vocab_size";
    if (d.prepared && c.model.vocab_size < d.vocab_size)
      throw Error(fmt::format("model.vocab_size = {} is smaller than the data's vocabulary of {} ids",
                              c.model.vocab_size, d.vocab_size),
                  c.data.dir + "/prepare.json",
                  fmt::format("set model.vocab_size to auto (the default) or to at least {}", d.vocab_size));
  } else if (d.prepared) {
    c.model.vocab_size = d.vocab_size;
    c.vocab_source = fmt::format("from {}", c.data.dir);
  } else if (c.data.dir.empty()) {
    c.vocab_source = "the preset's: no data.dir to take it from";
  } else {
    c.vocab_source = fmt::format("the preset's: {} is not prepared here (no prepare.json)", c.data.dir);
  }
  if (c.data.vocab.empty()) c.data.vocab = d.vocab;
}

void resolve_data_settings(Config& c) {
  resolve_vocabulary(c);
  c.model.vocab_from_data = false;
}

Config compose_run_config(const std::string& path, const std::vector<std::string>& overrides, SweepSection sweep) {
  Config c = load_config(path, overrides, sweep);
  resolve_vocabulary(c);
  return c;
}

std::string print_config(const Config& c) {
  std::string s = to_yaml(c) + "\n";
  if (c.model.vocab_from_data)
    s += fmt::format("# model.vocab_size: auto = {} ({})\n", c.model.vocab_size, c.vocab_source);
  return s;
}

std::string vocab_path_for(const Config& c) { return c.data.vocab.empty() ? default_vocab_path() : c.data.vocab; }

Gpt2Tokenizer open_tokenizer(const Config& c, const std::string& explicit_path) {
  const std::string path = explicit_path.empty() ? vocab_path_for(c) : explicit_path;
  if (explicit_path.empty() && !c.data.vocab.empty() && !std::filesystem::exists(path))
    throw Error("the model's vocabulary is not there", path,
                "run from the directory the model was trained in (data.vocab is relative to it), or pass --vocab FILE");
  Gpt2Tokenizer tok(path);
  if (tok.vocab_size() > c.model.vocab_size)
    throw Error(fmt::format("the tokenizer has {} ids, the model's vocabulary {}", tok.vocab_size(), c.model.vocab_size),
                path, "use the vocabulary the model was trained with (its data directory's vocab.tiktoken, --vocab)");
  return tok;
}

}  // namespace prism
