#pragma once
// Comparing two training runs through their run.h5 files (test/reference/read_run.py
// reads them): the data-parallel tests (test_ddp.cpp, test_multihost.cpp) check that
// several ranks give the curves of one process.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "support.h"

namespace prism::test {

inline nlohmann::json read_run(const std::string& h5) {
  auto r = run_reference("read_run.py", h5);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.output);
}

inline std::vector<double> column(const nlohmann::json& run, const std::string& key) {
  return run["datasets"][key].get<std::vector<double>>();
}

inline void check_close(const std::vector<double>& a, const std::vector<double>& b, double tol,
                        const std::string& what) {
  INFO(what);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("row " << i << ": " << a[i] << " vs " << b[i]);
    CHECK(std::abs(a[i] - b[i]) <= tol);
  }
}

// The curves two runs must share: train loss, grad norm and learning rate, validation
// loss, attention distance per layer. loss_tol bounds the losses' differences (fp32: 1e-5).
inline void check_same_run(const nlohmann::json& one, const nlohmann::json& two, double loss_tol = 1e-5) {
  CHECK(one["datasets"]["train/step"] == two["datasets"]["train/step"]);
  CHECK(one["datasets"]["train/tokens"] == two["datasets"]["train/tokens"]);
  check_close(column(one, "train/loss"), column(two, "train/loss"), loss_tol, "train/loss");
  check_close(column(one, "train/grad_norm"), column(two, "train/grad_norm"), 1e-4, "train/grad_norm");
  check_close(column(one, "train/lr"), column(two, "train/lr"), 1e-12, "train/lr");
  check_close(column(one, "val/loss"), column(two, "val/loss"), loss_tol, "val/loss");
  auto d1 = one["datasets"]["attention/distance"].get<std::vector<std::vector<double>>>();
  auto d2 = two["datasets"]["attention/distance"].get<std::vector<std::vector<double>>>();
  REQUIRE(d1.size() == d2.size());
  for (size_t k = 0; k < d1.size(); ++k) check_close(d1[k], d2[k], 1e-4, "attention/distance");
}

}  // namespace prism::test
