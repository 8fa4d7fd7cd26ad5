# prism_device_lib: what prism-device-bench and prism_device_tests need and no more:
# the kernels (CPU + CUDA), every op binding of lib/prism/ops (the CUDA one included), the GPT model
# with its LM-head loss, fused bias + GELU, residual add + LayerNorm and bf16 working copies, and what those
# need (error, model_config, attention back-end names, head schedules, and the cache of measured machine
# facts the fused kernel's bf16 code path is kept in: machine_cache, atomic_file).
# LibTorch alone: fmt header-only from LibTorch's bundled copy; no yaml-cpp, HDF5,
# Boost or PCRE2. Both builds define it:
#   PRISM_DEVICE_MINIMAL   it is the build (cmake/PrismDeviceMinimal.cmake)
#   the full build         apps/device_bench includes this, not part of `all`: the device
#                          check builds the bench and the CUDA tests on it first, so the
#                          kernel stages start while the rest of prism still compiles,
#                          and run even if some of prism does not
if(TARGET prism_device_lib)
  return()
endif()
find_package(Threads REQUIRED)
set(_src ${CMAKE_CURRENT_LIST_DIR}/..)
set(PRISM_DEVICE_SOURCES
  ${_src}/lib/prism/error.cpp
  ${_src}/lib/prism/atomic_file.cpp
  ${_src}/lib/prism/machine_cache.cpp
  ${_src}/lib/prism/config/model_config.cpp
  ${_src}/lib/prism/config/attention_backend.cpp
  ${_src}/lib/prism/schedule/head_schedule.cpp
  ${_src}/lib/prism/schedule/rules.cpp
  ${_src}/lib/prism/model/gpt.cpp
  ${_src}/lib/prism/model/working_copies.cpp)
# Every op binding (lib/prism/ops: attention and its back ends, the fused epilogues,
# the LM-head loss, AdamW); the CUDA binding only with the CUDA back end.
file(GLOB_RECURSE _ops CONFIGURE_DEPENDS ${_src}/lib/prism/ops/*.cpp)
if(NOT PRISM_WITH_CUDA)
  list(FILTER _ops EXCLUDE REGEX "/ops/cuda/")
endif()
list(APPEND PRISM_DEVICE_SOURCES ${_ops})

if(TARGET prism_lib)
  add_library(prism_device_lib STATIC EXCLUDE_FROM_ALL ${PRISM_DEVICE_SOURCES})
else()
  add_library(prism_device_lib STATIC ${PRISM_DEVICE_SOURCES})
endif()
target_include_directories(prism_device_lib PUBLIC ${_src}/lib)
target_include_directories(prism_device_lib SYSTEM PUBLIC ${TORCH_INCLUDE_DIRS})
# nlohmann/json.hpp (machine_cache.cpp): the full build's target; in the minimal build the headers
# scripts/device-prepare.sh carries in .device/ (nlohmann-json3-dev), else the system's.
if(TARGET nlohmann_json::nlohmann_json)
  target_link_libraries(prism_device_lib PUBLIC nlohmann_json::nlohmann_json)
else()
  find_path(PRISM_NLOHMANN_INCLUDE_DIR nlohmann/json.hpp HINTS ${_src}/.device/root/usr/include)
  if(NOT PRISM_NLOHMANN_INCLUDE_DIR)
    message(FATAL_ERROR "prism: nlohmann/json.hpp not found. Fix: run scripts/device-prepare.sh (it carries "
                        "nlohmann-json3-dev in .device/) or install nlohmann-json3-dev")
  endif()
  target_include_directories(prism_device_lib SYSTEM PUBLIC ${PRISM_NLOHMANN_INCLUDE_DIR})
endif()
target_compile_options(prism_device_lib PRIVATE ${PRISM_WARNINGS})
target_compile_definitions(prism_device_lib PUBLIC
  FMT_HEADER_ONLY=1 PRISM_VERSION="${PROJECT_VERSION}" $<$<BOOL:${PRISM_WITH_CUDA}>:PRISM_WITH_CUDA=1>)
target_link_libraries(prism_device_lib PUBLIC ${TORCH_LIBRARIES} prism_kernels_cpu Threads::Threads)
if(TARGET prism_kernels_cuda)
  target_link_libraries(prism_device_lib PUBLIC prism_kernels_cuda)
endif()
target_precompile_headers(prism_device_lib PRIVATE
  <torch/torch.h> <fmt/format.h> <fmt/ranges.h> <string> <vector> <map> <memory> <optional> <functional>)
