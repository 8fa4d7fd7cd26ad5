# PRISM_DEVICE_MINIMAL: the GPU pieces alone, for a machine that has LibTorch,
# nvcc and CMake but none of our Debian libraries. Builds:
#   prism_device_lib     cmake/PrismCudaDeviceLib.cmake: kernels, attention, the GPT model
#   prism_device_tests   Catch2 runner over test/cuda (cmake/PrismCudaTests.cmake)
#   prism-device-bench   apps/device_bench (CUDA builds only)
# Dependencies: LibTorch; fmt header-only from LibTorch's bundled copy; Catch2 v2's
# single header, from .device/ (scripts/device-prepare.sh) or the system.
# scripts/device-check.sh falls back to this build when the full one cannot be
# configured on the device (a carried library missing or unusable), so the
# kernel's own stages still run; the full build defines the same two targets.
add_subdirectory(kernels)
include(PrismCudaDeviceLib)

if(PRISM_BUILD_TESTS)
  enable_testing()
  include(PrismCudaTests)
endif()

if(PRISM_WITH_CUDA)
  add_subdirectory(apps/device_bench)
endif()
message(STATUS "prism: device-minimal build (LibTorch ${Torch_VERSION}; CUDA back end: ${PRISM_WITH_CUDA}; "
               "Catch2 from ${PRISM_CATCH2_INCLUDE_DIR})")
