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

void resolve_data_settings(Config& c) {
  const DataDescription d = describe_data(c.data.dir);
  if (c.model.vocab_from_data) {
    if (d.prepared) c.model.vocab_size = d.vocab_size;
    c.model.vocab_from_data = false;
  } else if (d.prepared && c.model.vocab_size < d.vocab_size) {
    throw Error(fmt::format("model.vocab_size = {} is smaller than the data's vocabulary of {} ids", c.model.vocab_size,
                            d.vocab_size),
                c.data.dir + "/prepare.json",
                fmt::format("set model.vocab_size to auto (the default) or to at least {}", d.vocab_size));
  }
  if (c.data.vocab.empty()) c.data.vocab = d.vocab;
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
