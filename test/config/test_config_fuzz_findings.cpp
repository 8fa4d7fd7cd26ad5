// Inputs the config fuzzer (fuzz/fuzz_config.cpp) found to break composition.
// Each is kept in fuzz/corpus/config/ and replayed here as the harness runs it
// (the input as the primary file, groups from experiments/): the answer must be
// one prism::Error naming the file and the fix.
#include <catch2/catch.hpp>

#include "prism/config/compose.h"
#include "prism/config/config.h"
#include "prism/error.h"
#include "support.h"

using namespace prism::test;

namespace {

std::string compose_outcome(const std::string& primary, const std::vector<std::string>& overrides = {}) {
  try {
    prism::ComposeOptions options;
    options.search_path = {source_path("experiments")};
    auto c = prism::compose(primary, prism::parse_overrides(overrides), options);
    prism::parse_config(c.root, c.source, c.origins);
    return "composed";
  } catch (const prism::Error& e) {
    return std::string("error: ") + e.what();
  }
}

}  // namespace

TEST_CASE("a group option whose name the file system refuses is an unknown option, not an internal error",
          "[config][fuzz]") {
  // Found by prism_fuzz_config: `- model: test<300 bytes>` made the group lookup throw
  // std::filesystem::filesystem_error ("File name too long") out of compose().
  TempDir dir("prism-config");
  const std::string found = dir.file("main.yaml");
  write_file(found, read_file(source_path("fuzz/corpus/config/crash-option-name-too-long.yaml")));
  CHECK_THAT(compose_outcome(found), Catch::StartsWith("error: ") && Catch::Contains("has no option") &&
                                         Catch::Contains("Fix: use one of:"));
  // The same from the command line, and as a plain file in a defaults list.
  const std::string plain = dir.file("plain.yaml");
  write_file(plain, "defaults:\n  - model: test-tiny\n");
  CHECK_THAT(compose_outcome(plain, {"model=" + std::string(300, 'x')}),
             Catch::StartsWith("error: ") && Catch::Contains("has no option"));
  write_file(plain, "defaults:\n  - " + std::string(300, 'y') + "\n");
  CHECK_THAT(compose_outcome(plain), Catch::StartsWith("error: ") && Catch::Contains("names no file"));
}

TEST_CASE("a YAML complex key (a mapping used as a key) is refused by name, not an internal error", "[config][fuzz]") {
  // Found by prism_fuzz_config: `? staircase: [...]` under schedule: made yaml-cpp's
  // BadConversion escape the unknown-key check.
  TempDir dir("prism-config");
  const std::string found = dir.file("main.yaml");
  write_file(found, read_file(source_path("fuzz/corpus/config/crash-complex-key.yaml")));
  CHECK_THAT(compose_outcome(found), Catch::StartsWith("error: ") && Catch::Contains("is a mapping, not a name") &&
                                         Catch::Contains("Fix: write each key as a plain name"));
}

TEST_CASE("an empty key whose value is an interpolation is refused by name, not a use-after-free", "[config][fuzz]") {
  // Found by prism_fuzz_config under ASan: `  : 1907\${3` under train: (a null key, a value with
  // an escaped reference) made the interpolation pass assign the resolved value through
  // node[""], which inserted a new key while the loop iterated the map.
  TempDir dir("prism-config");
  const std::string found = dir.file("main.yaml");
  write_file(found, read_file(source_path("fuzz/corpus/config/crash-null-key-interpolation.yaml")));
  CHECK_THAT(compose_outcome(found), Catch::StartsWith("error: ") && Catch::Contains("Fix:"));
  // The smallest forms, with a live, an escaped and an embedded reference: the key is named as empty.
  for (const std::string value : {"${train.lr}", "1907\\${3", "x${train.lr}y"}) {
    write_file(found, "defaults:\n  - model: test-tiny\ntrain:\n  : " + value + "\n  lr: 6.0e-4\n");
    CHECK_THAT(compose_outcome(found), Catch::StartsWith("error: ") && Catch::Contains("is nothing, not a name") &&
                                           Catch::Contains("Fix: write each key as a plain name"));
  }
  // Interpolations beside it still resolve: the same file without the empty key composes.
  write_file(found, "defaults:\n  - model: test-tiny\ntrain:\n  eval_every: ${train.log_every}\n  log_every: 7\n");
  CHECK(compose_outcome(found) == "composed");
}
