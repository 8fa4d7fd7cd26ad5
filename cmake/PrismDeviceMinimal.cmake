# PRISM_DEVICE_MINIMAL: the GPU pieces alone, for a machine that has LibTorch,
# nvcc and CMake but none of our Debian libraries (the lent GPU machine of
# scripts/device-check.sh). Builds:
#   prism_device_lib     kernels (CPU + CUDA), lib/prism/attention, the GPT model
#                        and what it needs (error, model_config, head schedules)
#   prism_device_tests   Catch2 runner over test/cuda
#   prism-device-bench   apps/device_bench (CUDA builds only)
# Dependencies: LibTorch; fmt header-only from LibTorch's bundled copy; Catch2 v2's
# single header, from .device/include (scripts/device-prepare.sh) or the system.
find_package(Threads REQUIRED)
set(_src ${CMAKE_SOURCE_DIR})

add_subdirectory(kernels)

set(PRISM_DEVICE_SOURCES
  ${_src}/lib/prism/error.cpp
  ${_src}/lib/prism/config/model_config.cpp
  ${_src}/lib/prism/schedule/head_schedule.cpp
  ${_src}/lib/prism/schedule/rules.cpp
  ${_src}/lib/prism/model/gpt.cpp
  ${_src}/lib/prism/model/lm_loss.cpp)
file(GLOB_RECURSE _attention CONFIGURE_DEPENDS ${_src}/lib/prism/attention/*.cpp)
if(NOT PRISM_WITH_CUDA)
  list(FILTER _attention EXCLUDE REGEX "/attention/cuda/")
endif()
list(APPEND PRISM_DEVICE_SOURCES ${_attention})

add_library(prism_device_lib STATIC ${PRISM_DEVICE_SOURCES})
target_include_directories(prism_device_lib PUBLIC ${_src}/lib)
target_include_directories(prism_device_lib SYSTEM PUBLIC ${TORCH_INCLUDE_DIRS})
target_compile_options(prism_device_lib PRIVATE ${PRISM_WARNINGS})
target_compile_definitions(prism_device_lib PUBLIC
  FMT_HEADER_ONLY=1 PRISM_VERSION="${PROJECT_VERSION}" $<$<BOOL:${PRISM_WITH_CUDA}>:PRISM_WITH_CUDA=1>)
target_link_libraries(prism_device_lib PUBLIC ${TORCH_LIBRARIES} prism_kernels_cpu Threads::Threads)
if(TARGET prism_kernels_cuda)
  target_link_libraries(prism_device_lib PUBLIC prism_kernels_cuda)
endif()
target_precompile_headers(prism_device_lib PRIVATE
  <torch/torch.h> <fmt/format.h> <fmt/ranges.h> <string> <vector> <map> <memory> <optional> <functional>)

if(PRISM_BUILD_TESTS)
  find_path(PRISM_CATCH2_INCLUDE_DIR catch2/catch.hpp HINTS ${_src}/.device/include
            DOC "directory holding catch2/catch.hpp (Catch2 v2)")
  if(NOT PRISM_CATCH2_INCLUDE_DIR)
    message(FATAL_ERROR "prism: Catch2 v2's catch2/catch.hpp not found. "
                        "Fix: run scripts/device-prepare.sh on a machine with Debian's catch2 and carry .device/, "
                        "or pass -DPRISM_CATCH2_INCLUDE_DIR=/dir/with/catch2")
  endif()
  file(GLOB PRISM_DEVICE_TEST_SOURCES CONFIGURE_DEPENDS ${_src}/test/cuda/test_*.cpp)
  add_executable(prism_device_tests ${_src}/test/catch_main.cpp ${PRISM_DEVICE_TEST_SOURCES})
  target_include_directories(prism_device_tests SYSTEM PRIVATE ${PRISM_CATCH2_INCLUDE_DIR})
  target_compile_options(prism_device_tests PRIVATE ${PRISM_WARNINGS})
  target_link_libraries(prism_device_tests PRIVATE prism_device_lib)
  target_precompile_headers(prism_device_tests REUSE_FROM prism_device_lib)
  prism_cuda_emulation_source(${_src}/test/cuda/test_cuda_emulated.cpp)
  enable_testing()
  add_test(NAME cuda COMMAND prism_device_tests "[cuda]")
  set_tests_properties(cuda PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED: no CUDA device")
endif()

if(PRISM_WITH_CUDA)
  add_subdirectory(apps/device_bench)
endif()
message(STATUS "prism: device-minimal build (LibTorch ${Torch_VERSION}; CUDA back end: ${PRISM_WITH_CUDA}; "
               "Catch2 from ${PRISM_CATCH2_INCLUDE_DIR})")
