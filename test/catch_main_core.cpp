// Catch2's main for prism_core_tests (the torch-free tests of the sanitize build):
// no LibTorch here, so no thread setting either.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_labels.h"

int main(int argc, char** argv) {
  if (prism_test::list_labels_if_asked(argc, argv)) return 0;
  return Catch::Session().run(argc, argv);
}
