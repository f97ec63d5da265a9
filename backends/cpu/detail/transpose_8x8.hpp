#pragma once
// An 8 x 8 square of floats transposed in AVX registers: the product's packing and its swapped
// tiles (gemm.cpp), and the stem's dy turned to [pixel][channel] (cpu_direct_conv.cpp).
#include <immintrin.h>

namespace cnn::cpu {

// rows[r] holds columns [0, 8) of row r; after, rows[j] holds column j (rows 0..7 of it).
__attribute__((target("avx2,fma"))) inline void transpose_8x8_avx(__m256 (&rows)[8]) {
  __m256 pairs[8], quads[8];
  for (int i = 0; i < 4; ++i) {
    pairs[2 * i] = _mm256_unpacklo_ps(rows[2 * i], rows[2 * i + 1]);
    pairs[2 * i + 1] = _mm256_unpackhi_ps(rows[2 * i], rows[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // rows 0..3, then 4..7
    const __m256* p = pairs + 4 * h;
    quads[4 * h + 0] = _mm256_shuffle_ps(p[0], p[2], _MM_SHUFFLE(1, 0, 1, 0));
    quads[4 * h + 1] = _mm256_shuffle_ps(p[0], p[2], _MM_SHUFFLE(3, 2, 3, 2));
    quads[4 * h + 2] = _mm256_shuffle_ps(p[1], p[3], _MM_SHUFFLE(1, 0, 1, 0));
    quads[4 * h + 3] = _mm256_shuffle_ps(p[1], p[3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int j = 0; j < 4; ++j) {
    rows[j] = _mm256_permute2f128_ps(quads[j], quads[4 + j], 0x20);
    rows[j + 4] = _mm256_permute2f128_ps(quads[j], quads[4 + j], 0x31);
  }
}

}  // namespace cnn::cpu
