// RunReader: reads a run while its writer is live, result groups written by
// RunStore::write_group, and says clearly what is wrong with other files.
#include <H5Cpp.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <vector>

#include "prism/error.h"
#include "prism/store/run_reader.h"
#include "prism/store/run_store.h"
#include "support.h"

using namespace prism;
using prism::test::TempDir;

TEST_CASE("RunReader: complete rows of a live run, eval and result groups", "[store][reader]") {
  TempDir dir("prism-reader");
  const std::string h5 = dir.file("run.h5");
  RunStore store = RunStore::create(h5, RunAttributes{"model: {d_model: 64}", {2, 4}, 7, "test"});
  for (int64_t s = 1; s <= 5; ++s) store.append_train({s, 100 * s, 10.0 - double(s), 1e-3, 0.5, 0.1 * double(s)});
  store.append_val({5, 500, 7.5});
  store.append_attention(5, {{1.0, 2.0}, {3.0, 4.0, 5.0, 6.0}});
  {
    // The writer is still open (SWMR): the reader sees every row flushed so far.
    RunReader live(h5);
    CHECK(live.status() == "running");
    CHECK(live.attributes().heads == std::vector<int>{2, 4});
    CHECK(live.attributes().seed == 7);
    auto train = live.train();
    REQUIRE(train.size() == 5);
    CHECK(train[4].step == 5);
    CHECK(train[4].loss == 5.0);
    CHECK(live.val().at(0).loss == 7.5);
    auto att = live.attention();
    REQUIRE(att.step == std::vector<int64_t>{5});
    CHECK(att.per_head[0][1] == std::vector<double>{3.0, 4.0, 5.0, 6.0});
  }
  store.write_eval("piqa", 0.75, 0.5, 4);
  ResultGroup g;
  g.set_real("x", {2, 3}, {1, 2, 3, 4, 5, std::nan("")});
  g.set_integer("deep/y", {}, {42});
  g.text["note"] = "hello";
  g.numbers["level"] = 0.95;
  store.write_group("eval/extra", g);
  store.append_train({6, 600, 3.0, 1e-3, 0.5, 0.6});  // appends continue after the edits
  store.set_status("completed");
  store.close();

  RunReader r(dir.path());  // a run directory works as well as its run.h5
  CHECK(r.status() == "completed");
  CHECK(r.train().size() == 6);
  auto evals = r.eval();
  REQUIRE(evals.size() == 2);
  CHECK(evals[1].task == "piqa");
  CHECK(evals[1].values.reals("acc", h5) == std::vector<double>{0.75});
  CHECK(evals[1].values.integers("n", h5) == std::vector<int64_t>{4});
  ResultGroup back = r.read_group("eval/extra");
  CHECK(back.at("x", h5).shape == std::vector<uint64_t>{2, 3});
  CHECK(back.reals("x", h5)[4] == 5.0);
  CHECK(std::isnan(back.reals("x", h5)[5]));
  CHECK(back.integers("deep/y", h5) == std::vector<int64_t>{42});
  CHECK(back.string("note", h5) == "hello");
  CHECK(back.number("level", h5) == 0.95);
  CHECK(r.has_group("eval/extra"));
  CHECK_FALSE(r.has_group("eval/none/deeper"));
  CHECK_THROWS_WITH(r.read_group("attention/heldout"), Catch::Contains("no /attention/heldout") &&
                                                            Catch::Contains("prism distance"));
  CHECK(r.groups_under("eval") == std::vector<std::string>{"extra", "piqa"});
  CHECK(r.groups_under("val/by_position").empty());
}

TEST_CASE("RunStore: results by position go under /val/by_position, the rest of /val is the series'", "[store][reader]") {
  TempDir dir("prism-reader");
  const std::string h5 = dir.file("run.h5");
  RunStore store = RunStore::create(h5, RunAttributes{"model: {d_model: 64}", {2, 4}, 7, "test"});
  store.append_val({5, 500, 7.5, 0.25});
  ResultGroup g;
  g.set_real("loss", {2}, {7.0, 6.0});
  store.write_group("val/by_position/T128", g);
  store.write_group("val/by_position/T1024", g);
  for (const char* bad : {"val/loss", "val/extra", "val/by_position", "train/extra"})
    CHECK_THROWS_WITH(store.write_group(bad, g), Catch::Contains("invalid result group") &&
                                                     Catch::Contains("val/by_position/T1024"));
  store.append_val({10, 1000, 7.0, 0.125});  // the series goes on beside the results
  store.close();
  RunReader r(h5);
  CHECK(r.groups_under("val/by_position") == std::vector<std::string>{"T1024", "T128"});
  CHECK(r.read_group("val/by_position/T128").reals("loss", h5) == std::vector<double>{7.0, 6.0});
  REQUIRE(r.val().size() == 2);
  CHECK(r.val()[1].loss == 7.0);
}

TEST_CASE("RunReader: /val/loss_se and unigram_val_loss, and older files that lack them", "[store][reader]") {
  TempDir dir("prism-reader");
  const std::string h5 = dir.file("run.h5");
  RunAttributes attrs{"model: {d_model: 64}", {2, 4}, 7, "test"};
  attrs.unigram_val_loss = 6.375;
  {
    RunStore store = RunStore::create(h5, attrs);
    store.append_val({5, 500, 7.5, 0.25});
    store.append_val({10, 1000, 7.0});  // no standard error: NaN
    store.set_status("completed");
  }
  {
    RunReader r(h5);
    CHECK(r.attributes().unigram_val_loss == 6.375);
    auto val = r.val();
    REQUIRE(val.size() == 2);
    CHECK(val[0].loss_se == 0.25);
    CHECK(std::isnan(val[1].loss_se));
  }
  // The same file as an older prism wrote it: no /val/loss_se, no unigram attribute.
  auto py = prism::test::run_reference("make_old_run.py", h5);
  INFO(py.output);
  REQUIRE(py.exit_code == 0);
  {
    RunReader r(h5);
    CHECK(std::isnan(r.attributes().unigram_val_loss));
    auto val = r.val();
    REQUIRE(val.size() == 2);
    CHECK(val[1].loss == 7.0);
    CHECK(std::isnan(val[0].loss_se));
  }
  // Opening it to add results (or resuming it) adds the column, NaN for the old rows.
  {
    RunStore store = RunStore::resume(h5, 10);
    store.append_val({15, 1500, 6.5, 0.125});
  }
  RunReader r(h5);
  auto val = r.val();
  REQUIRE(val.size() == 3);
  CHECK(std::isnan(val[1].loss_se));
  CHECK(val[2].loss_se == 0.125);
  CHECK(val[2].loss == 6.5);
}

TEST_CASE("RunReader: a missing or foreign file is a clear error", "[store][reader]") {
  TempDir dir("prism-reader");
  CHECK_THROWS_WITH(RunReader(dir.file("nope.h5")), Catch::Contains("no run store here"));
  prism::test::write_file(dir.file("text.h5"), "not hdf5");
  CHECK_THROWS_WITH(RunReader(dir.file("text.h5")), Catch::Contains("not an HDF5 file"));
  CHECK(find_run_store(dir.path()).empty());
}

namespace {

// Replaces dataset `name` of the run.h5 at `h5` with a zero-filled one of shape `dims`.
void replace_dataset(const std::string& h5, const std::string& name, std::vector<hsize_t> dims) {
  H5::H5File f(h5, H5F_ACC_RDWR);
  f.unlink(name);
  H5::DataSpace space(static_cast<int>(dims.size()), dims.data());
  H5::DataSet ds = f.createDataSet(name, H5::PredType::NATIVE_DOUBLE, space);
  hsize_t n = 1;
  for (hsize_t d : dims) n *= d;
  std::vector<double> zeros(n, 0.0);
  if (n > 0) ds.write(zeros.data(), H5::PredType::NATIVE_DOUBLE);
}

std::string read_error(const std::function<void()>& read) {
  try {
    read();
    return "read";
  } catch (const prism::Error& e) {
    return e.what();
  }
}

// A completed run at `h5`: 5 training rows and `attention_rows` rows of distances (heads 2, 4).
void write_completed_run(const std::string& h5, int64_t attention_rows) {
  RunStore store = RunStore::create(h5, RunAttributes{"model: {d_model: 64}", {2, 4}, 7, "test"});
  for (int64_t s = 1; s <= 5; ++s) store.append_train({s, 100 * s, 10.0 - double(s), 1e-3, 0.5, 0.1 * double(s)});
  for (int64_t s = 1; s <= attention_rows; ++s) store.append_attention(s, {{1.0, 2.0}, {3.0, 4.0, 5.0, 6.0}});
  store.set_status("completed");
  store.close();
}

}  // namespace

TEST_CASE("RunReader: columns cut short, extra values per row and ranks above 2 in another tool's file",
          "[store][reader][fuzz]") {
  // Found by prism_fuzz_run_h5 (UBSan: a vector indexed past its end): a /train column
  // shorter than /train/step was read row by row up to step's length.
  TempDir dir("prism-reader");
  const std::string h5 = dir.file("run.h5");
  write_completed_run(h5, 4);
  replace_dataset(h5, "train/loss", {3});                      // 3 of 5 rows
  replace_dataset(h5, "attention/layer_00/distance", {2, 2});  // 2 of 4 rows
  {
    RunReader r(h5);
    auto train = r.train();
    REQUIRE(train.size() == 3);  // the rows every column has
    CHECK(train[2].step == 3);
    CHECK(train[2].loss == 0.0);
    auto att = r.attention();
    CHECK(att.step == std::vector<int64_t>{1, 2});
    REQUIRE(att.per_head.size() == 2);
    CHECK(att.per_head[1][1] == std::vector<double>{3.0, 4.0, 5.0, 6.0});
  }
  replace_dataset(h5, "train/lr", {5, 2});                        // two values per row
  replace_dataset(h5, "attention/layer_01/distance", {4, 4, 2});  // rank 3
  RunReader r(h5);
  CHECK_THAT(read_error([&] { r.train(); }),
             Catch::Contains("cannot read /train") && Catch::Contains("train/lr holds 2 values per row"));
  CHECK_THAT(read_error([&] { r.attention(); }),
             Catch::Contains("cannot read /attention") && Catch::Contains("has rank 3"));
}

TEST_CASE("RunReader: a column that claims far more rows than it stores is refused, not read into memory",
          "[store][reader][fuzz]") {
  // Found by prism_fuzz_run_h5 (out-of-memory): a /train column whose extent claims 10^8 rows
  // of unwritten chunks was read as fill values into memory sized by the claim.
  TempDir dir("prism-reader");
  const std::string h5 = dir.file("run.h5");
  write_completed_run(h5, 0);
  {
    H5::H5File f(h5, H5F_ACC_RDWR);
    for (const char* name : {"train/step", "train/loss"}) {
      f.unlink(name);
      hsize_t dims[1] = {100000000}, chunk[1] = {1024};
      H5::DSetCreatPropList plist;
      plist.setChunk(1, chunk);
      f.createDataSet(name, H5::PredType::NATIVE_INT64, H5::DataSpace(1, dims), plist);  // nothing written
    }
  }
  RunReader r(h5);
  CHECK_THAT(read_error([&] { r.train(); }),
             Catch::Contains("cannot read /train") && Catch::Contains("claims 100000000 rows") &&
                 Catch::Contains("its extent is damaged"));
}
