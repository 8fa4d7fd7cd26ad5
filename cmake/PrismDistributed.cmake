# Data-parallel training (lib/prism/train/process_group.cpp) uses LibTorch's c10d:
# TCPStore for rendezvous, ProcessGroupGloo on the CPU, ProcessGroupNCCL on CUDA.
# The pip wheel ships c10d's headers but not gloo's, which ProcessGroupGloo.hpp
# includes (Debian/Ubuntu: libgloo-dev). Only gloo's public interface types are
# used through them (the Gloo code itself is the copy inside libtorch_cpu), so
# libgloo is never linked. Without them Prism still builds; `prism train` then
# refuses WORLD_SIZE > 1 with a clear error.
#
# NCCL: ProcessGroupNCCL.hpp includes <nccl.h>. A CUDA LibTorch built with NCCL
# (USE_C10D_NCCL) has it wherever that LibTorch came with it: the pip wheel
# nvidia-nccl-cu13/-cu12 (site-packages/nvidia/nccl/include), the CUDA toolkit,
# NCCL_ROOT / NCCL_INCLUDE_DIR, or a system package (libnccl-dev). In a CUDA
# build with such a LibTorch, not finding it is a configure error: a silent
# build without NCCL would stop every multi-GPU run with "no NCCL".
# -DPRISM_NCCL=OFF builds without it on purpose (one GPU per run).
#   PRISM_HAVE_DISTRIBUTED  c10d + Gloo usable
#   PRISM_HAVE_NCCL         also ProcessGroupNCCL (a CUDA LibTorch built with NCCL)
option(PRISM_NCCL "Multi-GPU training through NCCL when LibTorch has it (OFF: one GPU per run, on purpose)" ON)
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

# Where a pip-installed torch keeps the NVIDIA wheels: site-packages, four levels above
# Torch_DIR (site-packages/torch/share/cmake/Torch).
# PRISM_CUDA_WHEEL_INCLUDE_DIRS: those wheels' headers (nvidia/cu13/include, or
# nvidia/<lib>/include for CUDA 12). ProcessGroupNCCL.hpp reaches ATen/cuda/CUDAContextLight.h,
# which includes cusparse.h, absent from a toolkit of compilers alone; lib/CMakeLists.txt gives
# these folders to process_group.cpp, after the toolkit's own (whose headers win).
set(_prism_nccl_hints "")
set(PRISM_CUDA_WHEEL_INCLUDE_DIRS "")
if(Torch_DIR)
  get_filename_component(_prism_site "${Torch_DIR}/../../../.." ABSOLUTE)
  list(APPEND _prism_nccl_hints "${_prism_site}/nvidia/nccl/include" "${_prism_site}/nvidia/cu13/include"
                                "${_prism_site}/nvidia/cu12/include")
  if(PRISM_WITH_CUDA)
    file(GLOB PRISM_CUDA_WHEEL_INCLUDE_DIRS LIST_DIRECTORIES true "${_prism_site}/nvidia/*/include")
  endif()
endif()
set(_prism_torch_nccl OFF)
if(PRISM_WITH_CUDA AND "USE_C10D_NCCL" IN_LIST _prism_torch_defs)
  set(_prism_torch_nccl ON)
  find_path(PRISM_NCCL_INCLUDE_DIR nccl.h
            HINTS ${_prism_nccl_hints} ENV NCCL_INCLUDE_DIR ${CUDAToolkit_INCLUDE_DIRS}
            PATHS ENV NCCL_ROOT ENV NCCL_HOME PATH_SUFFIXES include
            DOC "directory of nccl.h (the NCCL LibTorch was built with)")
  if(PRISM_NCCL AND NOT PRISM_NCCL_INCLUDE_DIR)
    message(FATAL_ERROR "prism: this CUDA LibTorch (${Torch_DIR}) was built with NCCL, but nccl.h was not found "
                        "(looked in ${_prism_nccl_hints}, NCCL_INCLUDE_DIR, NCCL_ROOT, the CUDA toolkit and the system). "
                        "Without it multi-GPU training cannot be built. Fix: pip install the NCCL wheel matching "
                        "LibTorch's CUDA (nvidia-nccl-cu13 / -cu12) into that Python, or apt-get install libnccl-dev, "
                        "or pass -DPRISM_NCCL_INCLUDE_DIR=/dir/with/nccl.h; -DPRISM_NCCL=OFF builds for one GPU per run.")
  endif()
endif()

find_path(PRISM_GLOO_INCLUDE_DIR gloo/algorithm.h DOC "gloo headers (libgloo-dev) for c10d's ProcessGroupGloo.hpp")
if("USE_C10D_GLOO" IN_LIST _prism_torch_defs AND PRISM_GLOO_INCLUDE_DIR)
  set(PRISM_HAVE_DISTRIBUTED ON)
  if(_prism_torch_nccl AND PRISM_NCCL AND PRISM_NCCL_INCLUDE_DIR)
    set(PRISM_HAVE_NCCL ON)
  endif()
  message(STATUS "prism: data-parallel training on c10d (Gloo headers at ${PRISM_GLOO_INCLUDE_DIR}; NCCL: "
                 "${PRISM_HAVE_NCCL})")
elseif(NOT "USE_C10D_GLOO" IN_LIST _prism_torch_defs)
  message(STATUS "prism: no data-parallel training (this LibTorch was built without c10d Gloo)")
else()
  message(STATUS "prism: no data-parallel training (gloo headers not found; install libgloo-dev)")
endif()
if(PRISM_HAVE_NCCL)
  message(STATUS "prism: NCCL for multi-GPU training, nccl.h at ${PRISM_NCCL_INCLUDE_DIR}")
elseif(_prism_torch_nccl AND NOT PRISM_NCCL)
  message(STATUS "prism: NCCL left out on request (-DPRISM_NCCL=OFF): one GPU per run")
endif()
