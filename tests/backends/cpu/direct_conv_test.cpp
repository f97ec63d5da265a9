// The direct convolution (backends/cpu/detail/direct_conv.hpp): where it applies, forward,
// backward-data and backward-filter against the definition in double, at strides 1 and 2 (stride
// 2's backward-data in phases, dx rows no tap reaches among them; the ImageNet stem's 7x7 of 3 or
// 1 channels at stride 2, forward and backward-filter; 3x3 layers of a few channels at stride 1
// and 2, forward and backward-filter with vectors along the pixels; 1x1 layers), narrow layers of
// 16, 32 or 48 channels in and out among them, on maps whose tiles end short, padding 0 to 2, more
// input channels than one pass keeps in cache, one and two threads, writing and accumulating;
// forward and backward-data give the same bits on any thread count (backward-filter too where the
// threads split its outputs, and a batch of no images adds nothing), and every pass the same bits
// on AVX2's tiles as on AVX-512's (AVX2 hosts run the blocked ones alone); the workspace the
// backend asks for (NaN-filled) is the one each pass uses, whichever of the backward passes is
// direct; a row's tiles (the widest first, or AVX2's of even widths) cover it once. The
// pixel-vector kernels (pixel_conv.hpp) also alone, on the kernels and channels the gate does not
// send them.
#include "backends/cpu/detail/direct_conv.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cnnengine/engine/core/backend.hpp>
#include <cstddef>
#include <stdexcept>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/cpu_isa.hpp"
#include "backends/cpu/detail/direct_tiles.hpp"
#include "backends/cpu/detail/pixel_conv.hpp"
#include "tests/backends/cpu/conv_test_data.hpp"

using namespace cnn;

namespace {

struct DirectCase {
  int cin, h, w, cout, pad, stride;
  bool data, filter;  // backward-data and backward-filter take the direct passes
  int k = 3;          // the kernel's side
  bool forward = true;
  int hout() const { return (h + 2 * pad - k) / stride + 1; }
  int wout() const { return (w + 2 * pad - k) / stride + 1; }
};

// Each element's sum, and how far a float chain of its terms may stray from it: the terms'
// magnitudes times their count times fp32's unit roundoff (every partial sum rounds once).
struct Sums {
  std::vector<double> value, bound;
};

constexpr double kRoundoff = 1.0 / (1 << 24);

std::size_t at(int n, int c, int h, int w, int channels, int height, int width) {
  return ((static_cast<std::size_t>(n) * channels + c) * height + h) * width + w;
}

// Each element's terms of one pass before what it starts from (a bias, the values before): their
// sum (exact products, summed in double), magnitudes and count.
struct Terms {
  explicit Terms(std::size_t elements) : sum(elements), size(elements), count(elements) {}
  std::vector<double> sum, size, count;

  // The sums that start from base(i), one term more.
  template <class Base>
  Sums starting_from(Base base) const {
    Sums s{std::vector<double>(sum.size()), std::vector<double>(sum.size())};
    for (std::size_t i = 0; i < sum.size(); ++i) {
      const double first = base(i);
      s.value[i] = first + sum[i];
      s.bound[i] = (std::abs(first) + size[i]) * (count[i] + 1) * kRoundoff;
    }
    return s;
  }
};

// The definitions of the three passes: y = x convolved with w; dx and dw the derivatives of
// sum(y * dy) by x and by w, each output's terms added to the inputs and weights it read; dbias
// dy's sum per channel. One walk over every (output, tap) pair computes them all, each element's
// terms in the order of its own definition (the test programs may be unoptimised: the sanitizers').
struct Definition {
  Terms y, dx, dw, dbias;
};

Definition definition(const DirectCase& k, int n, const std::vector<float>& x, const std::vector<float>& w,
                      const std::vector<float>& dy) {
  const int ho = k.hout(), wo = k.wout();
  Definition d{Terms(dy.size()), Terms(x.size()), Terms(w.size()), Terms(static_cast<std::size_t>(k.cout))};
  for (int b = 0; b < n; ++b)
    for (int o = 0; o < k.cout; ++o)
      for (int oh = 0; oh < ho; ++oh)
        for (int ow = 0; ow < wo; ++ow) {
          const std::size_t out = at(b, o, oh, ow, k.cout, ho, wo);
          const double grad = dy[out];
          d.dbias.sum[o] += grad;
          d.dbias.size[o] += std::abs(grad);
          d.dbias.count[o] += 1;
          // The taps that land inside the image.
          const int top = oh * k.stride - k.pad, left = ow * k.stride - k.pad;
          const int i0 = std::max(0, -top), i1 = std::min(k.k, k.h - top);
          const int j0 = std::max(0, -left), j1 = std::min(k.k, k.w - left);
          double y_sum = 0, y_size = 0, y_count = 0;
          for (int c = 0; c < k.cin; ++c) {
            const std::size_t plane = at(b, c, 0, 0, k.cin, k.h, k.w), filter = at(o, c, 0, 0, k.cin, k.k, k.k);
            const float* xs = x.data() + plane;
            const float* ws = w.data() + filter;
            double* dx_sum = d.dx.sum.data() + plane;
            double* dx_size = d.dx.size.data() + plane;
            double* dx_count = d.dx.count.data() + plane;
            double* dw_sum = d.dw.sum.data() + filter;
            double* dw_size = d.dw.size.data() + filter;
            double* dw_count = d.dw.count.data() + filter;
            for (int i = i0; i < i1; ++i)
              for (int j = j0; j < j1; ++j) {
                const std::size_t in = static_cast<std::size_t>(top + i) * k.w + (left + j), tap = i * k.k + j;
                const double xv = xs[in], wv = ws[tap];
                const double y_term = xv * wv, dx_term = grad * wv, dw_term = grad * xv;
                y_sum += y_term;
                y_size += std::abs(y_term);
                y_count += 1;
                dx_sum[in] += dx_term;
                dx_size[in] += std::abs(dx_term);
                dx_count[in] += 1;
                dw_sum[tap] += dw_term;
                dw_size[tap] += std::abs(dw_term);
                dw_count[tap] += 1;
              }
          }
          d.y.sum[out] = y_sum;
          d.y.size[out] = y_size;
          d.y.count[out] = y_count;
        }
  return d;
}

// y's expected sums: from a bias per channel, or from y's values before.
Sums forward_sums(const DirectCase& k, const Definition& d, const std::vector<float>& bias,
                  const std::vector<float>& y_before, bool accumulate) {
  const std::size_t plane = static_cast<std::size_t>(k.hout()) * k.wout();
  if (accumulate) return d.y.starting_from([&](std::size_t i) { return double{y_before[i]}; });
  return d.y.starting_from([&](std::size_t i) { return double{bias[i / plane % static_cast<std::size_t>(k.cout)]}; });
}

// dw's and then dbias's expected sums in one vector, from dw_before and dbias_before (backward-filter adds).
Sums backward_filter_sums(const Definition& d, float dw_before, float dbias_before) {
  Sums s = d.dw.starting_from([&](std::size_t) { return double{dw_before}; });
  const Sums bias = d.dbias.starting_from([&](std::size_t) { return double{dbias_before}; });
  s.value.insert(s.value.end(), bias.value.begin(), bias.value.end());
  s.bound.insert(s.bound.end(), bias.bound.begin(), bias.bound.end());
  return s;
}

// Every element within its bound (NaN fails).
std::size_t wrong_elements(const std::vector<float>& got, const Sums& want) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) wrong += !(std::abs(got[i] - want.value[i]) <= want.bound[i] + 1e-6);
  return wrong;
}

}  // namespace

TEST_CASE("direct convolution: applies to 3x3 layers of many channels and to the stem where measured faster",
          "[cpu][conv]") {
  const Conv2dDesc same{64, 64, 3, 3, 1, 1};
  const auto applies = [](const Conv2dDesc& d, const Shape& x, cpu::DirectPass pass) {
    return cpu::direct_applies(d, x, false, pass);
  };
  // AVX2 hosts run the blocked tiles alone (cpu_direct_tiles_avx2.cpp), over at most 64 channels in
  // (dy's for backward-data), 1x1 backward-filter only, at stride 2 backward-data into a narrow dx
  // only.
  const auto avx2_applies = [&] {
    CHECK(applies(same, Shape{2, 64, 7, 7}, cpu::DirectPass::forward));
    CHECK(applies(same, Shape{2, 64, 7, 7}, cpu::DirectPass::backward_data));
    CHECK(applies(Conv2dDesc{64, 128, 3, 3, 2, 1}, Shape{2, 64, 56, 56}, cpu::DirectPass::forward));
    CHECK(applies(Conv2dDesc{16, 32, 3, 3, 2, 1}, Shape{2, 16, 28, 28}, cpu::DirectPass::backward_data));
    CHECK_FALSE(applies(Conv2dDesc{64, 64, 3, 3, 2, 1}, Shape{2, 64, 14, 14}, cpu::DirectPass::backward_data));
    CHECK_FALSE(applies(Conv2dDesc{128, 128, 3, 3, 1, 1}, Shape{2, 128, 7, 7}, cpu::DirectPass::forward));
    CHECK_FALSE(applies(Conv2dDesc{64, 128, 3, 3, 1, 1}, Shape{2, 64, 7, 7}, cpu::DirectPass::backward_data));
    CHECK_FALSE(applies(Conv2dDesc{64, 64, 1, 1, 1, 0}, Shape{2, 64, 7, 7}, cpu::DirectPass::forward));
    CHECK(applies(same, Shape{2, 64, 7, 7}, cpu::DirectPass::backward_filter));
    CHECK(applies(Conv2dDesc{64, 256, 1, 1, 1, 0}, Shape{2, 64, 56, 56}, cpu::DirectPass::backward_filter));
    CHECK_FALSE(applies(Conv2dDesc{128, 128, 3, 3, 1, 1}, Shape{2, 128, 7, 7}, cpu::DirectPass::backward_filter));
    CHECK_FALSE(applies(Conv2dDesc{3, 64, 7, 7, 2, 3}, Shape{2, 3, 224, 224}, cpu::DirectPass::forward));  // the stem
    CHECK_FALSE(applies(Conv2dDesc{1, 16, 3, 3, 1, 1}, Shape{2, 1, 28, 28}, cpu::DirectPass::forward));
  };
  if (cpu::isa() < cpu::CpuIsa::avx2) {
    CHECK_FALSE(applies(same, Shape{2, 64, 7, 7}, cpu::DirectPass::forward));
    WARN("this host has no AVX2: the direct convolution does not run here");
    return;
  }
  if (cpu::isa() < cpu::CpuIsa::avx512) {
    avx2_applies();
    WARN("this host has no AVX-512: the direct convolution's other passes do not run here");
    return;
  }
  CHECK(applies(same, Shape{2, 64, 7, 7}, cpu::DirectPass::forward));
  CHECK(applies(same, Shape{2, 64, 7, 7}, cpu::DirectPass::backward_data));
  CHECK(applies(same, Shape{2, 64, 7, 7}, cpu::DirectPass::backward_filter));
  CHECK(applies(same, Shape{2, 64, 3, 40}, cpu::DirectPass::backward_data));  // one side under 8
  CHECK(applies(same, Shape{2, 64, 14, 14}, cpu::DirectPass::forward));
  // Winograd's F(2x2) is faster there.
  CHECK_FALSE(applies(same, Shape{2, 64, 14, 14}, cpu::DirectPass::backward_data));
  CHECK_FALSE(applies(same, Shape{2, 64, 14, 14}, cpu::DirectPass::backward_filter));
  CHECK_FALSE(applies(same, Shape{2, 64, 16, 16}, cpu::DirectPass::forward));
  // Channels in multiples of 16, in and out.
  for (const auto pass : {cpu::DirectPass::forward, cpu::DirectPass::backward_data, cpu::DirectPass::backward_filter}) {
    CHECK(applies(Conv2dDesc{48, 64, 3, 3, 1, 1}, Shape{2, 48, 7, 7}, pass));
    CHECK(applies(Conv2dDesc{64, 96, 3, 3, 1, 1}, Shape{2, 64, 7, 7}, pass));
    CHECK_FALSE(applies(Conv2dDesc{40, 64, 3, 3, 1, 1}, Shape{2, 40, 7, 7}, pass));  // 40 in
    CHECK_FALSE(applies(Conv2dDesc{64, 40, 3, 3, 1, 1}, Shape{2, 64, 7, 7}, pass));  // 40 out
  }
  // Narrow layers (tiles of 16 or 32 outputs, or backward-filter's of 16 or 32 input channels):
  // every pass where Winograd does not take them (fewer than 32 channels), on any map; else where
  // their outputs are at most 14 a side, and backward up to 28.
  for (const auto pass : {cpu::DirectPass::forward, cpu::DirectPass::backward_data, cpu::DirectPass::backward_filter}) {
    CHECK(applies(Conv2dDesc{16, 16, 3, 3, 1, 1}, Shape{2, 16, 28, 28}, pass));
    CHECK(applies(Conv2dDesc{16, 32, 3, 3, 1, 1}, Shape{2, 16, 112, 112}, pass));
    CHECK(applies(Conv2dDesc{32, 32, 3, 3, 1, 1}, Shape{2, 32, 14, 14}, pass));
    CHECK_FALSE(applies(Conv2dDesc{32, 32, 3, 3, 1, 1}, Shape{2, 32, 32, 32}, pass));
  }
  CHECK_FALSE(applies(Conv2dDesc{32, 32, 3, 3, 1, 1}, Shape{2, 32, 28, 28}, cpu::DirectPass::forward));
  CHECK(applies(Conv2dDesc{32, 32, 3, 3, 1, 1}, Shape{2, 32, 28, 28}, cpu::DirectPass::backward_data));
  CHECK(applies(Conv2dDesc{32, 32, 3, 3, 1, 1}, Shape{2, 32, 28, 28}, cpu::DirectPass::backward_filter));
  CHECK(applies(Conv2dDesc{32, 64, 3, 3, 1, 1}, Shape{2, 32, 28, 28}, cpu::DirectPass::backward_data));  // dx narrow
  CHECK_FALSE(applies(Conv2dDesc{64, 64, 3, 3, 1, 1}, Shape{2, 64, 28, 28}, cpu::DirectPass::backward_data));
  // At stride 2, narrow backward-filter on any map.
  CHECK(applies(Conv2dDesc{16, 32, 3, 3, 2, 1}, Shape{2, 16, 112, 112}, cpu::DirectPass::backward_filter));
  CHECK(applies(Conv2dDesc{16, 32, 3, 3, 2, 1}, Shape{2, 16, 112, 112}, cpu::DirectPass::backward_data));  // in phases
  const Conv2dDesc halves{64, 64, 3, 3, 2, 1};
  CHECK(applies(halves, Shape{2, 64, 56, 56}, cpu::DirectPass::forward));
  CHECK(applies(halves, Shape{2, 64, 28, 28}, cpu::DirectPass::backward_filter));  // 14 x 14 outputs
  CHECK(applies(halves, Shape{2, 64, 224, 224}, cpu::DirectPass::backward_filter));  // 112 x 112
  CHECK(applies(halves, Shape{2, 64, 14, 14}, cpu::DirectPass::backward_data));
  CHECK(applies(halves, Shape{2, 64, 112, 112}, cpu::DirectPass::backward_data));
  CHECK_FALSE(applies(Conv2dDesc{32, 64, 3, 3, 2, 1}, Shape{2, 32, 14, 14}, cpu::DirectPass::backward_data));
  CHECK_FALSE(applies(Conv2dDesc{64, 64, 1, 1, 2, 0}, Shape{2, 64, 14, 14}, cpu::DirectPass::backward_data));
  CHECK_FALSE(applies(Conv2dDesc{64, 64, 3, 3, 3, 1}, Shape{2, 64, 7, 7}, cpu::DirectPass::forward));  // stride 3
  const Conv2dDesc stem{3, 64, 7, 7, 2, 3};
  CHECK(applies(stem, Shape{2, 3, 224, 224}, cpu::DirectPass::forward));
  CHECK_FALSE(applies(stem, Shape{2, 3, 224, 224}, cpu::DirectPass::backward_data));  // the image's gradient
  CHECK(applies(stem, Shape{2, 3, 224, 224}, cpu::DirectPass::backward_filter));
  CHECK_FALSE(applies(Conv2dDesc{16, 64, 7, 7, 2, 3}, Shape{2, 16, 56, 56}, cpu::DirectPass::forward));  // 16 in
  CHECK_FALSE(applies(Conv2dDesc{3, 64, 7, 7, 1, 3}, Shape{2, 3, 56, 56}, cpu::DirectPass::forward));    // stride 1
  CHECK_FALSE(applies(Conv2dDesc{3, 32, 7, 7, 2, 3}, Shape{2, 3, 56, 56}, cpu::DirectPass::forward));    // 32 out
  // A 3x3 convolution of a few channels at stride 1 or 2: forward and backward-filter (vectors along
  // the pixels).
  CHECK(applies(Conv2dDesc{1, 16, 3, 3, 1, 1}, Shape{2, 1, 28, 28}, cpu::DirectPass::backward_filter));
  CHECK(applies(Conv2dDesc{1, 16, 3, 3, 1, 1}, Shape{2, 1, 28, 28}, cpu::DirectPass::forward));
  CHECK(applies(Conv2dDesc{3, 64, 3, 3, 1, 1}, Shape{2, 3, 64, 64}, cpu::DirectPass::forward));
  CHECK(applies(Conv2dDesc{3, 32, 3, 3, 2, 1}, Shape{2, 3, 64, 64}, cpu::DirectPass::backward_filter));
  CHECK(applies(Conv2dDesc{3, 32, 3, 3, 2, 1}, Shape{2, 3, 64, 64}, cpu::DirectPass::forward));
  CHECK_FALSE(applies(Conv2dDesc{1, 16, 3, 3, 1, 1}, Shape{2, 1, 28, 28}, cpu::DirectPass::backward_data));
  CHECK_FALSE(applies(Conv2dDesc{1, 24, 3, 3, 1, 1}, Shape{2, 1, 28, 28}, cpu::DirectPass::backward_filter));
  // 1x1 convolutions: backward-filter on any map at stride 1 or 2, of input channels in multiples
  // of 32; forward, and backward-data at stride 1, where the outputs are under 8 a side.
  const Conv2dDesc pointwise{64, 256, 1, 1, 1, 0};
  CHECK(applies(pointwise, Shape{2, 64, 56, 56}, cpu::DirectPass::backward_filter));
  CHECK_FALSE(applies(pointwise, Shape{2, 64, 56, 56}, cpu::DirectPass::forward));
  CHECK_FALSE(applies(pointwise, Shape{2, 64, 56, 56}, cpu::DirectPass::backward_data));
  CHECK(applies(pointwise, Shape{2, 64, 7, 7}, cpu::DirectPass::forward));
  CHECK(applies(pointwise, Shape{2, 64, 7, 7}, cpu::DirectPass::backward_data));
  CHECK(applies(Conv2dDesc{32, 64, 1, 1, 2, 0}, Shape{2, 32, 14, 14}, cpu::DirectPass::forward));  // 7 x 7 outputs
  CHECK(applies(Conv2dDesc{256, 512, 1, 1, 2, 0}, Shape{2, 256, 56, 56}, cpu::DirectPass::backward_filter));
  CHECK_FALSE(applies(Conv2dDesc{256, 512, 1, 1, 2, 0}, Shape{2, 256, 56, 56}, cpu::DirectPass::forward));
  CHECK_FALSE(applies(Conv2dDesc{48, 64, 1, 1, 1, 0}, Shape{2, 48, 28, 28}, cpu::DirectPass::backward_filter));
  CHECK_FALSE(applies(Conv2dDesc{64, 64, 1, 1, 1, 1}, Shape{2, 64, 7, 7}, cpu::DirectPass::forward));  // 1x1 padded
  CHECK_FALSE(applies(Conv2dDesc{64, 40, 1, 1, 1, 0}, Shape{2, 64, 7, 7}, cpu::DirectPass::backward_filter));
  CHECK_FALSE(applies(Conv2dDesc{64, 64, 3, 3, 1, 3}, Shape{2, 64, 7, 7}, cpu::DirectPass::forward));    // padding 3
  CHECK_FALSE(applies(Conv2dDesc{64, 64, 3, 3, 1, 0}, Shape{2, 64, 2, 2}, cpu::DirectPass::forward));    // no output
  CHECK_FALSE(cpu::direct_applies(same, Shape{2, 64, 7, 7}, true, cpu::DirectPass::forward));  // 16-bit products
  {
    const cpu::DirectOff off;
    CHECK_FALSE(applies(same, Shape{2, 64, 7, 7}, cpu::DirectPass::forward));
  }
  {
    const cpu::IsaLimit limit(cpu::CpuIsa::avx2);
    avx2_applies();
  }
  {
    const cpu::IsaLimit limit(cpu::CpuIsa::portable);
    CHECK_FALSE(applies(same, Shape{2, 64, 7, 7}, cpu::DirectPass::forward));
  }
}

TEST_CASE(
    "direct convolution: its passes match the definition, forward and backward-data the same bits on any thread count, "
    "every pass the same bits on AVX2 as on AVX-512",
    "[cpu][conv]") {
  if (cpu::isa() < cpu::CpuIsa::avx2) {
    WARN("this host has no AVX2: the direct convolution does not run here");
    return;
  }
  if (cpu::isa() < cpu::CpuIsa::avx512) WARN("this host has no AVX-512: the direct convolution runs its AVX2 tiles alone");
  const DirectCase cases[] = {
      {64, 7, 7, 64, 1, 1, true, true},
      {128, 4, 4, 64, 1, 1, true, true},
      {64, 5, 9, 128, 0, 1, true, true},
      {64, 3, 20, 64, 1, 1, true, true},  // tiles of 7, 7 and 6 pixels
      {64, 1, 1, 64, 1, 1, true, true},
      {64, 2, 3, 64, 2, 1, true, true},
      {1024, 2, 2, 64, 1, 1, true, true},  // 64 blocks of channels: five passes over the map, each from the last's sums
      {64, 14, 14, 64, 1, 1, false, false},
      {64, 9, 11, 64, 1, 1, false, false},
      {64, 14, 14, 64, 1, 2, true, true},
      {64, 13, 9, 128, 1, 2, true, true},  // 7 x 7 and 7 x 5 outputs
      {64, 28, 28, 64, 1, 2, true, true},
      {64, 5, 5, 64, 2, 2, true, true},
      {64, 4, 4, 64, 0, 2, true, true},
      {64, 32, 30, 64, 1, 2, true, true},  // 16 x 15 outputs
      {64, 6, 6, 256, 1, 2, true, true},   // backward-data's phases over dy's 16 blocks in two passes
      {64, 1, 2, 64, 1, 2, true, true},    // a dx row of one pixel of each phase
      // Narrow layers: tiles of 16 or 32 outputs, of 28 and 14 pixels; backward-filter's vectors
      // along 16 or 32 input channels, the outputs cut into equal tiles.
      {16, 28, 28, 16, 1, 1, true, true},
      {16, 9, 30, 16, 1, 1, true, true},  // tiles of 28 and 2 pixels
      {32, 14, 14, 32, 1, 1, true, true},
      {32, 7, 15, 64, 1, 1, true, true},  // 64 out: backward-data's tiles narrow, 15 = 14 + 1 pixels
      {16, 10, 10, 48, 1, 1, true, true},
      {48, 7, 7, 96, 1, 1, true, true},  // 3 blocks in: backward-filter a vector at a time, groups of 8
      {32, 12, 12, 16, 2, 1, true, true},
      {16, 28, 28, 32, 1, 2, true, true},
      {32, 15, 17, 16, 0, 2, false, true},  // backward-data: narrow dx tiles on dy rows of 8 or fewer
      {16, 40, 38, 16, 1, 2, true, true},  // 20 x 19 outputs
      {32, 30, 28, 16, 1, 2, true, true},  // backward-data's phases in tiles of 14 x 32 channels
      {48, 18, 20, 64, 1, 2, true, true},
      // Input channels in blocks of 16 into 64 or 128.
      {32, 14, 14, 64, 1, 1, true, true},
      {16, 9, 11, 128, 0, 1, true, true},
      {48, 12, 12, 64, 1, 1, true, true},
      {32, 14, 14, 64, 1, 2, false, true},
      {96, 5, 13, 64, 2, 2, false, true},
      // The ImageNet stem, forward (vectors along the pixels) and backward-filter (along the outputs):
      // 3 channels (and grey) into 64 or 128, 7x7 at stride 2; output rows of 16, 7, 4, 1 and 18
      // pixels (whole 8 x 8 squares of dy turned, and the rest).
      {3, 32, 32, 64, 3, 2, false, true, 7},
      {1, 20, 13, 64, 3, 2, false, true, 7},
      {3, 7, 7, 128, 3, 2, false, true, 7},
      {3, 5, 6, 64, 1, 2, false, true, 7},
      {2, 37, 35, 64, 3, 2, false, true, 7},
      // 3x3 convolutions of a few channels at stride 1, forward and backward-filter with vectors
      // along the pixels: rows of 28 (runs of 16 and 12, a tile's three runs across rows), 11, 7,
      // 16, 17 and 1 pixels; tiles of taps 3 wide (9, 18 and 27 taps); padding 0 to 2.
      {1, 28, 28, 16, 1, 1, false, true},
      {1, 13, 11, 32, 1, 1, false, true},
      {2, 9, 7, 48, 0, 1, false, true},
      {3, 10, 16, 64, 1, 1, false, true},
      {3, 5, 17, 16, 1, 1, false, true},
      {3, 3, 3, 32, 0, 1, false, true},  // one output pixel
      {2, 4, 1, 16, 2, 1, false, true},
      // At stride 2: rows split into even and odd columns.
      {3, 20, 22, 64, 1, 2, false, true},
      {3, 6, 5, 32, 2, 2, false, true},
      // 1x1 convolutions: at stride 1 the map runs as one row (35 pixels: tiles of 28 and 7).
      {64, 7, 7, 64, 0, 1, true, true, 1},
      {16, 5, 7, 48, 0, 1, true, false, 1},
      {32, 12, 10, 64, 0, 1, false, true, 1, false},
      {32, 14, 13, 64, 0, 2, false, true, 1},
      {48, 9, 9, 16, 0, 2, false, false, 1},
      {96, 20, 18, 32, 0, 2, false, true, 1, false}};
  // The passes that take the direct kernels on an instruction set: AVX2 has the blocked tiles alone
  // (not the kernels for the few channels of an image: the stem's and pixel-vector ones), over at
  // most 64 channels in (dy's for backward-data), 1x1 backward-filter only, and at stride 2
  // backward-data into a narrow dx.
  struct Direct {
    bool forward, data, filter;
  };
  const auto direct_on = [](const DirectCase& k, cpu::CpuIsa isa) {
    if (isa >= cpu::CpuIsa::avx512) return Direct{k.forward, k.data, k.filter};
    return Direct{k.forward && k.k == 3 && k.cin >= 16 && k.cin <= 64,
                  k.data && k.k == 3 && k.cout <= 64 && (k.stride == 1 || k.cin % 64 != 0),
                  k.filter && k.cin >= 16 && k.cin <= 64};
  };
  for (const DirectCase& k : cases)
    for (int n : {1, 3, 9}) {  // 9: backward-filter's groups of 8 images, one short (on small maps: the time)
      if (n > 1 && k.h * k.w > 196) continue;  // large maps on one image: the definitions' time
      if (n == 9 && k.h * k.w > 64) continue;
      const Direct on_avx2 = direct_on(k, cpu::CpuIsa::avx2);
      if (cpu::isa() < cpu::CpuIsa::avx512 && !on_avx2.forward && !on_avx2.data && !on_avx2.filter)
        continue;  // no direct pass here
      const int ho = k.hout(), wo = k.wout();
      const Conv2dDesc d{k.cin, k.cout, k.k, k.k, k.stride, k.pad};
      const Shape xs{n, k.cin, k.h, k.w}, ys{n, k.cout, ho, wo}, ws_shape{k.cout, k.cin, k.k, k.k};
      std::vector<float> x = testing::pattern(xs.elements(), 1), w = testing::pattern(ws_shape.elements(), 2),
                         dy = testing::pattern(ys.elements(), 3), bias = testing::pattern(k.cout, 4);
      const Definition want = definition(k, n, x, w, dy);
      const Sums want_dw = backward_filter_sums(want, 0.5f, 0.25f);
      for (bool accumulate : {false, true}) {
        CAPTURE(k.cin, k.h, k.w, k.cout, k.k, k.pad, k.stride, n, accumulate);
        const std::vector<float> y_before =
            accumulate ? testing::pattern(ys.elements(), 5) : std::vector<float>(ys.elements(), 7.f);
        const std::vector<float> dx_before =
            accumulate ? testing::pattern(xs.elements(), 6) : std::vector<float>(xs.elements(), 7.f);
        const Sums want_y = forward_sums(k, want, bias, y_before, accumulate);
        const Sums want_dx =
            want.dx.starting_from([&](std::size_t i) { return accumulate ? double{dx_before[i]} : 0.0; });
        // Each instruction set's y and dx on 1 and 2 threads: AVX-512's first, where the host has it.
        std::vector<float> y_runs[2][2], dx_runs[2][2], dw_runs[2];
        bool forward_runs[2] = {false, false}, data_runs[2] = {false, false}, filter_runs[2] = {false, false};
        const cpu::CpuIsa isas[] = {cpu::CpuIsa::avx512, cpu::CpuIsa::avx2};
        for (int s = 0; s < 2; ++s) {
          if (isas[s] > cpu::isa()) continue;
          CAPTURE(cpu::isa_name(isas[s]));
          const cpu::IsaLimit limit(isas[s]);
          const auto [forward, data, filter] = direct_on(k, isas[s]);
          forward_runs[s] = forward;
          data_runs[s] = data;
          filter_runs[s] = filter;
          REQUIRE(cpu::direct_applies(d, xs, false, cpu::DirectPass::forward) == forward);
          REQUIRE(cpu::direct_applies(d, xs, false, cpu::DirectPass::backward_data) == data);
          REQUIRE(cpu::direct_applies(d, xs, false, cpu::DirectPass::backward_filter) == filter);
          if (isas[s] == cpu::CpuIsa::avx2 && !forward && !data && !filter) continue;  // no AVX2 tiles run
          for (int threads : {1, 2}) {
            CAPTURE(threads);
            CpuBackend backend(threads);
            std::vector<float>& y = y_runs[s][threads - 1];
            y = y_before;
            const testing::NanWorkspace forward_ws(backend.conv2d_workspace_bytes(d, xs, ys, ConvPass::forward, 0));
            backend.conv2d_forward(d, Tensor{x.data(), xs}, Tensor{w.data(), ws_shape},
                                   accumulate ? Tensor{} : Tensor{bias.data(), Shape{k.cout}}, Tensor{y.data(), ys},
                                   accumulate, forward_ws.ws);
            CHECK(wrong_elements(y, want_y) == 0);
            // The backward passes, direct or not, in the backward workspace the backend asks for.
            const testing::NanWorkspace backward_ws(backend.conv2d_workspace_bytes(d, xs, ys, ConvPass::backward, 0));
            std::vector<float>& dx = dx_runs[s][threads - 1];
            dx = dx_before;
            backend.conv2d_backward_data(d, Tensor{dy.data(), ys}, Tensor{w.data(), ws_shape}, Tensor{dx.data(), xs},
                                         accumulate, backward_ws.ws);
            CHECK(wrong_elements(dx, want_dx) == 0);
            // Backward-filter always adds: dw and dbias start at 0.5 and 0.25. One vector for both.
            std::vector<float> dw(ws_shape.elements(), 0.5f), dbias(static_cast<std::size_t>(k.cout), 0.25f);
            backend.conv2d_backward_filter(d, Tensor{x.data(), xs}, Tensor{dy.data(), ys},
                                           Tensor{dw.data(), ws_shape}, Tensor{dbias.data(), Shape{k.cout}},
                                           backward_ws.ws);
            dw.insert(dw.end(), dbias.begin(), dbias.end());
            CHECK(wrong_elements(dw, want_dw) == 0);
            if (threads == 1) dw_runs[s] = dw;
          }
          if (forward) CHECK(testing::same_bits(y_runs[s][0], y_runs[s][1]));
          if (data) CHECK(testing::same_bits(dx_runs[s][0], dx_runs[s][1]));
        }
        // AVX2's tiles sum each value in AVX-512's chain: the same bits.
        if (forward_runs[0] && forward_runs[1]) CHECK(testing::same_bits(y_runs[0][0], y_runs[1][0]));
        if (data_runs[0] && data_runs[1]) CHECK(testing::same_bits(dx_runs[0][0], dx_runs[1][0]));
        if (filter_runs[0] && filter_runs[1]) CHECK(testing::same_bits(dw_runs[0], dw_runs[1]));
      }
    }
}

TEST_CASE("direct convolution: a row's tiles cover it once, as wide as they go or of even widths", "[cpu][conv]") {
  for (const bool even : {false, true})
    for (std::size_t wide : {6u, 7u, 28u})
      for (std::size_t pixels = 1; pixels <= 100; ++pixels) {
        CAPTURE(even, wide, pixels);
        const cpu::direct::KernelRow<cpu::direct::TileKernel> row{nullptr, wide, even};
        std::size_t tiles = 0, narrowest = wide, widest = 0, at = 0;
        while (at < pixels) {
          const std::size_t width = row.width_at(at, pixels);
          REQUIRE(width >= 1);
          REQUIRE(width <= wide);
          narrowest = std::min(narrowest, width);
          widest = std::max(widest, width);
          at += width;
          ++tiles;
        }
        CHECK(at == pixels);
        CHECK(tiles == (pixels + wide - 1) / wide);  // as few tiles as the widest takes
        if (even) CHECK(widest - narrowest <= 1);
      }
}

TEST_CASE("direct convolution: backward-filter over many outputs gives the same bits on 1, 2 and 3 threads",
          "[cpu][conv]") {
  if (cpu::isa() < cpu::CpuIsa::avx2) {
    WARN("this host has no AVX2: the direct convolution does not run here");
    return;
  }
  // 64 -> 128 channels on 7 x 7 maps: the partial gradient outweighs an image and there are 19
  // tiles of outputs (22 on AVX2), so the threads split the outputs and each value sums every
  // image in order. 11 images: groups of 8 and 3, the blocked images shared by the threads.
  const Conv2dDesc d{64, 128, 3, 3, 1, 1};
  const Shape xs{11, 64, 7, 7}, ys{11, 128, 7, 7}, ws_shape{128, 64, 3, 3};
  std::vector<float> x = testing::pattern(xs.elements(), 1), dy = testing::pattern(ys.elements(), 3);
  for (cpu::CpuIsa isa : {cpu::CpuIsa::avx512, cpu::CpuIsa::avx2}) {
    if (isa > cpu::isa()) continue;
    CAPTURE(cpu::isa_name(isa));
    const cpu::IsaLimit limit(isa);
    REQUIRE(cpu::direct_applies(d, xs, false, cpu::DirectPass::backward_filter));
    std::vector<float> runs[3];
    for (int threads : {1, 2, 3}) {
      CAPTURE(threads);
      std::vector<float>& dw = runs[threads - 1];
      dw.assign(ws_shape.elements() + 128, 0.5f);
      const testing::NanWorkspace ws(
          cpu::direct_workspace_floats(d, xs, ys, cpu::DirectPass::backward_filter, threads) * sizeof(float));
      cpu::direct_backward_filter(threads, d, Tensor{x.data(), xs}, Tensor{dy.data(), ys},
                                  Tensor{dw.data(), ws_shape}, Tensor{dw.data() + ws_shape.elements(), Shape{128}},
                                  ws.ws);
    }
    CHECK(testing::same_bits(runs[0], runs[1]));
    CHECK(testing::same_bits(runs[0], runs[2]));
    // A batch of no images adds nothing.
    const Shape none_x{0, 64, 7, 7}, none_y{0, 128, 7, 7};
    std::vector<float> dw(ws_shape.elements() + 128, 0.5f);
    const testing::NanWorkspace ws(
        cpu::direct_workspace_floats(d, none_x, none_y, cpu::DirectPass::backward_filter, 2) * sizeof(float));
    cpu::direct_backward_filter(2, d, Tensor{x.data(), none_x}, Tensor{dy.data(), none_y},
                                Tensor{dw.data(), ws_shape}, Tensor{dw.data() + ws_shape.elements(), Shape{128}},
                                ws.ws);
    CHECK(testing::same_bits(dw, std::vector<float>(dw.size(), 0.5f)));
  }
}

TEST_CASE("direct convolution: a workspace smaller than it asks for is refused", "[cpu][conv]") {
  if (cpu::isa() < cpu::CpuIsa::avx2) {
    WARN("this host has no AVX2: the direct convolution does not run here");
    return;
  }
  const Conv2dDesc d{64, 64, 3, 3, 1, 1};
  const Shape xs{2, 64, 7, 7}, ws_shape{64, 64, 3, 3};
  std::vector<float> x = testing::pattern(xs.elements(), 1), w = testing::pattern(ws_shape.elements(), 2);
  std::vector<float> y(xs.elements());
  const std::size_t bytes = cpu::direct_workspace_floats(d, xs, xs, cpu::DirectPass::forward, 2) * sizeof(float);
  const testing::NanWorkspace short_ws(bytes - sizeof(float));
  CHECK_THROWS_AS(cpu::direct_forward(2, d, Tensor{x.data(), xs}, Tensor{w.data(), ws_shape}, Tensor{},
                                      Tensor{y.data(), xs}, false, short_ws.ws),
                  std::logic_error);
  const cpu::DirectOff off;  // a call where the pass does not apply is refused, not run
  const testing::NanWorkspace ws(bytes);
  CHECK_THROWS_AS(cpu::direct_forward(2, d, Tensor{x.data(), xs}, Tensor{w.data(), ws_shape}, Tensor{},
                                      Tensor{y.data(), xs}, false, ws.ws),
                  std::logic_error);
}

TEST_CASE(
    "pixel-vector convolution: any kernel to 7 at stride 1 or 2, 1 to 15 channels, outputs in eights, against the "
    "definition",
    "[cpu][conv]") {
  if (cpu::isa() < cpu::CpuIsa::avx512) {
    WARN("this host has no AVX-512: the pixel-vector convolution does not run here");
    return;
  }
  const DirectCase cases[] = {
      {1, 9, 21, 8, 0, 1, false, true, 1},    // 1x1: one tap
      {2, 12, 19, 24, 2, 1, false, true, 5},  // 50 taps: tiles of 3 and 2
      {3, 11, 9, 8, 3, 1, false, true, 7},    // 147 taps
      {15, 6, 33, 16, 1, 1, false, true},     // 135 taps; rows of 33: runs of 16, 16 and 1
      {4, 1, 40, 8, 0, 1, false, true, 1},    // one row
      {1, 16, 600, 16, 1, 1, false, true},    // backward-filter's dy in chunks of 13 and 3 rows
      // Stride 2: rows split into even and odd columns, at even and odd padding.
      {3, 15, 17, 16, 1, 2, false, true},
      {3, 34, 70, 8, 0, 2, false, true},  // rows of 70 split 32 at a time; 35 outputs: runs of 16, 16, 3
      {1, 20, 40, 8, 2, 2, false, true, 5},
      {2, 9, 9, 8, 3, 2, false, true, 7},
      {3, 4, 5, 24, 0, 2, false, true, 1}};
  for (const DirectCase& k : cases)
    for (int n : {1, 3}) {
      const Conv2dDesc d{k.cin, k.cout, k.k, k.k, k.stride, k.pad};
      const Shape xs{n, k.cin, k.h, k.w}, ys{n, k.cout, k.hout(), k.wout()}, ws_shape{k.cout, k.cin, k.k, k.k};
      std::vector<float> x = testing::pattern(xs.elements(), 1), w = testing::pattern(ws_shape.elements(), 2),
                         dy = testing::pattern(ys.elements(), 3), bias = testing::pattern(k.cout, 4);
      const Definition want = definition(k, n, x, w, dy);
      const Sums want_dw = backward_filter_sums(want, 0.5f, 0.25f);
      for (bool accumulate : {false, true}) {
        CAPTURE(k.cin, k.h, k.w, k.cout, k.k, k.pad, k.stride, n, accumulate);
        REQUIRE(cpu::pixel_conv_takes(d, xs));
        const std::vector<float> y_before =
            accumulate ? testing::pattern(ys.elements(), 5) : std::vector<float>(ys.elements(), 7.f);
        const Sums want_y = forward_sums(k, want, bias, y_before, accumulate);
        for (int threads : {1, 2}) {
          CAPTURE(threads);
          std::vector<float> y = y_before;
          const testing::NanWorkspace forward_ws(cpu::pixel_forward_workspace_floats(d, xs, threads) * sizeof(float));
          cpu::pixel_forward(threads, d, Tensor{x.data(), xs}, Tensor{w.data(), ws_shape},
                             accumulate ? Tensor{} : Tensor{bias.data(), Shape{k.cout}}, Tensor{y.data(), ys},
                             accumulate, forward_ws.ws);
          CHECK(wrong_elements(y, want_y) == 0);
          std::vector<float> dw(ws_shape.elements(), 0.5f), dbias(static_cast<std::size_t>(k.cout), 0.25f);
          const testing::NanWorkspace filter_ws(cpu::pixel_filter_workspace_floats(d, xs, threads) * sizeof(float));
          cpu::pixel_backward_filter(threads, d, Tensor{x.data(), xs}, Tensor{dy.data(), ys},
                                     Tensor{dw.data(), ws_shape}, Tensor{dbias.data(), Shape{k.cout}}, filter_ws.ws);
          dw.insert(dw.end(), dbias.begin(), dbias.end());
          CHECK(wrong_elements(dw, want_dw) == 0);
        }
      }
    }
}

TEST_CASE("pixel-vector convolution: what it does not take is refused, and a short workspace", "[cpu][conv]") {
  const Shape xs{2, 3, 8, 8};
  CHECK(cpu::pixel_conv_takes(Conv2dDesc{3, 16, 3, 3, 1, 1}, xs));
  CHECK(cpu::pixel_conv_takes(Conv2dDesc{3, 16, 3, 3, 2, 1}, xs));
  CHECK_FALSE(cpu::pixel_conv_takes(Conv2dDesc{3, 16, 3, 3, 3, 1}, xs));   // stride 3
  CHECK_FALSE(cpu::pixel_conv_takes(Conv2dDesc{3, 12, 3, 3, 1, 1}, xs));   // 12 outputs
  CHECK_FALSE(cpu::pixel_conv_takes(Conv2dDesc{3, 16, 3, 3, 1, 3}, xs));   // padding past the kernel
  CHECK_FALSE(cpu::pixel_conv_takes(Conv2dDesc{3, 16, 9, 9, 1, 4}, xs));   // a 9x9 kernel
  CHECK_FALSE(cpu::pixel_conv_takes(Conv2dDesc{3, 16, 3, 3, 1, 0}, Shape{2, 3, 2, 8}));  // no output row
  CHECK_FALSE(cpu::pixel_conv_takes(Conv2dDesc{16, 16, 3, 3, 1, 1}, Shape{2, 16, 8, 8}));  // 16 channels
  Conv2dDesc grouped{3, 24, 3, 3, 1, 1};
  grouped.groups = 3;
  CHECK_FALSE(cpu::pixel_conv_takes(grouped, xs));
  if (cpu::isa() < cpu::CpuIsa::avx512) return;
  const Conv2dDesc d{3, 16, 3, 3, 1, 1};
  const Shape ys{2, 16, 8, 8}, ws_shape{16, 3, 3, 3};
  std::vector<float> x = testing::pattern(xs.elements(), 1), w = testing::pattern(ws_shape.elements(), 2);
  std::vector<float> y(ys.elements()), dw(ws_shape.elements());
  const std::size_t forward_bytes = cpu::pixel_forward_workspace_floats(d, xs, 2) * sizeof(float);
  const testing::NanWorkspace short_forward(forward_bytes - sizeof(float));
  CHECK_THROWS_AS(cpu::pixel_forward(2, d, Tensor{x.data(), xs}, Tensor{w.data(), ws_shape}, Tensor{},
                                     Tensor{y.data(), ys}, false, short_forward.ws),
                  std::logic_error);
  const testing::NanWorkspace short_filter(cpu::pixel_filter_workspace_floats(d, xs, 2) * sizeof(float) - sizeof(float));
  CHECK_THROWS_AS(cpu::pixel_backward_filter(2, d, Tensor{x.data(), xs}, Tensor{y.data(), ys},
                                             Tensor{dw.data(), ws_shape}, Tensor{}, short_filter.ws),
                  std::logic_error);
  const Conv2dDesc strided{3, 16, 3, 3, 3, 1};
  const testing::NanWorkspace ws(forward_bytes);
  CHECK_THROWS_AS(cpu::pixel_forward(2, strided, Tensor{x.data(), xs}, Tensor{w.data(), ws_shape}, Tensor{},
                                     Tensor{y.data(), Shape{2, 16, 3, 3}}, false, ws.ws),
                  std::logic_error);
}
