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
