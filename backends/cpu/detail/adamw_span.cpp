// AdamW's update over a span (adamw_span.hpp): a scalar loop, and the same arithmetic 16 or 8
// lanes at a time (the x86-64 baseline's 4 lanes were a twentieth of small's training step).
#include "backends/cpu/detail/adamw_span.hpp"

#include <immintrin.h>

#include <cmath>

#include "backends/cpu/detail/cpu_isa.hpp"

namespace cnn::cpu {
namespace {

[[gnu::always_inline]] inline void adamw_scalar(const AdamWStep& s, float* p, const float* g, float* m, float* v,
                                                std::size_t begin, std::size_t end) {
  const float keep1 = 1.0f - s.beta1, keep2 = 1.0f - s.beta2;
  for (std::size_t i = begin; i < end; ++i) {
    p[i] *= s.decay;
    m[i] = s.beta1 * m[i] + keep1 * g[i];
    v[i] = s.beta2 * v[i] + keep2 * g[i] * g[i];
    const float denom = std::sqrt(v[i]) / s.sqrt_correction2 + s.epsilon;
    p[i] -= s.step_size * m[i] / denom;
  }
}

// The scalar loop's expressions, 16 lanes at a time; then the scalar loop for the rest.
CNN_TARGET_AVX512 void adamw_avx512(const AdamWStep& s, float* p, const float* g, float* m, float* v, std::size_t begin,
                                    std::size_t end) {
  const __m512 decay = _mm512_set1_ps(s.decay), beta1 = _mm512_set1_ps(s.beta1), beta2 = _mm512_set1_ps(s.beta2),
               keep1 = _mm512_set1_ps(1.0f - s.beta1), keep2 = _mm512_set1_ps(1.0f - s.beta2),
               correction = _mm512_set1_ps(s.sqrt_correction2), epsilon = _mm512_set1_ps(s.epsilon),
               step_size = _mm512_set1_ps(s.step_size);
  std::size_t i = begin;
  for (; i + 16 <= end; i += 16) {
    const __m512 gi = _mm512_loadu_ps(g + i), pi = _mm512_mul_ps(_mm512_loadu_ps(p + i), decay);
    const __m512 mi = _mm512_add_ps(_mm512_mul_ps(beta1, _mm512_loadu_ps(m + i)), _mm512_mul_ps(keep1, gi));
    const __m512 vi =
        _mm512_add_ps(_mm512_mul_ps(beta2, _mm512_loadu_ps(v + i)), _mm512_mul_ps(_mm512_mul_ps(keep2, gi), gi));
    const __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), correction), epsilon);
    _mm512_storeu_ps(m + i, mi);
    _mm512_storeu_ps(v + i, vi);
    _mm512_storeu_ps(p + i, _mm512_sub_ps(pi, _mm512_div_ps(_mm512_mul_ps(step_size, mi), denom)));
  }
  adamw_scalar(s, p, g, m, v, i, end);
}

// The same, 8 lanes at a time.
CNN_TARGET_AVX2 void adamw_avx2(const AdamWStep& s, float* p, const float* g, float* m, float* v, std::size_t begin,
                                std::size_t end) {
  const __m256 decay = _mm256_set1_ps(s.decay), beta1 = _mm256_set1_ps(s.beta1), beta2 = _mm256_set1_ps(s.beta2),
               keep1 = _mm256_set1_ps(1.0f - s.beta1), keep2 = _mm256_set1_ps(1.0f - s.beta2),
               correction = _mm256_set1_ps(s.sqrt_correction2), epsilon = _mm256_set1_ps(s.epsilon),
               step_size = _mm256_set1_ps(s.step_size);
  std::size_t i = begin;
  for (; i + 8 <= end; i += 8) {
    const __m256 gi = _mm256_loadu_ps(g + i), pi = _mm256_mul_ps(_mm256_loadu_ps(p + i), decay);
    const __m256 mi = _mm256_add_ps(_mm256_mul_ps(beta1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(keep1, gi));
    const __m256 vi =
        _mm256_add_ps(_mm256_mul_ps(beta2, _mm256_loadu_ps(v + i)), _mm256_mul_ps(_mm256_mul_ps(keep2, gi), gi));
    const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), correction), epsilon);
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    _mm256_storeu_ps(p + i, _mm256_sub_ps(pi, _mm256_div_ps(_mm256_mul_ps(step_size, mi), denom)));
  }
  adamw_scalar(s, p, g, m, v, i, end);
}

}  // namespace

void adamw_span(const AdamWStep& s, float* p, const float* g, float* m, float* v, std::size_t begin, std::size_t end) {
  if (isa() >= CpuIsa::avx512) return adamw_avx512(s, p, g, m, v, begin, end);
  if (isa() >= CpuIsa::avx2) return adamw_avx2(s, p, g, m, v, begin, end);
  adamw_scalar(s, p, g, m, v, begin, end);
}

}  // namespace cnn::cpu
