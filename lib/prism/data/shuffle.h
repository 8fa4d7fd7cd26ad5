#pragma once
// A seeded shuffle that is the same with every compiler and standard library
// (std::shuffle and the std distributions are not): splitmix64 for the random
// stream, Lemire's unbiased bounded integers, Fisher-Yates from the back.
#include <cstdint>
#include <utility>
#include <vector>

namespace prism {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Uniform in [0, bound), bound > 0.
inline uint64_t uniform_below(uint64_t& state, uint64_t bound) {
  unsigned __int128 m = static_cast<unsigned __int128>(splitmix64(state)) * bound;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < bound) {
    const uint64_t reject_below = (0 - bound) % bound;
    while (low < reject_below) {
      m = static_cast<unsigned __int128>(splitmix64(state)) * bound;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

// Mixes v into the hash h (order matters): seeds from several numbers.
inline uint64_t hash_combine(uint64_t h, uint64_t v) {
  uint64_t s = h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  return splitmix64(s);
}

template <class T>
void seeded_shuffle(std::vector<T>& v, uint64_t seed) {
  uint64_t state = seed;
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[uniform_below(state, i)]);
}

}  // namespace prism
