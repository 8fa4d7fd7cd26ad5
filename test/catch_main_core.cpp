// Catch2's main for prism_core_tests (the torch-free tests of the sanitize build):
// no LibTorch here, so no thread setting either.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

int main(int argc, char** argv) { return Catch::Session().run(argc, argv); }
