#pragma once
// Counter-based random numbers: the value for (seed, index) needs no state, so every thread,
// every backend and every replay of a step draws the same numbers. Part of the backend contract
// (engine/core/backend.hpp): a backend draws dropout's mask with dropout_keep, so it is public.
#include <cstdint>

#if defined(__CUDACC__)
#define CNN_HOST_DEVICE __host__ __device__
#else
#define CNN_HOST_DEVICE
#endif

namespace cnn {

CNN_HOST_DEVICE inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) with 24 bits, exact in float.
CNN_HOST_DEVICE inline float uniform01(std::uint64_t seed, std::uint64_t index) {
  return static_cast<float>(splitmix64(seed ^ splitmix64(index)) >> 40) * (1.0f / 16777216.0f);
}

CNN_HOST_DEVICE inline bool dropout_keep(std::uint64_t seed, std::uint64_t index, float p) {
  return uniform01(seed, index) >= p;
}

}  // namespace cnn
