# Data-parallel training (lib/prism/train/distributed.cpp) uses LibTorch's c10d:
# TCPStore for rendezvous, ProcessGroupGloo on the CPU, ProcessGroupNCCL on CUDA.
# The pip wheel ships c10d's headers but not gloo's, which ProcessGroupGloo.hpp
# includes (Debian/Ubuntu: libgloo-dev). Only gloo's public interface types are
# used through them (the Gloo code itself is the copy inside libtorch_cpu), so
# libgloo is never linked. Without them Prism still builds; `prism train` then
# refuses WORLD_SIZE > 1 with a clear error.
#   PRISM_HAVE_DISTRIBUTED  c10d + Gloo usable
#   PRISM_HAVE_NCCL         also ProcessGroupNCCL (a CUDA LibTorch built with NCCL)
set(PRISM_HAVE_DISTRIBUTED OFF)
set(PRISM_HAVE_NCCL OFF)
set(_prism_torch_defs "")
foreach(_t torch_cpu torch_cuda)
  if(TARGET ${_t})
    get_target_property(_d ${_t} INTERFACE_COMPILE_DEFINITIONS)
    if(_d)
      list(APPEND _prism_torch_defs ${_d})
    endif()
  endif()
endforeach()
find_path(PRISM_GLOO_INCLUDE_DIR gloo/algorithm.h DOC "gloo headers (libgloo-dev) for c10d's ProcessGroupGloo.hpp")
if("USE_C10D_GLOO" IN_LIST _prism_torch_defs AND PRISM_GLOO_INCLUDE_DIR)
  set(PRISM_HAVE_DISTRIBUTED ON)
  if("USE_C10D_NCCL" IN_LIST _prism_torch_defs)
    find_path(PRISM_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    if(PRISM_NCCL_INCLUDE_DIR)
      set(PRISM_HAVE_NCCL ON)
    endif()
  endif()
  message(STATUS "prism: data-parallel training on c10d (Gloo headers at ${PRISM_GLOO_INCLUDE_DIR}; NCCL: ${PRISM_HAVE_NCCL})")
elseif(NOT "USE_C10D_GLOO" IN_LIST _prism_torch_defs)
  message(STATUS "prism: no data-parallel training (this LibTorch was built without c10d Gloo)")
else()
  message(STATUS "prism: no data-parallel training (gloo headers not found; install libgloo-dev)")
endif()
