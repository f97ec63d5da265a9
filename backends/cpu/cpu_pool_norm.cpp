// Pooling and batch normalisation: loops over (image, channel) planes or channels, in parallel.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/batchnorm_channel.hpp"
#include "backends/cpu/detail/cpu_isa.hpp"
#include "backends/cpu/detail/parallel.hpp"

namespace cnn {
namespace {

struct Window {
  int h0, h1, w0, w1;  // clipped to the input
};

Window window_at(const Pool2dDesc& d, int oh, int ow, int h, int w) {
  const int hs = oh * d.stride_h - d.pad_h, ws = ow * d.stride_w - d.pad_w;
  return {std::max(hs, 0), std::min(hs + d.window_h, h), std::max(ws, 0), std::min(ws + d.window_w, w)};
}

// Max pooling 2x2, stride 2, no padding: the networks' common case, without the general loop's
// window clipping and mode tests, over the windows that lie whole inside the input (ceil mode's
// last row and column of windows, clipped, take the general path). Ties go to the first element in row-major order, as in the
// general path. A NaN in a window may propagate here where the general path skips it: a tree of
// maxima vectorises, a chain from -inf costs 15% of a whole training step (measured); NaN
// activations mean the training has already diverged.
bool is_max_2x2(const Pool2dDesc& d) {
  return d.mode == PoolMode::max && d.window_h == 2 && d.window_w == 2 && d.stride_h == 2 && d.stride_w == 2 &&
         d.pad_h == 0 && d.pad_w == 0;
}

// The first `rows` x `cols` windows; the output's rows are `wo` apart.
void max_2x2_forward_plane(const float* in, float* out, int w, int rows, int cols, int wo) {
  for (int oh = 0; oh < rows; ++oh) {
    const float* r0 = in + static_cast<std::size_t>(2 * oh) * w;
    const float* r1 = r0 + w;
    float* o = out + static_cast<std::size_t>(oh) * wo;
    for (int ow = 0; ow < cols; ++ow)
      o[ow] = std::max(std::max(r0[2 * ow], r0[2 * ow + 1]), std::max(r1[2 * ow], r1[2 * ow + 1]));
  }
}

// Eight floats: one AVX register (two SSE registers without AVX). GCC's vector extensions (Clang
// has them too: the fuzzers build this file with it), so that one code serves every instruction set.
// Never across a library boundary, so the calling convention GCC warns of (-Wpsabi) does not matter.
#pragma GCC diagnostic ignored "-Wpsabi"
using Floats8 = float __attribute__((vector_size(32)));
using Ints8 = std::int32_t __attribute__((vector_size(32)));

// Always inlined, so that each build of the backward pass below has them in its instructions.
[[gnu::always_inline]] inline Floats8 load8(const float* p) {
  Floats8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
[[gnu::always_inline]] inline void store8(float* p, Floats8 v) { std::memcpy(p, &v, sizeof v); }

// Four adjacent windows of one row pair at once: the same selection and arithmetic as the scalar
// loop below (the first of the four equal to the maximum, in row-major order, gets g x 1.0f, the
// others g x 0.0f), on eight lanes. A lane's window partner is its neighbour (lanes 2k, 2k + 1).
[[gnu::always_inline]] inline void max_2x2_backward_4(const float* r0, const float* r1, const float* m, const float* g, float* g0, float* g1,
                        bool accumulate) {
  const Floats8 max_up = {m[0], m[0], m[1], m[1], m[2], m[2], m[3], m[3]};
  const Floats8 grad_up = {g[0], g[0], g[1], g[1], g[2], g[2], g[3], g[3]};
  const Ints8 odd = {0, -1, 0, -1, 0, -1, 0, -1};
  const Ints8 eq0 = load8(r0) == max_up, eq1 = load8(r1) == max_up;
  // Each lane's partner, lanes swapped in pairs (GCC 12 and Clang both have __builtin_shufflevector).
  const Ints8 eq0_partner = __builtin_shufflevector(eq0, eq0, 1, 0, 3, 2, 5, 4, 7, 6);
  const Ints8 eq1_partner = __builtin_shufflevector(eq1, eq1, 1, 0, 3, 2, 5, 4, 7, 6);
  const Ints8 pick0 = eq0 & ~(eq0_partner & odd);                        // e0 (even lanes), e1 (odd)
  const Ints8 pick1 = eq1 & ~(eq0 | eq0_partner) & ~(eq1_partner & odd);  // e2, e3
  const Floats8 one = {1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f};
  const Floats8 v0 = grad_up * reinterpret_cast<Floats8>(pick0 & reinterpret_cast<Ints8>(one));
  const Floats8 v1 = grad_up * reinterpret_cast<Floats8>(pick1 & reinterpret_cast<Ints8>(one));
  store8(g0, accumulate ? load8(g0) + v0 : v0);
  store8(g1, accumulate ? load8(g1) + v1 : v1);
}

// Output row oh of a plane's 2x2 windows: its two input rows, their maxima and gradients, and the
// two rows of the input's gradient; the output's rows are `wo` apart.
struct WindowRow {
  const float *r0, *r1, *m, *g;
  float *g0, *g1;
};
[[gnu::always_inline]] inline WindowRow window_row(const float* in, const float* out, const float* grad_out,
                                                   float* grad_in, int w, int wo, int oh) {
  const std::size_t top = static_cast<std::size_t>(2 * oh) * w, row = static_cast<std::size_t>(oh) * wo;
  return {in + top, in + top + w, out + row, grad_out + row, grad_in + top, grad_in + top + w};
}

// Writes every input position of each window (the gradient or zero) unless accumulating, so the
// plane needs no clearing first. Branch-free: which element is the first equal to the window's
// maximum is data, and branching on it mispredicts half the time. Four windows at a time, the
// rest of a row one by one. The first `rows` x `cols` windows; the output's rows are `wo` apart.
[[gnu::always_inline]] inline void max_2x2_backward_rows(const float* in, const float* out, const float* grad_out,
                                                         float* grad_in, int w, int rows, int cols, int wo,
                                                         bool accumulate) {
  for (int oh = 0; oh < rows; ++oh) {
    const auto [r0, r1, m, g, g0, g1] = window_row(in, out, grad_out, grad_in, w, wo, oh);
    int ow = 0;
    for (; ow + 4 <= cols; ow += 4)
      max_2x2_backward_4(r0 + 2 * ow, r1 + 2 * ow, m + ow, g + ow, g0 + 2 * ow, g1 + 2 * ow, accumulate);
    for (; ow < cols; ++ow) {
      const int j = 2 * ow;
      // Bitwise operators, not && and ?:, which compilers turn back into branches.
      const unsigned e0 = r0[j] == m[ow];
      const unsigned e1 = (r0[j + 1] == m[ow]) & (e0 ^ 1u);
      const unsigned e2 = (r1[j] == m[ow]) & ((e0 | e1) ^ 1u);
      const unsigned e3 = (r1[j + 1] == m[ow]) & ((e0 | e1 | e2) ^ 1u);  // none equal: no route
      const float v0 = g[ow] * static_cast<float>(e0), v1 = g[ow] * static_cast<float>(e1),
                  v2 = g[ow] * static_cast<float>(e2), v3 = g[ow] * static_cast<float>(e3);
      if (accumulate) {
        g0[j] += v0;
        g0[j + 1] += v1;
        g1[j] += v2;
        g1[j + 1] += v3;
      } else {
        g0[j] = v0;
        g0[j + 1] = v1;
        g1[j] = v2;
        g1[j + 1] = v3;
      }
    }
  }
}

// The x86-64 baseline has no shuffle of eight lanes, and its build of the loop above ran three times
// slower: an AVX2 host runs it with AVX2's (the same bits: only exact products and one add).
CNN_TARGET_AVX2 void max_2x2_backward_plane_avx2(const float* in, const float* out, const float* grad_out,
                                                 float* grad_in, int w, int rows, int cols, int wo, bool accumulate) {
  max_2x2_backward_rows(in, out, grad_out, grad_in, w, rows, cols, wo, accumulate);
}

// Eight windows at a time in AVX-512 registers, the row's last few under masks: the selection
// and arithmetic of max_2x2_backward_4 (the same bits), with the comparisons' masks for lanes. A
// 14- or 7-window row (28 x 28 and 14 x 14 inputs) took the AVX2 loop's scalar tail for a third
// of its windows or more.
CNN_TARGET_AVX512 void max_2x2_backward_plane_avx512(const float* in, const float* out, const float* grad_out,
                                                     float* grad_in, int w, int rows, int cols, int wo,
                                                     bool accumulate) {
  const __m512i spread =
      _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);  // window k to lanes 2k, 2k + 1
  const __m512 one = _mm512_set1_ps(1.f);
  constexpr unsigned odd = 0xAAAAu;
  auto partner = [](unsigned lanes) { return ((lanes >> 1) & 0x5555u) | ((lanes << 1) & odd); };  // pairs swapped
  for (int oh = 0; oh < rows; ++oh) {
    const auto [r0, r1, m, g, g0, g1] = window_row(in, out, grad_out, grad_in, w, wo, oh);
    for (int ow = 0; ow < cols; ow += 8) {
      const int windows = std::min(8, cols - ow);
      const auto some = static_cast<__mmask8>((1u << windows) - 1);
      const auto lanes = static_cast<__mmask16>((1u << (2 * windows)) - 1);
      const __m512 max_up = _mm512_permutexvar_ps(spread, _mm512_castps256_ps512(_mm256_maskz_loadu_ps(some, m + ow)));
      const __m512 grad_up = _mm512_permutexvar_ps(spread, _mm512_castps256_ps512(_mm256_maskz_loadu_ps(some, g + ow)));
      const unsigned eq0 =
          _mm512_mask_cmp_ps_mask(lanes, _mm512_maskz_loadu_ps(lanes, r0 + 2 * ow), max_up, _CMP_EQ_OQ);
      const unsigned eq1 =
          _mm512_mask_cmp_ps_mask(lanes, _mm512_maskz_loadu_ps(lanes, r1 + 2 * ow), max_up, _CMP_EQ_OQ);
      const auto pick0 = static_cast<__mmask16>(eq0 & ~(partner(eq0) & odd));                          // e0, e1
      const auto pick1 = static_cast<__mmask16>(eq1 & ~(eq0 | partner(eq0)) & ~(partner(eq1) & odd));  // e2, e3
      const __m512 v0 = _mm512_mul_ps(grad_up, _mm512_maskz_mov_ps(pick0, one));
      const __m512 v1 = _mm512_mul_ps(grad_up, _mm512_maskz_mov_ps(pick1, one));
      float* to0 = g0 + 2 * ow;
      float* to1 = g1 + 2 * ow;
      _mm512_mask_storeu_ps(to0, lanes, accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, to0), v0) : v0);
      _mm512_mask_storeu_ps(to1, lanes, accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, to1), v1) : v1);
    }
  }
}

void max_2x2_backward_plane(const float* in, const float* out, const float* grad_out, float* grad_in, int w, int rows,
                            int cols, int wo, bool accumulate) {
  if (cpu::isa() >= cpu::CpuIsa::avx512)
    return max_2x2_backward_plane_avx512(in, out, grad_out, grad_in, w, rows, cols, wo, accumulate);
  if (cpu::isa() >= cpu::CpuIsa::avx2)
    return max_2x2_backward_plane_avx2(in, out, grad_out, grad_in, w, rows, cols, wo, accumulate);
  max_2x2_backward_rows(in, out, grad_out, grad_in, w, rows, cols, wo, accumulate);
}

// One window of the general path: its maximum or its average over the part inside the input.
float pool_window(const Pool2dDesc& d, const float* in, int h, int w, int oh, int ow) {
  const Window win = window_at(d, oh, ow, h, w);
  float acc = d.mode == PoolMode::max ? -std::numeric_limits<float>::infinity() : 0.f;
  for (int i = win.h0; i < win.h1; ++i)
    for (int j = win.w0; j < win.w1; ++j) {
      const float v = in[i * w + j];
      acc = d.mode == PoolMode::max ? std::max(acc, v) : acc + v;
    }
  if (d.mode == PoolMode::average) acc /= static_cast<float>((win.h1 - win.h0) * (win.w1 - win.w0));
  return acc;
}

// One window's gradient added to grad_in: to the first input equal to the maximum, or shared.
void pool_window_backward(const Pool2dDesc& d, const float* in, float m, float g, float* grad_in, int h, int w,
                          int oh, int ow) {
  const Window win = window_at(d, oh, ow, h, w);
  if (d.mode == PoolMode::max) {
    for (int i = win.h0; i < win.h1; ++i)
      for (int j = win.w0; j < win.w1; ++j)
        if (in[i * w + j] == m) {
          grad_in[i * w + j] += g;
          return;
        }
    return;
  }
  const float share = g / static_cast<float>((win.h1 - win.h0) * (win.w1 - win.w0));
  for (int i = win.h0; i < win.h1; ++i)
    for (int j = win.w0; j < win.w1; ++j) grad_in[i * w + j] += share;
}

// Note [Max pooling 3x3 at stride 2]: the ResNets' stem pools 3x3 windows at stride 2 (padded by
// 1 in torchvision's), over the largest activation of the network. The windows that lie whole
// inside the input run with the window's shape fixed; the rest, along the border, by the general
// path, in the same order. A maximum is the general path's chain from -inf in row-major order and
// the backward pass adds each window's gradient to its first element equal to the maximum, window
// after window, so both give the general path's bits (NaNs skipped alike), branch-free inside.
bool is_max_3x3_stride_2(const Pool2dDesc& d) {
  return d.mode == PoolMode::max && d.window_h == 3 && d.window_w == 3 && d.stride_h == 2 && d.stride_w == 2;
}

// The windows [first, last) along a side of `size` inputs, padded by `pad`, whose 3 inputs all lie
// inside it, out of `out` windows.
struct WholeWindows {
  int first = 0, last = 0;
  bool contains(int o) const { return o >= first && o < last; }
};
WholeWindows whole_windows(int size, int pad, int out) {
  WholeWindows span;
  if (size + pad < 3) return span;
  span.first = std::min(out, (pad + 1) / 2);         // 2 o - pad >= 0
  span.last = std::min(out, (size + pad - 3) / 2 + 1);  // 2 o - pad + 3 <= size
  span.last = std::max(span.last, span.first);
  return span;
}

// Where a 3x3 window's 9 inputs lie in a plane `w` wide, in row-major order, from its top-left one.
struct Taps3x3 {
  std::ptrdiff_t at[9];
  explicit Taps3x3(int w) {
    for (int k = 0; k < 9; ++k) at[k] = static_cast<std::ptrdiff_t>(k / 3) * w + k % 3;
  }
};

float max_3x3(const float* corner, const Taps3x3& taps) {
  float m = -std::numeric_limits<float>::infinity();
  for (int k = 0; k < 9; ++k) m = std::max(m, corner[taps.at[k]]);
  return m;
}

void max_3x3_stride_2_forward_plane(const Pool2dDesc& d, const float* in, float* out, int h, int w, int ho, int wo) {
  const WholeWindows rows = whole_windows(h, d.pad_h, ho), cols = whole_windows(w, d.pad_w, wo);
  const Taps3x3 taps(w);
  for (int oh = 0; oh < ho; ++oh) {
    float* o = out + static_cast<std::size_t>(oh) * wo;
    if (!rows.contains(oh)) {
      for (int ow = 0; ow < wo; ++ow) o[ow] = pool_window(d, in, h, w, oh, ow);
      continue;
    }
    const float* top = in + static_cast<std::ptrdiff_t>(2 * oh - d.pad_h) * w;  // the windows' first row
    for (int ow = 0; ow < cols.first; ++ow) o[ow] = pool_window(d, in, h, w, oh, ow);
    for (int ow = cols.first; ow < cols.last; ++ow) o[ow] = max_3x3(top + (2 * ow - d.pad_w), taps);
    for (int ow = cols.last; ow < wo; ++ow) o[ow] = pool_window(d, in, h, w, oh, ow);
  }
}

// Adds each window's gradient to grad_in, which holds zeros or what is accumulated onto.
void max_3x3_stride_2_backward_plane(const Pool2dDesc& d, const float* in, const float* out, const float* grad_out,
                                     float* grad_in, int h, int w, int ho, int wo) {
  const WholeWindows rows = whole_windows(h, d.pad_h, ho), cols = whole_windows(w, d.pad_w, wo);
  const Taps3x3 taps(w);
  for (int oh = 0; oh < ho; ++oh)
    for (int ow = 0; ow < wo; ++ow) {
      const std::size_t o = static_cast<std::size_t>(oh) * wo + static_cast<std::size_t>(ow);
      if (!rows.contains(oh) || !cols.contains(ow)) {
        pool_window_backward(d, in, out[o], grad_out[o], grad_in, h, w, oh, ow);
        continue;
      }
      const std::ptrdiff_t corner = static_cast<std::ptrdiff_t>(2 * oh - d.pad_h) * w + (2 * ow - d.pad_w);
      // Which taps equal the maximum, as bits (a chain of selects compiles to branches that
      // mispredict: which tap holds the maximum is data); none where every input is NaN: no route.
      unsigned equal = 1u << 9;
      for (int k = 0; k < 9; ++k) equal |= static_cast<unsigned>(in[corner + taps.at[k]] == out[o]) << k;
      const int first = std::countr_zero(equal);
      if (first < 9) grad_in[corner + taps.at[first]] += grad_out[o];
    }
}

}  // namespace

void CpuBackend::do_pool2d_forward(const Pool2dDesc& d, const Tensor& x, Tensor y) {
  const int h = x.h(), w = x.w(), ho = y.h(), wo = y.w();
  const std::size_t planes = static_cast<std::size_t>(x.n()) * x.c();
  if (is_max_2x2(d)) {
    const int rows = std::min(ho, h / 2), cols = std::min(wo, w / 2);  // whole windows
    cpu::parallel_ranges(threads_, planes, [&](int, std::size_t b, std::size_t e) {
      for (std::size_t p = b; p < e; ++p) {
        const float* in = x.data + p * h * w;
        float* out = y.data + p * ho * wo;
        max_2x2_forward_plane(in, out, w, rows, cols, wo);
        for (int oh = 0; oh < ho; ++oh)
          for (int ow = oh < rows ? cols : 0; ow < wo; ++ow) out[oh * wo + ow] = pool_window(d, in, h, w, oh, ow);
      }
    });
    return;
  }
  if (is_max_3x3_stride_2(d)) {
    cpu::parallel_ranges(threads_, planes, [&](int, std::size_t b, std::size_t e) {
      for (std::size_t p = b; p < e; ++p)
        max_3x3_stride_2_forward_plane(d, x.data + p * h * w, y.data + p * ho * wo, h, w, ho, wo);
    });
    return;
  }
  cpu::parallel_ranges(threads_, planes, [&](int, std::size_t b, std::size_t e) {
    for (std::size_t p = b; p < e; ++p) {
      const float* in = x.data + p * h * w;
      float* out = y.data + p * ho * wo;
      for (int oh = 0; oh < ho; ++oh)
        for (int ow = 0; ow < wo; ++ow) out[oh * wo + ow] = pool_window(d, in, h, w, oh, ow);
    }
  });
}

void CpuBackend::do_pool2d_backward(const Pool2dDesc& d, const Tensor& x, const Tensor& y, const Tensor& dy,
                                    Tensor dx, bool accumulate) {
  const int h = x.h(), w = x.w(), ho = y.h(), wo = y.w();
  const std::size_t planes = static_cast<std::size_t>(x.n()) * x.c();
  cpu::parallel_ranges(threads_, planes, [&](int, std::size_t b, std::size_t e) {
    for (std::size_t p = b; p < e; ++p) {
      const float* in = x.data + p * h * w;
      const float* out = y.data + p * ho * wo;
      const float* grad_out = dy.data + p * ho * wo;
      float* grad_in = dx.data + p * h * w;
      if (is_max_2x2(d) && h == 2 * ho && w == 2 * wo) {  // windows tile the plane exactly
        max_2x2_backward_plane(in, out, grad_out, grad_in, w, ho, wo, wo, accumulate);
        continue;
      }
      if (!accumulate) std::memset(grad_in, 0, sizeof(float) * static_cast<std::size_t>(h) * w);
      if (is_max_3x3_stride_2(d)) {
        max_3x3_stride_2_backward_plane(d, in, out, grad_out, grad_in, h, w, ho, wo);
        continue;
      }
      // The windows that lie whole inside the input by the fast path (2x2), the rest one by one.
      const int rows = is_max_2x2(d) ? std::min(ho, h / 2) : 0, cols = is_max_2x2(d) ? std::min(wo, w / 2) : 0;
      if (rows > 0 && cols > 0) max_2x2_backward_plane(in, out, grad_out, grad_in, w, rows, cols, wo, true);
      for (int oh = 0; oh < ho; ++oh)
        for (int ow = oh < rows ? cols : 0; ow < wo; ++ow)
          pool_window_backward(d, in, out[oh * wo + ow], grad_out[oh * wo + ow], grad_in, h, w, oh, ow);
    }
  });
}

void CpuBackend::do_batchnorm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                           Tensor y, Tensor running_mean, Tensor running_var,
                                           float momentum, float epsilon, Tensor saved_mean,
                                           Tensor saved_inv_std) {
  batchnorm_training(x, gamma, beta, y, running_mean, running_var, momentum, epsilon, saved_mean, saved_inv_std, false);
}

// Note [BatchNorm and ReLU in one pass] (step_plan.cpp): the ReLU in the normalising pass forward,
// and its mask in the passes that read dy backward; the same bits as the two calls.
void CpuBackend::do_batchnorm_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                                Tensor running_mean, Tensor running_var, float momentum,
                                                float epsilon, Tensor saved_mean, Tensor saved_inv_std) {
  batchnorm_training(x, gamma, beta, y, running_mean, running_var, momentum, epsilon, saved_mean, saved_inv_std, true);
}

// Note [BatchNorm, add and ReLU in one pass] (step_plan.cpp): the add and the ReLU in the
// normalising pass forward; backward, the ReLU's mask and the residual's gradient in the pass that
// writes dx. The same bits as the three calls.
void CpuBackend::do_batchnorm_add_relu_forward_training(const Tensor& x, const Tensor& residual, const Tensor& gamma,
                                                        const Tensor& beta, Tensor y, Tensor running_mean,
                                                        Tensor running_var, float momentum, float epsilon,
                                                        Tensor saved_mean, Tensor saved_inv_std) {
  batchnorm_training(x, gamma, beta, y, running_mean, running_var, momentum, epsilon, saved_mean, saved_inv_std, true,
                     &residual);
}

void CpuBackend::batchnorm_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                    Tensor running_mean, Tensor running_var, float momentum, float epsilon,
                                    Tensor saved_mean, Tensor saved_inv_std, bool relu, const Tensor* residual) {
  const double count = static_cast<double>(x.n()) * x.h() * x.w();
  const cpu::BatchNormChannel b{x, gamma, beta, y, running_mean, running_var, saved_mean, saved_inv_std,
                                momentum, epsilon, relu, residual};
  cpu::parallel_ranges(threads_, static_cast<std::size_t>(x.c()), [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t ch = begin; ch < end; ++ch) {
      const cpu::ChannelMoments m = cpu::channel_moments(x, ch, count);
      cpu::finish_channel(b, ch, m.mean, m.var, count);
    }
  });
}

void CpuBackend::do_batchnorm_forward_saved(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                        const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor y) {
  cpu::parallel_ranges(threads_, static_cast<std::size_t>(x.c()), [&](int, std::size_t b, std::size_t e) {
    for (std::size_t ch = b; ch < e; ++ch)
      cpu::normalise_channel(x, gamma.data[ch], beta.data[ch], saved_mean.data[ch], saved_inv_std.data[ch], ch, y, false);
  });
}

void CpuBackend::do_batchnorm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                            const Tensor& running_mean, const Tensor& running_var,
                                            float epsilon, Tensor y) {
  const int n = x.n(), c = x.c();
  const std::size_t hw = static_cast<std::size_t>(x.h()) * x.w();
  cpu::parallel_ranges(threads_, static_cast<std::size_t>(n) * c, [&](int, std::size_t b, std::size_t e) {
    for (std::size_t plane = b; plane < e; ++plane) {
      const std::size_t ch = plane % static_cast<std::size_t>(c);
      const float scale = gamma.data[ch] / std::sqrt(running_var.data[ch] + epsilon);
      const float shift = beta.data[ch] - running_mean.data[ch] * scale;
      const float* in = x.data + plane * hw;
      float* out = y.data + plane * hw;
      for (std::size_t k = 0; k < hw; ++k) out[k] = in[k] * scale + shift;
    }
  });
}

// epsilon is in saved_inv_std already.
void CpuBackend::do_batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                   const Tensor& saved_mean, const Tensor& saved_inv_std, float /*epsilon*/,
                                   Tensor dx, Tensor dgamma, Tensor dbeta, bool accumulate) {
  batchnorm_gradient(x, dy, nullptr, gamma, saved_mean, saved_inv_std, dx, dgamma, dbeta, accumulate);
}

void CpuBackend::do_batchnorm_relu_backward(const Tensor& x, const Tensor& y, Tensor dy, const Tensor& gamma,
                                        const Tensor& saved_mean, const Tensor& saved_inv_std, float /*epsilon*/,
                                        Tensor dx, Tensor dgamma, Tensor dbeta, bool accumulate) {
  batchnorm_gradient(x, dy, &y, gamma, saved_mean, saved_inv_std, dx, dgamma, dbeta, accumulate);
}

void CpuBackend::do_batchnorm_add_relu_backward(const Tensor& x, const Tensor& y, Tensor dy, const Tensor& gamma,
                                                const Tensor& saved_mean, const Tensor& saved_inv_std,
                                                float /*epsilon*/, Tensor dx, Tensor dgamma, Tensor dbeta,
                                                bool accumulate, Tensor dresidual, bool accumulate_residual) {
  batchnorm_gradient(x, dy, &y, gamma, saved_mean, saved_inv_std, dx, dgamma, dbeta, accumulate,
                     dresidual.empty() ? nullptr : &dresidual, accumulate_residual);
}

void CpuBackend::batchnorm_gradient(const Tensor& x, const Tensor& dy, const Tensor* relu_output, const Tensor& gamma,
                                    const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor dx, Tensor dgamma,
                                    Tensor dbeta, bool accumulate, Tensor* residual_gradient,
                                    bool accumulate_residual) {
  const double count = static_cast<double>(x.n()) * x.h() * x.w();
  const cpu::BatchNormGradient g{x, dy, gamma, saved_mean, saved_inv_std, dx, accumulate, relu_output,
                                 residual_gradient, accumulate_residual};
  cpu::parallel_ranges(threads_, static_cast<std::size_t>(x.c()), [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t ch = begin; ch < end; ++ch) {
      const cpu::ChannelGradientSums s =
          cpu::gradient_sums(x, dy, ch, saved_mean.data[ch], saved_inv_std.data[ch], relu_output);
      dgamma.data[ch] += static_cast<float>(s.dy_xhat);
      dbeta.data[ch] += static_cast<float>(s.dy);
      cpu::input_gradient(g, ch, s.dy, s.dy_xhat, count);
    }
  });
}

}  // namespace cnn
