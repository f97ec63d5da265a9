#pragma once
// The loop of element-wise kernels: each thread takes elements blockDim * gridDim apart, so a
// grid capped at a few blocks per multiprocessor covers any size.
#include <cstddef>

#define CNN_FOR_EACH_ELEMENT(i, n)                                                        \
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < (n); \
       i += std::size_t{gridDim.x} * blockDim.x)
