# Catch2 tags as ctest labels. Catch2 v2's catch_discover_tests (Debian's Catch2 is
# 2.13) makes one ctest entry per test case but gives it no labels, so `ctest -L model`
# selected nothing and passed. prism_catch_labels(TARGET [PREFIX p]), called after
# catch_discover_tests for the same target: after each build, the test executable
# lists its cases and tags (`--list-labels`, test/catch_labels.h) and a ctest include
# file sets each entry's LABELS to its tags. Call sites pass --no-tests=error to ctest
# so that a selection matching nothing fails (scripts/test.sh, scripts/ci-sanitize.sh).
function(prism_catch_labels target)
  cmake_parse_arguments(L "" "PREFIX" "" ${ARGN})
  set(_labels "${CMAKE_CURRENT_BINARY_DIR}/${target}_labels.cmake")
  set(_include "${CMAKE_CURRENT_BINARY_DIR}/${target}_labels_include.cmake")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} "-DEXE=$<TARGET_FILE:${target}>" "-DPREFIX=${L_PREFIX}" "-DOUT=${_labels}"
            -P ${PROJECT_SOURCE_DIR}/cmake/PrismCatchLabelsWrite.cmake
    VERBATIM)
  file(WRITE ${_include} "if(EXISTS \"${_labels}\")\n  include(\"${_labels}\")\nendif()\n")
  # After catch_discover_tests' include file, which defines the entries.
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${_include})
endfunction()
