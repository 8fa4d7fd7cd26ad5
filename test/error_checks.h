#pragma once
// A check shared by tests: `f` throws a prism::Error whose message holds every
// fragment and which says how to fix it.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "prism/error.h"

namespace prism::test {

inline void require_error(const std::function<void()>& f, const std::vector<std::string>& fragments) {
  try {
    f();
    FAIL("no prism::Error was thrown");
  } catch (const Error& e) {
    INFO("message: " << e.what());
    CHECK_FALSE(e.fix().empty());
    for (const auto& p : fragments) {
      INFO("missing: " << p);
      CHECK(std::string(e.what()).find(p) != std::string::npos);
    }
  }
}

}  // namespace prism::test
