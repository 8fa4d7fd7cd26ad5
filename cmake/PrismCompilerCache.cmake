# Use ccache when it is installed. The sloppiness settings let ccache cache
# translation units built with a precompiled header; the base directory makes
# paths inside the checkout relative, so another clone (CI's, a worktree) hits
# the same cache entries.
find_program(PRISM_CCACHE ccache)
if(PRISM_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(_launcher ${CMAKE_COMMAND} -E env
      "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
      "CCACHE_BASEDIR=${CMAKE_SOURCE_DIR}"
      ${PRISM_CCACHE})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${_launcher})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env "CCACHE_BASEDIR=${CMAKE_SOURCE_DIR}" ${PRISM_CCACHE})
  message(STATUS "prism: compiler cache ${PRISM_CCACHE}")
endif()
