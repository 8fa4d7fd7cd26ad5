# prism_device_tests: the Catch2 runner over test/cuda alone (the CUDA kernel on the
# GPU against float64 math, and its CPU emulation), small enough to build in seconds
# on a lent GPU machine. Both builds define it:
#   PRISM_DEVICE_MINIMAL   a ctest entry of its own
#   the full build         not part of `all`, since prism_tests compiles and runs the
#                          same sources among all the others
# Linked to prism_device_lib where it exists (CUDA builds: cmake/PrismCudaDeviceLib.cmake).
# Catch2 v2's header comes from .device/ (scripts/device-prepare.sh) or the system.
# Without a GPU every CUDA case reports "SKIPPED: no CUDA device"; ctest shows a skip.
set(_prism_src ${CMAKE_CURRENT_LIST_DIR}/..)
# The CUDA build links prism_device_lib (apps/device_bench defined it); a CPU-only full build prism_lib.
if(TARGET prism_device_lib)
  set(_prism_device_tests_lib prism_device_lib)
else()
  set(_prism_device_tests_lib prism_lib)
endif()
set(_prism_exclude)
if(TARGET prism_lib)
  set(_prism_exclude EXCLUDE_FROM_ALL)
endif()
find_path(PRISM_CATCH2_INCLUDE_DIR catch2/catch.hpp HINTS ${_prism_src}/.device/root/usr/include
          DOC "directory holding catch2/catch.hpp (Catch2 v2)")
if(NOT PRISM_CATCH2_INCLUDE_DIR)
  set(_prism_catch2_fix "Fix: run scripts/device-prepare.sh on a machine with Debian's apt and carry .device/, "
                        "or pass -DPRISM_CATCH2_INCLUDE_DIR=/dir/with/catch2")
  if(TARGET prism_lib)  # the full build's own tests found their Catch2 elsewhere: only this target is lost
    message(STATUS "prism: no prism_device_tests target (Catch2 v2's catch2/catch.hpp not found). ${_prism_catch2_fix}")
    return()
  endif()
  message(FATAL_ERROR "prism: Catch2 v2's catch2/catch.hpp not found. ${_prism_catch2_fix}")
endif()
file(GLOB PRISM_DEVICE_TEST_SOURCES CONFIGURE_DEPENDS ${_prism_src}/test/cuda/test_*.cpp)
add_executable(prism_device_tests ${_prism_exclude} ${_prism_src}/test/catch_main.cpp ${PRISM_DEVICE_TEST_SOURCES})
target_compile_options(prism_device_tests PRIVATE ${PRISM_WARNINGS})
target_include_directories(prism_device_tests SYSTEM PRIVATE ${PRISM_CATCH2_INCLUDE_DIR})
target_link_libraries(prism_device_tests PRIVATE ${_prism_device_tests_lib})
target_precompile_headers(prism_device_tests REUSE_FROM ${_prism_device_tests_lib})
prism_cuda_emulation_source(${_prism_src}/test/cuda/test_cuda_emulated.cpp)
if(NOT TARGET prism_lib)
  add_test(NAME cuda COMMAND prism_device_tests "[cuda]")
  set_tests_properties(cuda PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED: no CUDA device")
endif()
