// Strings in Prism's HDF5 files: written fixed-length UTF-8 (every byte a reader
// trusts in checksummed headers or in chunks; see hdf5_support.h), the
// variable-length strings of older files still read, and the status attribute
// rewritten in place through running / completed / failed and across resumes.
#include <H5Cpp.h>
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "prism/error.h"
#include "prism/store/result_file.h"
#include "prism/store/run_reader.h"
#include "prism/store/run_store.h"
#include "support.h"
#include "error_checks.h"

using prism::test::require_error;

using namespace prism;
using prism::test::TempDir;

namespace {

// What HDF5 says about a string type: "fixed utf-8 nullpad 9", "variable utf-8", ...
std::string describe(const H5::StrType& type) {
  const std::string cset = type.getCset() == H5T_CSET_UTF8 ? "utf-8" : "ascii";
  if (type.isVariableStr()) return "variable " + cset;
  const H5T_str_t pad = type.getStrpad();
  const char* padding = pad == H5T_STR_NULLPAD ? "nullpad" : pad == H5T_STR_NULLTERM ? "nullterm" : "spacepad";
  return fmt::format("fixed {} {} {}", cset, padding, type.getSize());
}

std::string attribute_type(const H5::H5Object& object, const std::string& name) {
  H5::Attribute a = object.openAttribute(name);
  REQUIRE(a.getTypeClass() == H5T_STRING);
  return describe(a.getStrType());
}

std::string dataset_type(const H5::H5Location& where, const std::string& name) {
  H5::DataSet ds = where.openDataSet(name);
  REQUIRE(ds.getTypeClass() == H5T_STRING);
  return describe(ds.getStrType());
}

// Every string attribute of `object` as name -> type.
std::map<std::string, std::string> string_attributes(const H5::H5Object& object) {
  std::map<std::string, std::string> out;
  for (int i = 0; i < object.getNumAttrs(); ++i) {
    H5::Attribute a = object.openAttribute(static_cast<unsigned>(i));
    if (a.getTypeClass() == H5T_STRING) out[a.getName()] = describe(a.getStrType());
  }
  return out;
}

// A config with non-ASCII text, so widths count UTF-8 bytes.
RunAttributes attributes(std::string config = "model: {d_model: 64}  # größe\n") {
  return RunAttributes{std::move(config), {2, 4}, 7, "0.1.0-test"};
}

void append(RunStore& store, int64_t step) {
  store.append_train({step, 100 * step, 10.0 - double(step), 1e-3, 0.5, 0.1 * double(step)});
}

// Rewrites a string attribute the way Prism wrote it before the format change (and
// h5py writes a str): variable-length UTF-8, its value in the global heap.
void write_vlen_attribute(H5::H5Object& object, const char* name, const std::string& value) {
  if (object.attrExists(name)) object.removeAttr(name);
  H5::StrType type(H5::PredType::C_S1, H5T_VARIABLE);
  type.setCset(H5T_CSET_UTF8);
  object.createAttribute(name, type, H5::DataSpace(H5S_SCALAR)).write(type, value);
}

// A run.h5 as an older Prism left it: every string attribute variable-length, a result
// group with a variable-length text attribute and string dataset.
void make_old_format(const std::string& path, const RunAttributes& attrs, const std::string& status) {
  H5::FileAccPropList fapl;
  H5Pset_libver_bounds(fapl.getId(), H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
  H5::H5File f(path, H5F_ACC_RDWR, H5::FileCreatPropList::DEFAULT, fapl);
  write_vlen_attribute(f, "config", attrs.config);
  write_vlen_attribute(f, "status", status);
  write_vlen_attribute(f, "prism_version", attrs.prism_version);
  H5::Group g = f.createGroup("eval/old");
  write_vlen_attribute(g, "convention", "acc_norm per character (ü)");
  H5::StrType type(H5::PredType::C_S1, H5T_VARIABLE);
  type.setCset(H5T_CSET_UTF8);
  const hsize_t n = 3;
  const char* names[] = {"a", "", "ünï"};
  g.createDataSet("names", type, H5::DataSpace(1, &n)).write(names, type);
}

std::string status_in_file(const std::string& path) {
  H5::H5File f(path, H5F_ACC_RDONLY);
  return attribute_type(f, "status");
}

// /eval/cycle/inner/back: a hard link to /eval/cycle, its own ancestor.
void hdf5_link_back(H5::H5File& f) {
  REQUIRE(H5Lcreate_hard(f.getId(), "eval/cycle", f.getId(), "eval/cycle/inner/back", H5P_DEFAULT, H5P_DEFAULT) >= 0);
}


}  // namespace

TEST_CASE("strings: a new run.h5 writes every string attribute and dataset fixed-length UTF-8", "[store][strings]") {
  TempDir dir("prism-strings");
  const std::string h5 = dir.file("run.h5");
  const RunAttributes attrs = attributes();
  {
    RunStore store = RunStore::create(h5, attrs);
    append(store, 1);
    ResultGroup g;
    g.text["convention"] = "ünïcode";
    g.text["empty"] = "";
    g.set_strings("names", {3}, {"a", "", "c,\"d\" ü"});
    g.set_strings("none", {0}, {});
    store.write_group("eval/extra", g);
    store.set_status("completed");
  }
  {
    H5::H5File f(h5, H5F_ACC_RDONLY);
    const size_t config_bytes = attrs.config.size();
    CHECK(config_bytes == 32);  // UTF-8 bytes: "ö" and "ß" take two
    CHECK(string_attributes(f) == std::map<std::string, std::string>{
                                      {"config", fmt::format("fixed utf-8 nullpad {}", config_bytes)},
                                      {"prism_version", "fixed utf-8 nullpad 10"},
                                      {"status", "fixed utf-8 nullpad 9"}});  // "completed", the widest status
    H5::Group extra = f.openGroup("eval/extra");
    CHECK(string_attributes(extra) == std::map<std::string, std::string>{
                                          {"convention", "fixed utf-8 nullpad 9"},  // 7 characters, 9 bytes
                                          {"empty", "fixed utf-8 nullpad 1"}});
    CHECK(dataset_type(extra, "names") == "fixed utf-8 nullpad 8");  // the longest value, in bytes
    CHECK(dataset_type(extra, "none") == "fixed utf-8 nullpad 1");   // at least one byte
  }

  RunReader r(h5);
  CHECK(r.attributes().config == attrs.config);
  CHECK(r.attributes().prism_version == "0.1.0-test");
  CHECK(r.status() == "completed");
  const ResultGroup back = r.read_group("eval/extra");
  CHECK(back.text.at("convention") == "ünïcode");
  CHECK(back.text.at("empty").empty());
  CHECK(back.strings("names", h5) == std::vector<std::string>{"a", "", "c,\"d\" ü"});
  CHECK(back.strings("none", h5).empty());
}

TEST_CASE("strings: a result file (sweep.h5) writes fixed-length UTF-8 attributes and columns",
          "[store][strings][result_file]") {
  TempDir dir("prism-strings");
  const std::string path = dir.file("sweep.h5");
  ResultGroup g;
  g.text["name"] = "sweep ä";
  g.text["sweep"] = std::string(5000, 'x');
  g.set_strings("trials/name", {2}, {"a", "longer name"});
  write_result_file(path, g);
  {
    H5::H5File f(path, H5F_ACC_RDONLY);
    CHECK(string_attributes(f) == std::map<std::string, std::string>{{"name", "fixed utf-8 nullpad 8"},
                                                                     {"sweep", "fixed utf-8 nullpad 5000"}});
    CHECK(dataset_type(f, "trials/name") == "fixed utf-8 nullpad 11");
  }
  const ResultGroup back = read_result_file(path);
  CHECK(back.text.at("name") == "sweep ä");
  CHECK(back.text.at("sweep") == std::string(5000, 'x'));
  CHECK(back.strings("trials/name", path) == std::vector<std::string>{"a", "longer name"});
}

TEST_CASE("strings: the status is rewritten in place through running, completed and failed, live and resumed",
          "[store][strings]") {
  TempDir dir("prism-strings");
  const std::string h5 = dir.file("run.h5");
  {
    RunStore store = RunStore::create(h5, attributes());
    int64_t step = 0;
    for (int cycle = 0; cycle < 3; ++cycle) {
      for (const char* status : {"completed", "failed", "running"}) {
        append(store, ++step);  // SWMR appends between the status edits
        store.set_status(status);
        CHECK(store.status() == status);
        RunReader live(h5);  // a reader while the writer is live
        CHECK(live.status() == status);
        CHECK(live.train().size() == size_t(step));
      }
    }
    store.set_status("failed");
  }
  CHECK(status_in_file(h5) == "fixed utf-8 nullpad 9");
  CHECK(RunReader(h5).status() == "failed");
  {
    RunStore resumed = RunStore::resume(h5, 5);
    CHECK(resumed.status() == "running");
    CHECK(RunReader(h5).status() == "running");  // "running" over "failed": no stale padding bytes read
    append(resumed, 6);
    resumed.set_status("completed");
  }
  CHECK(status_in_file(h5) == "fixed utf-8 nullpad 9");
  RunReader r(h5);
  CHECK(r.status() == "completed");
  CHECK(r.train().size() == 6);
  CHECK(r.attributes().config == attributes().config);
}

TEST_CASE("strings: a run.h5 of an older Prism (variable-length strings) reads as before and resumes converted",
          "[store][strings]") {
  TempDir dir("prism-strings");
  const std::string h5 = dir.file("run.h5");
  const RunAttributes attrs = attributes("model: {d_model: 64}\n# an older run: ünïcode kept exactly\n");
  {
    RunStore store = RunStore::create(h5, attrs);
    for (int64_t s = 1; s <= 4; ++s) append(store, s);
    store.set_status("completed");
  }
  make_old_format(h5, attrs, "failed");
  {
    H5::H5File f(h5, H5F_ACC_RDONLY);
    REQUIRE(string_attributes(f) == std::map<std::string, std::string>{{"config", "variable utf-8"},
                                                                       {"prism_version", "variable utf-8"},
                                                                       {"status", "variable utf-8"}});
  }
  {
    RunReader old(h5);
    CHECK(old.attributes().config == attrs.config);
    CHECK(old.attributes().prism_version == "0.1.0-test");
    CHECK(old.status() == "failed");
    const ResultGroup g = old.read_group("eval/old");
    CHECK(g.text.at("convention") == "acc_norm per character (ü)");
    CHECK(g.strings("names", h5) == std::vector<std::string>{"a", "", "ünï"});
  }

  SECTION("resume converts the root's strings before SWMR writing starts") {
    {
      RunStore store = RunStore::resume(h5, 2);
      CHECK(store.status() == "running");
      CHECK(store.attributes().config == attrs.config);
      append(store, 3);
      store.set_status("completed");
    }
    H5::H5File f(h5, H5F_ACC_RDONLY);
    CHECK(string_attributes(f) == std::map<std::string, std::string>{
                                      {"config", fmt::format("fixed utf-8 nullpad {}", attrs.config.size())},
                                      {"prism_version", "fixed utf-8 nullpad 10"},
                                      {"status", "fixed utf-8 nullpad 9"}});
    // A result group an older Prism wrote is left as it was, and still reads.
    CHECK(string_attributes(f.openGroup("eval/old")) ==
          std::map<std::string, std::string>{{"convention", "variable utf-8"}});
    f.close();
    RunReader r(h5);
    CHECK(r.status() == "completed");
    CHECK(r.attributes().config == attrs.config);
    CHECK(r.train().size() == 3);
    CHECK(r.read_group("eval/old").strings("names", h5) == std::vector<std::string>{"a", "", "ünï"});
  }
  SECTION("a writer that opens without resuming converts too, and sets the status") {
    {
      RunStore store = RunStore::open(h5);
      CHECK(store.status() == "failed");
      store.set_status("completed");
    }
    CHECK(status_in_file(h5) == "fixed utf-8 nullpad 9");
    CHECK(RunReader(h5).status() == "completed");
  }
}

TEST_CASE("strings: a config above HDF5's 64 KiB header message limit is stored and read whole", "[store][strings]") {
  TempDir dir("prism-strings");
  const std::string h5 = dir.file("run.h5");
  std::string config = "model: {d_model: 64}\ndata:\n  files:\n";
  for (int i = 0; config.size() < 200 * 1024; ++i) config += fmt::format("    - /data/shards/train_{:06d}.bin  # ü\n", i);
  {
    RunStore store = RunStore::create(h5, attributes(config));
    append(store, 1);
    store.set_status("completed");  // an edit after the large attribute: the file stays consistent
  }
  {
    H5::H5File f(h5, H5F_ACC_RDONLY);
    CHECK(attribute_type(f, "config") == fmt::format("fixed utf-8 nullpad {}", config.size()));
  }
  {
    RunReader r(h5);
    CHECK(r.attributes().config == config);
    CHECK(r.status() == "completed");
  }
  RunStore resumed = RunStore::resume(h5, 1);
  CHECK(resumed.attributes().config == config);
}

TEST_CASE("strings: string types a reader cannot trust are refused by name", "[store][strings]") {
  TempDir dir("prism-strings");
  const std::string h5 = dir.file("run.h5");
  {
    RunStore store = RunStore::create(h5, attributes());
    store.set_status("completed");
  }
  auto edit = [&](const std::function<void(H5::H5File&)>& change) {
    H5::FileAccPropList fapl;
    H5Pset_libver_bounds(fapl.getId(), H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
    H5::H5File f(h5, H5F_ACC_RDWR, H5::FileCreatPropList::DEFAULT, fapl);
    change(f);
  };
  SECTION("a string dataset claiming strings wider than 64 MiB") {
    edit([](H5::H5File& f) {
      H5::Group g = f.createGroup("eval/wide");
      const hsize_t n = 1, chunk = 1;
      H5::DSetCreatPropList plist;
      plist.setChunk(1, &chunk);
      H5::StrType type(H5::PredType::C_S1, (size_t{1} << 26) + 1);
      g.createDataSet("names", type, H5::DataSpace(1, &n), plist);  // nothing written
    });
    require_error([&] { RunReader(h5).read_group("eval/wide"); },
                  {"cannot read /eval/wide", "names", "67108865 bytes wide", "damaged", h5});
  }
  SECTION("a string dataset claiming far more strings than it stores") {
    edit([](H5::H5File& f) {
      H5::Group g = f.createGroup("eval/long");
      const hsize_t n = 100000000, chunk = 1024;
      H5::DSetCreatPropList plist;
      plist.setChunk(1, &chunk);
      g.createDataSet("names", H5::StrType(H5::PredType::C_S1, 64), H5::DataSpace(1, &n), plist);
    });
    require_error([&] { RunReader(h5).read_group("eval/long"); },
                  {"cannot read /eval/long", "claims 100000000 strings of 64 bytes", "damaged", h5});
    edit([](H5::H5File& f) {  // numbers too (found by the run_h5 harness: 32 GB asked for)
      H5::Group g = f.createGroup("eval/many");
      const hsize_t n = hsize_t{1} << 32, chunk = 1024;
      H5::DSetCreatPropList plist;
      plist.setChunk(1, &chunk);
      g.createDataSet("n", H5::PredType::STD_I64LE, H5::DataSpace(1, &n), plist);
    });
    require_error([&] { RunReader(h5).read_group("eval/many"); },
                  {"cannot read /eval/many", "claims 4294967296 values of 8 bytes", h5});
  }
  SECTION("a result group whose subgroup links back to it (found by the run_h5 harness: it never returned)") {
    edit([](H5::H5File& f) {
      H5::Group g = f.createGroup("eval/cycle");
      g.createGroup("inner");
      hdf5_link_back(f);
    });
    require_error([&] { RunReader(h5).read_group("eval/cycle"); },
                  {"cannot read /eval/cycle", "group inner/back is linked twice", h5});
  }
  SECTION("a status that is not a string, or not one string") {
    edit([](H5::H5File& f) {
      f.removeAttr("status");
      const int value = 1;
      f.createAttribute("status", H5::PredType::STD_I32LE, H5::DataSpace(H5S_SCALAR)).write(H5::PredType::NATIVE_INT, &value);
    });
    require_error([&] { RunReader r(h5); }, {"cannot read the run store", "attribute 'status' is not a string", h5});
    edit([](H5::H5File& f) {
      f.removeAttr("status");
      const hsize_t two = 2;
      H5::StrType type(H5::PredType::C_S1, 9);
      const char values[] = "completedcompleted";
      f.createAttribute("status", type, H5::DataSpace(1, &two)).write(type, values);
    });
    require_error([&] { RunReader r(h5); }, {"attribute 'status' is not a single string", h5});
  }
}
