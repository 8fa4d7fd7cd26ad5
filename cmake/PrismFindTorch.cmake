# LibTorch, any 2.x, CPU or CUDA. Looked for, in order:
#   1. Torch_DIR or CMAKE_PREFIX_PATH as given by the user;
#   2. the torch package of PRISM_PYTHON (default: the repository's .venv, then python3).
find_package(Torch QUIET CONFIG)
if(NOT Torch_FOUND)
  if(NOT PRISM_PYTHON)
    if(EXISTS ${CMAKE_SOURCE_DIR}/.venv/bin/python)
      set(PRISM_PYTHON ${CMAKE_SOURCE_DIR}/.venv/bin/python)
    else()
      find_program(PRISM_PYTHON NAMES python3 python)
    endif()
  endif()
  if(PRISM_PYTHON)
    execute_process(
      COMMAND ${PRISM_PYTHON} -c "import torch; print(torch.utils.cmake_prefix_path)"
      OUTPUT_VARIABLE _torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE _torch_rc ERROR_QUIET)
    if(_torch_rc EQUAL 0 AND _torch_prefix)
      list(APPEND CMAKE_PREFIX_PATH ${_torch_prefix})
    endif()
  endif()
  find_package(Torch QUIET CONFIG)
endif()
if(NOT Torch_FOUND)
  message(FATAL_ERROR
    "prism: LibTorch not found. Fix: run scripts/setup.sh (creates .venv with torch), "
    "or pass -DCMAKE_PREFIX_PATH=/path/to/libtorch (any LibTorch 2.x), "
    "or -DPRISM_PYTHON=/path/to/python with torch installed.")
endif()
if(Torch_VERSION VERSION_LESS 2.0)
  message(FATAL_ERROR "prism: LibTorch ${Torch_VERSION} found at ${Torch_DIR}; Prism needs 2.x.")
endif()
# The Python interpreter used by parity tests (PyTorch reference scripts).
if(NOT PRISM_PYTHON)
  if(EXISTS ${CMAKE_SOURCE_DIR}/.venv/bin/python)
    set(PRISM_PYTHON ${CMAKE_SOURCE_DIR}/.venv/bin/python)
  else()
    find_program(PRISM_PYTHON NAMES python3 python)
  endif()
endif()
set(PRISM_PYTHON ${PRISM_PYTHON} CACHE FILEPATH "Python with torch, for reference scripts")
# LibTorch 2.14 and newer refuse to compile below C++20 (torch/all.h); the project
# itself is C++17 code, so the standard only rises when the LibTorch found needs it.
if(Torch_VERSION VERSION_GREATER_EQUAL 2.14 AND CMAKE_CXX_STANDARD LESS 20)
  message(STATUS "prism: LibTorch ${Torch_VERSION} needs C++20; compiling C++ as C++20")
  set(CMAKE_CXX_STANDARD 20)
endif()
