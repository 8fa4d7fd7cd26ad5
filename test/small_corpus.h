#pragma once
// A corpus small enough for a test and big enough to train a vocabulary apart from
// its validation document: two text files of 400 repeated lines in DIR/in, prepared
// into DIR/data with a `vocab`-id vocabulary (500 validation tokens).
#include <fmt/format.h>

#include <filesystem>
#include <string>

#include "prism/data/prepare.h"
#include "support.h"

namespace prism::test {

inline PrepareSummary prepare_small_corpus(const TempDir& dir, int vocab) {
  std::string text;
  for (int i = 0; i < 400; ++i) text += fmt::format("Line {} of a small corpus, with words that repeat. ", i);
  std::filesystem::create_directories(dir.file("in"));
  write_file(dir.file("in/a.txt"), text);
  write_file(dir.file("in/b.txt"), text + "More.");  // the validation document
  PrepareOptions o;
  o.inputs = {dir.file("in")};
  o.output = dir.file("data");
  o.train_vocab = vocab;
  o.val_tokens = 500;
  return prepare_corpus(o);
}

}  // namespace prism::test
