#pragma once
// bf16 <-> fp32 one value at a time, for the kernels' scalar tails and their
// references: bf16 is the top half of an fp32, so widening is a shift and
// narrowing rounds to the nearest even, a NaN staying a (quiet) NaN.
#include <cstdint>
#include <cstring>

namespace prism::kernels::cpu {

inline float bf16_to_float(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace prism::kernels::cpu
