#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <thread>

#include "catch_labels.h"

int main(int argc, char** argv) {
  if (prism_test::list_labels_if_asked(argc, argv)) return 0;
  // LibTorch may start with one intra-op thread; tests use every core.
  torch::set_num_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  return Catch::Session().run(argc, argv);
}
