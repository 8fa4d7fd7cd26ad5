# Helps a CUDA build of LibTorch find the CUDA toolkit before find_package(Torch).
# Included before PrismFindTorch; does nothing for a CPU LibTorch.
#
# LibTorch's CMake config looks for nvcc, cudart, cublas, nvrtc (FindCUDA and
# FindCUDAToolkit). A pip torch gets those libraries from the nvidia-* wheels,
# which ship only versioned names (libcublas.so.13) and live in site-packages,
# where find_library does not look. So, when the Python's torch is a CUDA build:
#   - the toolkit root is taken from nvcc itself (a wrapper script on PATH would
#     otherwise make FindCUDA guess /usr/local),
#   - every nvidia/*/lib directory of that site-packages gets an unversioned
#     symlink farm in the build tree, added to CMAKE_LIBRARY_PATH,
# A full toolkit install (/usr/local/cuda with every library) needs none of this
# and is left alone: the wheel paths only come after the toolkit's own.


# GPU targets: PRISM_CUDA_ARCHS, by default sm_80 and sm_90, or a CMAKE_CUDA_ARCHITECTURES
# given at the first configure. LibTorch's config overwrites CMAKE_CUDA_ARCHITECTURES
# (and enable_language caches nvcc's default), so the choice is kept in our own variable.
if(NOT DEFINED CACHE{PRISM_CUDA_ARCHS})
  if(CMAKE_CUDA_ARCHITECTURES)
    set(_archs "${CMAKE_CUDA_ARCHITECTURES}")
  else()
    set(_archs 80 90)
  endif()
  set(PRISM_CUDA_ARCHS "${_archs}" CACHE STRING "CUDA architectures of the Prism kernels (e.g. 80;90, or 90 alone)")
endif()
# ... and LibTorch adds -gencode flags for TORCH_CUDA_ARCH_LIST (PrismCuda strips them).
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "")
  foreach(_a ${PRISM_CUDA_ARCHS})
    string(REGEX REPLACE "^([0-9]+)([0-9])[a-z]?$" "\\1.\\2" _a "${_a}")
    list(APPEND TORCH_CUDA_ARCH_LIST ${_a})
  endforeach()
endif()

# Which Python's torch will be found (same rule as PrismFindTorch).
set(_prism_py "${PRISM_PYTHON}")
if(NOT _prism_py)
  if(EXISTS ${CMAKE_SOURCE_DIR}/.venv/bin/python)
    set(_prism_py ${CMAKE_SOURCE_DIR}/.venv/bin/python)
  else()
    find_program(_prism_py_found NAMES python3 python)
    set(_prism_py "${_prism_py_found}")
  endif()
endif()
if(NOT _prism_py OR Torch_DIR)
  return()
endif()

execute_process(
  COMMAND ${_prism_py} -c "import os, torch, site; print(torch.version.cuda or ''); print(os.path.dirname(os.path.dirname(torch.__file__)))"
  OUTPUT_VARIABLE _prism_torch_info OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE _prism_rc ERROR_QUIET)
if(NOT _prism_rc EQUAL 0)
  return()
endif()
string(REPLACE "\n" ";" _prism_torch_info "${_prism_torch_info}")
list(LENGTH _prism_torch_info _n)
if(_n LESS 2)
  return()
endif()
list(GET _prism_torch_info 0 _prism_torch_cuda)
list(GET _prism_torch_info 1 _prism_site)
if(NOT _prism_torch_cuda)
  return()  # CPU torch: nothing to find
endif()
message(STATUS "prism: torch is a CUDA ${_prism_torch_cuda} build; preparing CUDA toolkit hints")

# 1. The toolkit root, from nvcc itself.
if(NOT CMAKE_CUDA_COMPILER)
  find_program(_prism_nvcc nvcc HINTS ENV CUDA_HOME ENV CUDA_PATH /usr/local/cuda PATH_SUFFIXES bin)
  if(_prism_nvcc)
    set(CMAKE_CUDA_COMPILER ${_prism_nvcc})
  endif()
endif()
if(CMAKE_CUDA_COMPILER AND NOT CUDA_TOOLKIT_ROOT_DIR)
  execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --dryrun -c -x cu /dev/null -o /dev/null
                  ERROR_VARIABLE _prism_dry OUTPUT_QUIET RESULT_VARIABLE _prism_rc)
  if(_prism_dry MATCHES "#\\$ _HERE_=([^\n]*)")
    get_filename_component(_prism_cuda_root "${CMAKE_MATCH_1}/.." ABSOLUTE)
    # The real nvcc, not a wrapper: FindCUDA derives the root from it.
    set(CMAKE_CUDA_COMPILER "${CMAKE_MATCH_1}/nvcc")
    set(CUDA_TOOLKIT_ROOT_DIR "${_prism_cuda_root}" CACHE PATH "CUDA toolkit root (from nvcc)")
    set(CUDAToolkit_ROOT "${_prism_cuda_root}")
    message(STATUS "prism: CUDA toolkit root ${_prism_cuda_root}")
  endif()
endif()

# 2. Unversioned names for the wheels' libraries.
file(GLOB _prism_wheel_libdirs LIST_DIRECTORIES true "${_prism_site}/nvidia/*/lib")
set(_farm ${CMAKE_BINARY_DIR}/prism-cuda-libs)
file(MAKE_DIRECTORY ${_farm})
foreach(_dir ${_prism_wheel_libdirs})
  file(GLOB _libs "${_dir}/lib*.so.*")
  foreach(_lib ${_libs})
    get_filename_component(_name ${_lib} NAME)
    string(REGEX REPLACE "\\.so\\..*$" ".so" _plain ${_name})
    if(NOT EXISTS ${_dir}/${_plain} AND NOT EXISTS ${_farm}/${_plain})
      file(CREATE_LINK ${_lib} ${_farm}/${_plain} SYMBOLIC)
    endif()
  endforeach()
endforeach()
list(APPEND CMAKE_LIBRARY_PATH ${_farm} ${_prism_wheel_libdirs})

# cuDNN from its wheel (LibTorch's FindCUDNN reads these).
if(EXISTS "${_prism_site}/nvidia/cudnn/include/cudnn.h" AND NOT CUDNN_INCLUDE_DIR)
  set(CUDNN_INCLUDE_DIR "${_prism_site}/nvidia/cudnn/include" CACHE PATH "")
  set(CUDNN_LIBRARY "${_farm}/libcudnn.so" CACHE FILEPATH "")
endif()
