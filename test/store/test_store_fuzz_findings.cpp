// Inputs the fuzzers (fuzz/) found to break a store reader. Each is kept in
// fuzz/corpus/<harness>/ (the fuzzers start from it again) and replayed here.
#include <catch2/catch.hpp>

#include "prism/error.h"
#include "prism/store/run_reader.h"
#include "prism/store/safetensors.h"
#include "support.h"

using namespace prism::test;

namespace {

// What load_safetensors makes of a file: "loaded", or "error: " and the message.
std::string load_outcome(const std::string& path) {
  try {
    prism::load_safetensors(path);
    return "loaded";
  } catch (const prism::Error& e) {
    return std::string("error: ") + e.what();
  }
}

// A safetensors file at dir/name whose JSON header is `header`, followed by `data_bytes` zeros.
std::string safetensors_with(const TempDir& dir, const std::string& name, const std::string& header,
                             size_t data_bytes = 0) {
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  file += header + std::string(data_bytes, '\0');
  write_file(dir.file(name), file);
  return dir.file(name);
}

}  // namespace

TEST_CASE("a run.h5 with damaged metadata is refused, not retried without end", "[store][fuzz]") {
  // Found by prism_fuzz_run_h5 (a timeout): a block whose checksum fails made HDF5's
  // SWMR reader retry it 100 times, doubling its sleep each time, so opening this
  // 64 KB file never returned. The corpus input is the harness's raw form: 'R' + file.
  TempDir dir("prism-store");
  const std::string input = read_file(source_path("fuzz/corpus/run_h5/hang-damaged-metadata.h5"));
  REQUIRE(input.size() > 1);
  REQUIRE(input[0] == 'R');
  const std::string path = dir.file("run.h5");
  write_file(path, input.substr(1));
  // What the harness reads; a hang fails the test by ctest's timeout.
  auto read_everything = [&] {
    prism::RunReader r(path);
    (void)r.status();
    (void)r.train();
    (void)r.val();
    (void)r.attention();
    (void)r.eval();
  };
  try {
    read_everything();
    FAIL("the damaged run.h5 was read without an error");
  } catch (const prism::Error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("run.h5") && Catch::Contains("Fix:"));
  }
}

TEST_CASE("a safetensors file with an empty tensor loads and saves again", "[store][fuzz]") {
  // Found by prism_fuzz_safetensors under UBSan: an empty tensor has no data pointer,
  // and loading or saving it passed that null pointer to memcpy / string::append.
  // Written by Python's safetensors: {"empty": zeros(0, 3), "w": ones(2)}.
  TempDir dir("prism-store");
  const auto st = prism::load_safetensors(source_path("fuzz/corpus/safetensors/ubsan-empty-tensor.safetensors"));
  REQUIRE(st.tensors.size() == 2);
  CHECK(st.at("empty").sizes() == torch::IntArrayRef({0, 3}));
  CHECK(torch::equal(st.at("w"), torch::ones(2)));
  const std::string again = dir.file("again.safetensors");
  prism::save_safetensors(again, st.tensors, st.metadata);
  const auto back = prism::load_safetensors(again);
  REQUIRE(back.tensors.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(back.tensors[i].first == st.tensors[i].first);
    CHECK(back.tensors[i].second.sizes() == st.tensors[i].second.sizes());
    CHECK(torch::equal(back.tensors[i].second, st.tensors[i].second));
  }
  CHECK(back.metadata == st.metadata);
  // The header alone gives the same names and shapes (a checkpoint's parameter count without its weights).
  const auto shapes = prism::safetensors_shapes(again);
  REQUIRE(shapes.size() == 2);
  CHECK(shapes[0] == std::pair<std::string, std::vector<int64_t>>{"empty", {0, 3}});
  CHECK(shapes[1] == std::pair<std::string, std::vector<int64_t>>{"w", {2}});
  CHECK_THROWS_WITH(prism::safetensors_shapes(safetensors_with(dir, "no-shape.safetensors", R"({"w": {"dtype": "F32"}})")),
                    Catch::Contains("tensor 'w' has no shape list"));
  CHECK_THROWS_WITH(prism::safetensors_shapes(safetensors_with(dir, "bad.safetensors", R"({"w": {"shape": [-1]}})")),
                    Catch::Contains("shape holds -1"));
}

TEST_CASE("a safetensors __metadata__ that is not a map of strings is refused by name", "[store][fuzz]") {
  // Found by prism_fuzz_safetensors: {"__metadata__": {"ndata_offsets": [116, 124]}, ...} let
  // nlohmann::json's type_error escape load_safetensors.
  CHECK_THAT(load_outcome(source_path("fuzz/corpus/safetensors/crash-metadata-not-string.safetensors")),
             Catch::StartsWith("error: ") && Catch::Contains("__metadata__ entry") &&
                 Catch::Contains("is not a string") && Catch::Contains("Fix:"));
  // __metadata__ itself not a map.
  TempDir dir("prism-store");
  CHECK_THAT(load_outcome(safetensors_with(dir, "list.safetensors", R"({"__metadata__":[1,2]})")),
             Catch::StartsWith("error: ") && Catch::Contains("__metadata__ is not a map of strings"));
}

TEST_CASE("safetensors shapes and data offsets that are not non-negative integers are refused by name", "[store][fuzz]") {
  // Found by prism_fuzz_safetensors (UBSan float-cast-overflow): "data_offsets":
  // [1, 1844674407370955161524] is a float to nlohmann::json, and converting it to uint64_t
  // was undefined behaviour.
  CHECK_THAT(load_outcome(source_path("fuzz/corpus/safetensors/ubsan-float-data-offset.safetensors")),
             Catch::StartsWith("error: ") && Catch::Contains("tensor 'i64': data_offsets holds") &&
                 Catch::Contains("not a non-negative 64-bit integer") && Catch::Contains("Fix:"));
  TempDir dir("prism-store");
  auto file_with = [&](const std::string& entry) {
    return safetensors_with(dir, "t.safetensors", R"({"t":)" + entry + "}", 16);
  };
  CHECK_THAT(load_outcome(file_with(R"({"dtype":"F32","shape":[2.5],"data_offsets":[0,8]})")),
             Catch::Contains("shape holds 2.5"));
  CHECK_THAT(load_outcome(file_with(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})")),
             Catch::Contains("shape holds -2"));
  CHECK_THAT(load_outcome(file_with(R"({"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,8]})")),
             Catch::Contains("shape holds 18446744073709551615"));
  CHECK_THAT(load_outcome(file_with(R"({"dtype":"F32","shape":2,"data_offsets":[0,8]})")),
             Catch::Contains("shape is not a list"));
  // The same entry with integers loads.
  CHECK(load_outcome(file_with(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})")) == "loaded");
}

TEST_CASE("a safetensors shape too large for its data is refused before any allocation", "[store][fuzz]") {
  TempDir dir("prism-store");
  auto load = [&](const std::string& entry) {
    return load_outcome(safetensors_with(dir, "t.safetensors", R"({"t":)" + entry + "}", 16));
  };
  // 2^40 x 2^40 floats (4 * 2^80 bytes: the product overflows) and 2^40 floats (4 TiB): a
  // clear error, not an attempt to allocate.
  CHECK_THAT(load(R"({"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,8]})"),
             Catch::Contains("tensor 't' has data offsets outside the file"));
  CHECK_THAT(load(R"({"dtype":"F32","shape":[1099511627776],"data_offsets":[0,8]})"),
             Catch::Contains("tensor 't' has data offsets outside the file"));
}
