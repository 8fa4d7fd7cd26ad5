#pragma once
// Where the tests find the repository, the prism binary and the Python that runs
// the reference scripts. The values live in one file CMake generates for each test
// executable (test/CMakeLists.txt), not in every test's compile line: a compile
// line without paths lets ccache share the test objects between checkouts.
namespace prism::test {
extern const char* const kSourceDir;
extern const char* const kPrismBinary;
extern const char* const kPython;
}  // namespace prism::test

#define PRISM_SOURCE_DIR (::prism::test::kSourceDir)
#define PRISM_BINARY (::prism::test::kPrismBinary)
#define PRISM_PYTHON (::prism::test::kPython)
