#pragma once
// `prism_tests --list-labels`: every visible test case with its tags, one per line,
// "name<TAB>tag;tag". Catch2 v2's catch_discover_tests makes ctest entries without
// labels; cmake/PrismCatchLabels.cmake reads this list and gives each entry its
// tags as LABELS, so `ctest -L model` runs the [model] cases.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <iostream>

namespace prism_test {

// Prints the list and returns true when argv asks for it; false otherwise (run the session).
inline bool list_labels_if_asked(int argc, char** argv) {
  bool asked = false;
  for (int i = 1; i < argc; ++i) asked = asked || std::strcmp(argv[i], "--list-labels") == 0;
  if (!asked) return false;
  for (const auto& t : Catch::getRegistryHub().getTestCaseRegistry().getAllTests()) {
    if (t.isHidden()) continue;  // not discovered as ctest entries either
    if (t.name.find(';') != std::string::npos) {
      // ctest names are CMake lists: catch_discover_tests would split this case in two
      // entries that match nothing, and each would fail as "No tests ran".
      std::cerr << "test case \"" << t.name << "\" (" << t.lineInfo.file << ":" << t.lineInfo.line
                << "): a ';' in a test case name splits its ctest entry. Fix: use ',' or words instead\n";
      std::exit(2);
    }
    std::cout << t.name << '\t';
    const char* sep = "";
    for (const auto& tag : t.tags) {
      std::cout << sep << tag;
      sep = ";";
    }
    std::cout << '\n';
  }
  return true;
}

}  // namespace prism_test
