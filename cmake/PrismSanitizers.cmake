# Sanitizer and fuzzing builds (the `sanitize` preset; README's Testing section).
#   PRISM_SANITIZE  "address;undefined" (or a subset): every target is compiled and
#                   linked with these sanitizers. LibTorch, HDF5 and the other system
#                   libraries are not instrumented; their own reports are suppressed
#                   narrowly by the files in test/sanitizers/ (each entry says why).
#   PRISM_FUZZ      ON: also build the libFuzzer harnesses in fuzz/ (clang only), with
#                   prism_core and prism_lib carrying coverage instrumentation.
# Every executable of such a build carries its sanitizer defaults (options and
# suppressions, test/sanitizers/defaults.cpp), so `prism`, `prism_tests`, ctest
# and the fuzzers all behave alike without environment variables.
set(PRISM_SANITIZE "" CACHE STRING "Sanitizers for every target: address;undefined (empty: none)")
option(PRISM_FUZZ "Build the libFuzzer harnesses in fuzz/ (needs clang)" OFF)

if(PRISM_FUZZ AND NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "PRISM_FUZZ needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++ "
                      "(cmake --preset sanitize), after `apt-get install clang libclang-rt-dev` (scripts/setup.sh does)")
endif()

if(PRISM_SANITIZE)
  string(REPLACE ";" "," _prism_san "${PRISM_SANITIZE}")
  # Frame pointers for readable stacks; -fno-sanitize-recover is left off so that the
  # UBSan suppressions apply, and halt_on_error (defaults.cpp) still stops at the first report.
  add_compile_options(-fsanitize=${_prism_san} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${_prism_san})
  message(STATUS "prism: sanitizers ${_prism_san} on every target")

  # Adds the sanitizer defaults to every executable once all targets exist.
  function(prism_sanitizer_defaults_for_executables)
    set(_dirs ${CMAKE_SOURCE_DIR})
    while(_dirs)
      list(POP_FRONT _dirs _d)
      get_property(_sub DIRECTORY ${_d} PROPERTY SUBDIRECTORIES)
      list(APPEND _dirs ${_sub})
      get_property(_targets DIRECTORY ${_d} PROPERTY BUILDSYSTEM_TARGETS)
      foreach(_t ${_targets})
        get_target_property(_type ${_t} TYPE)
        if(_type STREQUAL "EXECUTABLE")
          target_sources(${_t} PRIVATE ${CMAKE_SOURCE_DIR}/test/sanitizers/defaults.cpp)
          set_source_files_properties(${CMAKE_SOURCE_DIR}/test/sanitizers/defaults.cpp TARGET_DIRECTORY ${_t}
                                      PROPERTIES SKIP_PRECOMPILE_HEADERS ON COMPILE_DEFINITIONS
                                      "PRISM_SANITIZER_DIR=\"${CMAKE_SOURCE_DIR}/test/sanitizers\"")
        endif()
      endforeach()
    endwhile()
  endfunction()
  cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL prism_sanitizer_defaults_for_executables)
endif()
