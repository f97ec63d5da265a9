#pragma once
// conv_peak --products: the CPU backend's matrix products alone, fp32 (backends/cpu/detail/gemm.hpp)
// and bf16 (gemm16.hpp), on one thread, on each instruction set the host runs: what a
// convolution's products can reach before im2col, packing from the image and the layer's threads,
// and how the kernels meet sizes that end in partial tiles (a 7 x 7 map's 49 pixels, 64 channels
// beside 48-column panels).
#include <cstddef>
#include <string>
#include <vector>

namespace cnn::bench {

struct ProductSize {
  std::size_t m = 0, n = 0, k = 0;
};

// "MxNxK", each at least 1; throws std::invalid_argument naming the text otherwise.
ProductSize parse_product_size(const std::string& text);

struct ProductTime {
  std::string format;  // the operands': "fp32" or "bf16"
  std::string isa;     // as CNN_CPU_ISA names it
  double seconds = 0;
};

// C[m x n] = A[m x k] B[k x n], all stored row-major, with the packing the product asks for: the
// median of `repeat` runs after `warmup`, in fp32 on each instruction set from AVX2 up that the
// host has, and in bf16 (the operands rounded as they are packed) on AVX512-BF16 and AMX where it
// has them.
std::vector<ProductTime> time_product(const ProductSize& size, int warmup, int repeat);

}  // namespace cnn::bench
