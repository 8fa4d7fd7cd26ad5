# Apache Arrow C++ with Parquet, for `prism data prepare` on Parquet corpora
# (lib/prism/data/parquet_reader.cpp). Looked for, in order:
#   1. Arrow's own CMake packages (ArrowConfig/ParquetConfig: a system, conda or
#      source-built Arrow; -DArrow_DIR=... -DParquet_DIR=...);
#   2. the pyarrow package of PRISM_PYTHON (the repository's .venv by default), the way
#      cmake/PrismFindTorch.cmake takes LibTorch from the torch wheel: the wheel ships
#      libarrow.so.NNNN, libparquet.so.NNNN and their headers (pyarrow/include).
#      Debian 12 has no libarrow-dev, so this is the usual way here.
# PRISM_PARQUET: AUTO (default: Parquet support when Arrow is found; a prism built
# without it refuses .parquet inputs at run time, naming the fix), ON (required), OFF.
#
# Isolation: Arrow 2x's headers need C++20 (std::span) and Prism is C++17, so one TU
# sees them, compiled as C++20 in its own object library (prism_parquet in
# lib/CMakeLists.txt) behind a C++17 interface of std::string and string_view
# (parquet_reader.h). The wheel's ABI is checked, not assumed: a test program passes a
# std::string across the library boundary (ParquetFileReader::OpenFile), which links
# only when the wheel's std::string ABI (_GLIBCXX_USE_CXX11_ABI) is the compiler's, and
# runs only when this system's libstdc++ has every GLIBCXX version the wheel needs.
#   PRISM_WITH_PARQUET   Arrow found and usable; target prism_arrow links it
set(PRISM_PARQUET "AUTO" CACHE STRING "Parquet inputs through Arrow C++: AUTO (when found), ON (required), OFF")
set_property(CACHE PRISM_PARQUET PROPERTY STRINGS AUTO ON OFF)
set(PRISM_WITH_PARQUET OFF)
if(PRISM_PARQUET STREQUAL "OFF")
  message(STATUS "prism: Parquet inputs off (PRISM_PARQUET=OFF)")
  return()
endif()

set(_prism_arrow_how "")
find_package(Parquet QUIET CONFIG)
if(Parquet_FOUND AND TARGET Parquet::parquet_shared)
  add_library(prism_arrow INTERFACE)
  target_link_libraries(prism_arrow INTERFACE Parquet::parquet_shared)
  set(_prism_arrow_how "Arrow ${Arrow_VERSION} (CMake package at ${Parquet_DIR})")
elseif(PRISM_PYTHON)
  execute_process(
    COMMAND ${PRISM_PYTHON} -c
      "import pyarrow as pa, os; d = os.path.dirname(pa.__file__); print(pa.__version__); print(pa.get_include()); print(d)"
    OUTPUT_VARIABLE _pa OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _pa_rc ERROR_QUIET)
  if(_pa_rc EQUAL 0)
    string(REPLACE "\n" ";" _pa "${_pa}")
    list(GET _pa 0 _pa_version)
    list(GET _pa 1 _pa_include)
    list(GET _pa 2 _pa_dir)
    # The wheel's libraries carry the Arrow SO version (libarrow.so.2600 for 26.0.x) and no
    # unversioned link name; they find each other through their RUNPATH ($ORIGIN).
    file(GLOB _pa_arrow "${_pa_dir}/libarrow.so.[0-9]*")
    file(GLOB _pa_parquet "${_pa_dir}/libparquet.so.[0-9]*")
    list(FILTER _pa_arrow EXCLUDE REGEX "\\.so\\.[0-9]+\\.[0-9]")
    list(FILTER _pa_parquet EXCLUDE REGEX "\\.so\\.[0-9]+\\.[0-9]")
    if(_pa_arrow AND _pa_parquet AND EXISTS "${_pa_include}/parquet/arrow/reader.h")
      list(GET _pa_arrow 0 _pa_arrow)
      list(GET _pa_parquet 0 _pa_parquet)
      add_library(prism_arrow INTERFACE)
      target_include_directories(prism_arrow SYSTEM INTERFACE "${_pa_include}")
      target_link_libraries(prism_arrow INTERFACE "${_pa_parquet}" "${_pa_arrow}")
      set(_prism_arrow_how "Arrow ${_pa_version} from the pyarrow wheel of ${PRISM_PYTHON} (${_pa_dir})")
      set(_prism_arrow_check_incs "${_pa_include}")
      set(_prism_arrow_check_libs "${_pa_parquet}" "${_pa_arrow}")
      set(_prism_arrow_check_rpath "-Wl,-rpath,${_pa_dir}")
    endif()
  endif()
endif()

if(NOT TARGET prism_arrow)
  set(_fix "pip install pyarrow into ${PRISM_PYTHON} (scripts/setup.sh does: scripts/requirements.txt), or pass -DArrow_DIR/-DParquet_DIR of an Arrow C++ install")
  if(PRISM_PARQUET STREQUAL "ON")
    message(FATAL_ERROR "prism: Arrow C++ with Parquet not found (PRISM_PARQUET=ON). Fix: ${_fix}")
  endif()
  message(STATUS "prism: Arrow C++ not found: Parquet inputs off. Fix: ${_fix}")
  return()
endif()

# The ABI check (above), for the wheel; an Arrow CMake package was built by this toolchain.
if(_prism_arrow_check_libs)
  include(CheckCXXSourceRuns)
  set(CMAKE_REQUIRED_QUIET ON)
  set(_prism_std ${CMAKE_CXX_STANDARD})
  set(CMAKE_CXX_STANDARD 20)  # try_compile follows the project's standard otherwise
  set(CMAKE_REQUIRED_INCLUDES ${_prism_arrow_check_incs})
  set(CMAKE_REQUIRED_LIBRARIES ${_prism_arrow_check_libs})
  set(CMAKE_REQUIRED_LINK_OPTIONS ${_prism_arrow_check_rpath})
  check_cxx_source_runs([=[
#include <parquet/file_reader.h>
#include <string>
int main() {
  try {
    parquet::ParquetFileReader::OpenFile(std::string("/nonexistent/prism-abi-check.parquet"));
  } catch (const std::exception& e) {
    return std::string(e.what()).find("prism-abi-check") == std::string::npos;
  }
  return 1;
}
]=] PRISM_ARROW_ABI_OK)
  unset(CMAKE_REQUIRED_QUIET)
  set(CMAKE_CXX_STANDARD ${_prism_std})
  unset(CMAKE_REQUIRED_INCLUDES)
  unset(CMAKE_REQUIRED_LIBRARIES)
  unset(CMAKE_REQUIRED_LINK_OPTIONS)
  if(NOT PRISM_ARROW_ABI_OK)
    set(_why "${_prism_arrow_how} does not link or run with this compiler: its C++ ABI (_GLIBCXX_USE_CXX11_ABI) or the libstdc++ it needs differs from this system's (build/CMakeFiles/CMakeError.log)")
    if(PRISM_PARQUET STREQUAL "ON")
      message(FATAL_ERROR "prism: ${_why}. Fix: use an Arrow C++ built here (-DParquet_DIR=...) or a pyarrow wheel for this platform")
    endif()
    message(STATUS "prism: ${_why}: Parquet inputs off")
    return()
  endif()
endif()

set(PRISM_WITH_PARQUET ON)
message(STATUS "prism: Parquet inputs through ${_prism_arrow_how}")
