// What a sweep reads from a run (run_result.h): through the store's reader, the
// same on a run being written, a killed one and a finished one.
#include <catch2/catch.hpp>

#include <cmath>

#include "prism/error.h"
#include "prism/store/run_store.h"
#include "prism/sweep/run_result.h"
#include "support.h"

using namespace prism;
using prism::test::TempDir;

TEST_CASE("read_run_result: status, schedule, the last training row and the validation curve", "[sweep][run_result]") {
  TempDir dir("prism-run-result");
  const std::string h5 = dir.file("run.h5");
  RunStore store = RunStore::create(h5, RunAttributes{"model: {}", {2, 4}, 9, "test"});
  {
    const RunResult fresh = read_run_result(h5);  // created, nothing trained yet
    CHECK(fresh.status == "running");
    CHECK(fresh.steps == 0);
    CHECK(fresh.val_loss.empty());
    CHECK(std::isnan(fresh.best_val_loss()));
    CHECK(std::isnan(fresh.final_val_loss()));
  }
  for (int64_t s = 1; s <= 4; ++s) store.append_train({s, 32 * s, 5.0 - double(s), 1e-3, 0.5, 0.25 * double(s)});
  store.append_val({2, 64, 4.5});
  store.append_val({4, 128, 4.75});
  const RunResult live = read_run_result(h5);  // the writer is still open
  CHECK(live.status == "running");
  CHECK(live.heads == std::vector<int>{2, 4});
  CHECK(live.seed == 9);
  CHECK(live.steps == 4);
  CHECK(live.tokens == 128);
  CHECK(live.train_time_s == 1.0);
  CHECK(live.val_steps == std::vector<int64_t>{2, 4});
  CHECK(live.val_tokens == std::vector<int64_t>{64, 128});
  CHECK(live.best_val_loss() == 4.5);
  CHECK(live.final_val_loss() == 4.75);
  store.set_status("completed");
  store.close();
  CHECK(read_run_result(h5).status == "completed");
  CHECK_THROWS_WITH(read_run_result(dir.file("none/run.h5")), Catch::Contains("none/run.h5"));
  test::write_file(dir.file("bad.h5"), "not hdf5");
  CHECK_THROWS_WITH(read_run_result(dir.file("bad.h5")), Catch::Contains("bad.h5") && Catch::Contains("not an HDF5"));
}
