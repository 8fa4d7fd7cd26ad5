# The CUDA back end is built when the LibTorch found was built with CUDA and nvcc exists.
# Sets PRISM_WITH_CUDA; kernels/CMakeLists.txt and lib/CMakeLists.txt follow it.
set(PRISM_WITH_CUDA OFF)
set(_torch_has_cuda OFF)
if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES OR CUDA_FOUND)
  set(_torch_has_cuda ON)
endif()
if(PRISM_CUDA STREQUAL "ON" OR (PRISM_CUDA STREQUAL "AUTO" AND _torch_has_cuda))
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER AND _torch_has_cuda)
    enable_language(CUDA)
    # LibTorch sets CMAKE_CUDA_ARCHITECTURES to OFF and appends its own -gencode
    # flags; one list of targets is ours (PrismCudaToolkit kept the user's choice).
    set(CMAKE_CUDA_ARCHITECTURES ${PRISM_CUDA_ARCHS})
    string(REGEX REPLACE "-gencode[ =]+arch=compute_[0-9a-z]+,code=[a-z_0-9]+" "" CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS}")
    set(PRISM_WITH_CUDA ON)
    message(STATUS "prism: CUDA back end for architectures ${PRISM_CUDA_ARCHS} with nvcc ${CMAKE_CUDA_COMPILER_VERSION}")
  elseif(PRISM_CUDA STREQUAL "ON")
    message(FATAL_ERROR "prism: PRISM_CUDA=ON but LibTorch has CUDA=${_torch_has_cuda} and nvcc='${CMAKE_CUDA_COMPILER}'. "
                        "Fix: use a CUDA build of LibTorch (-DPRISM_PYTHON=/path/to/python with a CUDA torch) "
                        "and put nvcc on PATH, or set -DPRISM_CUDA=AUTO.")
  endif()
endif()

# Tests run the kernels' source on the CPU under emulation (kernels/cuda/emulation.h);
# that needs the CUDA headers (cuda_bf16.h, vector types) but neither nvcc nor a GPU.
# Marks `source` (of the calling directory) as such a test when the headers exist.
function(prism_cuda_emulation_source source)
  find_path(PRISM_CUDA_INCLUDE_DIR cuda_bf16.h
            HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDA_TOOLKIT_ROOT_DIR} ENV CUDA_HOME ENV CUDA_PATH /usr/local/cuda
            PATH_SUFFIXES include DOC "CUDA headers for the host emulation of the kernels in tests")
  if(PRISM_CUDA_INCLUDE_DIR)
    set_source_files_properties(${source} PROPERTIES
      COMPILE_DEFINITIONS PRISM_HAVE_CUDA_HEADERS=1
      COMPILE_OPTIONS "-isystem;${PRISM_CUDA_INCLUDE_DIR};-Wno-unknown-pragmas"  # nvcc's #pragma unroll
      SKIP_PRECOMPILE_HEADERS ON)
  else()
    message(STATUS "prism: no CUDA headers (cuda_bf16.h): the emulated CUDA kernel tests will report skipped")
  endif()
endfunction()
