// AdamW's update over a span (adamw_span.hpp), compiled once per instruction set (Note [Kernels for
// each instruction set], isa_region.hpp): whole vectors of the region's width, then the rest one
// by one, every element through the same expressions. Included by adamw_span.cpp.

namespace cnn::cpu::CNN_ISA {

namespace {

inline float square_root(float x) { return std::sqrt(x); }
#if CNN_ISA_LEVEL >= 2
inline __m512 square_root(__m512 x) { return _mm512_sqrt_ps(x); }
#elif CNN_ISA_LEVEL == 1
inline __m256 square_root(__m256 x) { return _mm256_sqrt_ps(x); }
#endif

// One element's update, or one vector's (GCC's vector types take a float operand as a vector of it).
template <class Value>
[[gnu::always_inline]] inline void adamw_values(const AdamWStep& s, Value& p, Value g, Value& m, Value& v) {
  p = p * s.decay;
  m = s.beta1 * m + (1.0f - s.beta1) * g;
  v = s.beta2 * v + (1.0f - s.beta2) * g * g;
  const Value denom = square_root(v) / s.sqrt_correction2 + s.epsilon;
  p = p - s.step_size * m / denom;
}

}  // namespace

void adamw_span(const AdamWStep& s, float* p, const float* g, float* m, float* v, std::size_t begin, std::size_t end) {
  std::size_t i = begin;
#if CNN_ISA_LEVEL >= 2
  for (; i + 16 <= end; i += 16) {
    __m512 pi = _mm512_loadu_ps(p + i), mi = _mm512_loadu_ps(m + i), vi = _mm512_loadu_ps(v + i);
    adamw_values(s, pi, _mm512_loadu_ps(g + i), mi, vi);
    _mm512_storeu_ps(p + i, pi);
    _mm512_storeu_ps(m + i, mi);
    _mm512_storeu_ps(v + i, vi);
  }
#elif CNN_ISA_LEVEL == 1
  for (; i + 8 <= end; i += 8) {
    __m256 pi = _mm256_loadu_ps(p + i), mi = _mm256_loadu_ps(m + i), vi = _mm256_loadu_ps(v + i);
    adamw_values(s, pi, _mm256_loadu_ps(g + i), mi, vi);
    _mm256_storeu_ps(p + i, pi);
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
  }
#endif
  for (; i < end; ++i) adamw_values(s, p[i], g[i], m[i], v[i]);
}

}  // namespace cnn::cpu::CNN_ISA
