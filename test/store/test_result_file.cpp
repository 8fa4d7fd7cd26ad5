// A ResultGroup as an HDF5 file of its own (result_file.h), as the sweep index
// uses it: every element type keeps its dtype, h5py reads what was written, and
// a failed write leaves the previous file in place.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>

#include "prism/error.h"
#include "prism/store/result_file.h"
#include "support.h"

using namespace prism;
using prism::test::TempDir;
namespace fs = std::filesystem;

namespace {

ResultGroup every_type() {
  ResultGroup g;
  g.text["name"] = "sweep ä";  // UTF-8 text
  g.numbers["level"] = 0.95;
  g.set_strings("trials/name", {3}, {"a", "", "c,\"d\""});
  g.set_strings("trials/param/train.lr", {3}, {"1e-3", "2e-3", "3e-3"});
  g.set_uint64("trials/seed", {3}, {0, 7, std::numeric_limits<uint64_t>::max()});
  g.set_int32("trials/rung", {3}, {0, -1, 2147483647});
  g.set_integer("trials/steps", {3}, {1, int64_t{1} << 40, -5});
  g.set_real("trials/loss", {3}, {1.5, std::nan(""), -0.25});
  g.set_int32("trials/heads", {3, 2}, {1, 2, 3, 4, 5, 6});
  g.set_real("empty/loss", {0}, {});
  g.set_strings("empty/name", {0}, {});
  return g;
}

}  // namespace

TEST_CASE("result file: every element type round-trips with its type and shape", "[store][result_file]") {
  TempDir dir("prism-result-file");
  const std::string path = dir.file("index.h5");
  write_result_file(path, every_type());
  const ResultGroup back = read_result_file(path);
  CHECK(back.string("name", path) == "sweep ä");
  CHECK(back.number("level", path) == 0.95);
  CHECK(back.at("trials/name", path).type == ResultArray::Type::String);
  CHECK(back.strings("trials/name", path) == std::vector<std::string>{"a", "", "c,\"d\""});
  CHECK(back.strings("trials/param/train.lr", path)[2] == "3e-3");
  CHECK(back.at("trials/seed", path).type == ResultArray::Type::UInt64);
  CHECK(back.at("trials/seed", path).unsigned_integer ==
        std::vector<uint64_t>{0, 7, std::numeric_limits<uint64_t>::max()});
  CHECK(back.at("trials/rung", path).type == ResultArray::Type::Int32);
  CHECK(back.integers("trials/rung", path) == std::vector<int64_t>{0, -1, 2147483647});
  CHECK(back.at("trials/steps", path).type == ResultArray::Type::Int64);
  CHECK(back.integers("trials/steps", path) == std::vector<int64_t>{1, int64_t{1} << 40, -5});
  const auto loss = back.reals("trials/loss", path);
  CHECK(loss[0] == 1.5);
  CHECK(std::isnan(loss[1]));
  CHECK(back.at("trials/heads", path).shape == std::vector<uint64_t>{3, 2});
  CHECK(back.integers("trials/heads", path) == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
  CHECK(back.at("empty/loss", path).shape == std::vector<uint64_t>{0});
  CHECK(back.strings("empty/name", path).empty());
  // Numbers and text do not mix silently.
  CHECK_THROWS_WITH(back.reals("trials/name", path), Catch::Contains("holds text"));
  CHECK_THROWS_WITH(back.strings("trials/steps", path), Catch::Contains("holds numbers"));
  CHECK_FALSE(fs::exists(dir.file(".index.h5.tmp")));
  CHECK_FALSE(fs::exists(dir.file(".index.h5.build")));  // the scratch file HDF5 closed into
}

TEST_CASE("result file: h5py reads the dtypes and values that were written", "[store][result_file]") {
  TempDir dir("prism-result-file");
  const std::string path = dir.file("index.h5");
  write_result_file(path, every_type());
  const std::string script =
      "import h5py,sys\n"
      "f=h5py.File(sys.argv[1],'r')\n"
      "print('attr', f.attrs['name'].decode('utf-8'))\n"
      "f.visititems(lambda n,o: print(n, o.dtype.str if o.dtype.kind!='O' else 'str', o.shape, "
      "[x.decode('utf-8') if isinstance(x,bytes) else x for x in o[()].ravel().tolist()]) "
      "if isinstance(o,h5py.Dataset) else None)\n";
  test::write_file(dir.file("dtypes.py"), script);
  const auto r = test::run(fmt::format("'{}' '{}' '{}'", PRISM_PYTHON, dir.file("dtypes.py"), path));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("attr sweep ä"));
  CHECK_THAT(r.output, Catch::Contains("trials/seed <u8 (3,) [0, 7, 18446744073709551615]"));
  CHECK_THAT(r.output, Catch::Contains("trials/rung <i4 (3,) [0, -1, 2147483647]"));
  CHECK_THAT(r.output, Catch::Contains("trials/steps <i8 (3,) [1, 1099511627776, -5]"));
  CHECK_THAT(r.output, Catch::Contains("trials/loss <f8 (3,) [1.5, nan, -0.25]"));
  CHECK_THAT(r.output, Catch::Contains("trials/heads <i4 (3, 2) [1, 2, 3, 4, 5, 6]"));
  // Strings are fixed-length (numpy bytes, as wide as the longest value), decoded as UTF-8.
  CHECK_THAT(r.output, Catch::Contains("trials/name |S5 (3,) ['a', '', 'c,\"d\"']"));
  CHECK_THAT(r.output, Catch::Contains("trials/param/train.lr |S4 (3,) ['1e-3', '2e-3', '3e-3']"));
  CHECK_THAT(r.output, Catch::Contains("empty/name |S1 (0,) []"));
  CHECK_THAT(r.output, Catch::Contains("empty/loss <f8 (0,) []"));
}

TEST_CASE("result file: a rewrite replaces the file whole, and a failed one keeps the old", "[store][result_file]") {
  TempDir dir("prism-result-file");
  const std::string path = dir.file("index.h5");
  write_result_file(path, every_type());
  ResultGroup small;
  small.set_integer("only", {1}, {42});
  write_result_file(path, small);
  const ResultGroup back = read_result_file(path);
  CHECK(back.arrays.size() == 1);  // nothing of the first file is left
  CHECK(back.integers("only", path) == std::vector<int64_t>{42});

  // A name the file's groups cannot take ("only" is a dataset, not a group) fails inside HDF5.
  ResultGroup bad;
  bad.set_integer("x", {1}, {1});
  bad.set_integer("x/y", {1}, {2});
  CHECK_THROWS_WITH(write_result_file(path, bad, "the sweep index"),
                    Catch::Contains("cannot build the sweep index") && Catch::Contains("index.h5"));
  CHECK(read_result_file(path).integers("only", path) == std::vector<int64_t>{42});
  CHECK_FALSE(fs::exists(dir.file(".index.h5.tmp")));
  CHECK_FALSE(fs::exists(dir.file(".index.h5.build")));  // the scratch file HDF5 closed into
  CHECK_THROWS_WITH(read_result_file(dir.file("none.h5")), Catch::Contains("none.h5"));
  test::write_file(dir.file("text.h5"), "not hdf5");
  CHECK_THROWS_WITH(read_result_file(dir.file("text.h5")), Catch::Contains("cannot read") && Catch::Contains("text.h5"));
}

TEST_CASE("result file: text past 64 KiB (a long sweep.yaml) round-trips and h5py reads it", "[store][result_file]") {
  // The earliest object-header format caps a message at 64 KiB; a sweep of 210 trials
  // keeps a sweep.yaml past that, and its index failed with "object header message is too large".
  TempDir dir("prism-result-file");
  const std::string path = dir.file("index.h5");
  std::string yaml;
  for (int i = 0; yaml.size() < (size_t{200} << 10); ++i) yaml += fmt::format("- name: trial-{:05d}\n  seed: {}\n", i, i % 15);
  ResultGroup g = every_type();
  g.text["sweep"] = yaml;
  write_result_file(path, g);
  const ResultGroup back = read_result_file(path);
  REQUIRE(back.text.count("sweep"));
  CHECK(back.text.at("sweep") == yaml);
  CHECK(back.text.at("name") == "sweep ä");
  test::write_file(dir.file("long.py"),
                   "import h5py,sys\nf=h5py.File(sys.argv[1],'r')\ns=f.attrs['sweep'].decode('utf-8')\n"
                   "print(len(s), s.splitlines()[-1])\n");
  const auto r = test::run(fmt::format("'{}' '{}' '{}'", PRISM_PYTHON, dir.file("long.py"), path));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string last = yaml.substr(yaml.rfind('\n', yaml.size() - 2) + 1);
  CHECK_THAT(r.output, Catch::Contains(fmt::format("{} {}", yaml.size(), last.substr(0, last.size() - 1))));
}
