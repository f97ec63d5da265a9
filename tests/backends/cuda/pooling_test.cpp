// Pooling against the CPU backend, including ties (max pooling routes the gradient to the first
// maximum), windows that padding or the image edge cut, ceil mode's last windows clipped to the
// input, and global max pooling; in bf16 and fp16 on values as a step stores them.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "support.hpp"

using namespace cnn;
using namespace cnn::cuda_test;

namespace {

struct PoolCase {
  const char* name;
  Pool2dDesc desc;
  int n, c, h, w;
  bool ceil = false;  // PyTorch's ceil_mode: the output size rounds up
};

Pool2dDesc pool(PoolMode mode, int wh, int ww, int sh, int sw, int ph, int pw) {
  Pool2dDesc d;
  d.mode = mode;
  d.window_h = wh;
  d.window_w = ww;
  d.stride_h = sh;
  d.stride_w = sw;
  d.pad_h = ph;
  d.pad_w = pw;
  return d;
}

const PoolCase kCases[] = {
    {"max 2x2 stride 2", pool(PoolMode::max, 2, 2, 2, 2, 0, 0), 3, 4, 12, 10},
    {"max 2x2 stride 2, odd size", pool(PoolMode::max, 2, 2, 2, 2, 0, 0), 2, 3, 11, 9},
    {"max 3x3 stride 2 padding 1 (overlapping)", pool(PoolMode::max, 3, 3, 2, 2, 1, 1), 2, 5, 13, 16},
    {"max 3x2 stride (2, 1)", pool(PoolMode::max, 3, 2, 2, 1, 0, 0), 2, 2, 9, 7},
    {"average 2x2 stride 2", pool(PoolMode::average, 2, 2, 2, 2, 0, 0), 3, 4, 12, 10},
    {"average 3x3 stride 1 padding 1", pool(PoolMode::average, 3, 3, 1, 1, 1, 1), 2, 3, 8, 11},
    {"average 3x3 stride 2 padding 1", pool(PoolMode::average, 3, 3, 2, 2, 1, 1), 2, 3, 9, 9},
    {"max 2x2 stride 2, ceil", pool(PoolMode::max, 2, 2, 2, 2, 0, 0), 2, 3, 11, 19, true},
    {"max 3x3 stride 2 padding 1, ceil", pool(PoolMode::max, 3, 3, 2, 2, 1, 1), 2, 3, 10, 12, true},
    {"average 2x2 stride 2, ceil", pool(PoolMode::average, 2, 2, 2, 2, 0, 0), 2, 3, 11, 9, true},
    {"average 3x3 stride 2 padding 1, ceil", pool(PoolMode::average, 3, 3, 2, 2, 1, 1), 2, 3, 10, 13, true},
    {"global max", pool(PoolMode::max, 9, 13, 9, 13, 0, 0), 3, 5, 9, 13},
};

// PyTorch's pooling_output_shape.
int pooled(int in, int window, int stride, int pad, bool ceil) {
  int out = (in + 2 * pad - window + (ceil ? stride - 1 : 0)) / stride + 1;
  if (ceil && (out - 1) * stride >= in + pad) --out;
  return out;
}

Shape output_shape(const PoolCase& c) {
  const Pool2dDesc& d = c.desc;
  return {c.n, c.c, pooled(c.h, d.window_h, d.stride_h, d.pad_h, c.ceil),
          pooled(c.w, d.window_w, d.stride_w, d.pad_w, c.ceil)};
}

void check_pool(const PoolCase& c, const std::vector<float>& input) {
  INFO(c.name);
  const Shape xs{c.n, c.c, c.h, c.w}, ys = output_shape(c);
  Twin x(gpu(), xs, input), y(gpu(), ys, 31);
  cpu().pool2d_forward(c.desc, x.cpu(), y.cpu());
  gpu().pool2d_forward(c.desc, x.gpu(), y.gpu());
  CHECK(y.relative_error() <= 1e-6);

  Twin dy(gpu(), ys, 32);
  for (bool accumulate : {false, true}) {
    INFO("accumulate " << accumulate);
    Twin dx(gpu(), xs, 33);
    cpu().pool2d_backward(c.desc, x.cpu(), y.cpu(), dy.cpu(), dx.cpu(), accumulate);
    gpu().pool2d_backward(c.desc, x.gpu(), y.gpu(), dy.gpu(), dx.gpu(), accumulate);
    CHECK(dx.relative_error() <= 1e-6);
  }
}

}  // namespace

TEST_CASE("cuda pooling matches the CPU on random values", "[cuda][pool]") {
  for (const PoolCase& c : kCases) {
    const std::size_t n = static_cast<std::size_t>(c.n) * c.c * c.h * c.w;
    check_pool(c, random_values(n, 34));
  }
}

TEST_CASE("cuda max pooling routes ties to the first maximum as the CPU does", "[cuda][pool]") {
  for (const PoolCase& c : kCases) {
    const std::size_t n = static_cast<std::size_t>(c.n) * c.c * c.h * c.w;
    std::vector<float> values = random_values(n, 35, 0.0f, 3.0f);
    for (float& v : values) v = std::floor(v) + 1.0f;  // 1, 2 or 3: many equal maxima
    check_pool(c, values);
  }
}

// A recomputed input (BatchNorm from saved statistics) rounds unlike the forward that made y:
// each gradient must still reach the window's maximum of the x given, which no element of it
// need equal y at.
TEST_CASE("cuda max pooling finds each window's maximum from x, not from y", "[cuda][pool]") {
  for (const PoolCase& c : kCases) {
    if (c.desc.mode != PoolMode::max) continue;
    INFO(c.name);
    const Shape xs{c.n, c.c, c.h, c.w}, ys = output_shape(c);
    const std::vector<float> values = random_values(xs.elements(), 36);
    std::vector<float> rounded = values;
    for (float& v : rounded) v = std::nextafter(v, 2.0f);  // one unit in the last place up
    Twin x(gpu(), xs, values), x_recomputed(gpu(), xs, rounded), y(gpu(), ys, 37), dy(gpu(), ys, 38);
    cpu().pool2d_forward(c.desc, x.cpu(), y.cpu());
    gpu().pool2d_forward(c.desc, x.gpu(), y.gpu());
    Twin dx(gpu(), xs, 39);
    cpu().pool2d_backward(c.desc, x.cpu(), y.cpu(), dy.cpu(), dx.cpu(), false);
    gpu().pool2d_backward(c.desc, x_recomputed.gpu(), y.gpu(), dy.gpu(), dx.gpu(), false);
    CHECK(dx.relative_error() <= 1e-6);
  }
}

TEST_CASE("cuda pooling takes and writes values as a 16-bit step stores them", "[cuda][pool][bf16]") {
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    Backend& gpu = gpu_16bit(p);
    const ValueFormat format = value_format(p);
    for (const PoolCase& c : kCases) {
      INFO(c.name << ", " << to_string(p));
      const Shape xs{c.n, c.c, c.h, c.w}, ys = output_shape(c);
      Twin x(gpu, xs, rounded16(p, random_values(xs.elements(), 41))), y(gpu, ys, 42);
      const Stored16 x16 = stored16(gpu, x.gpu());
      Stored16 y16 = stored16(gpu, y.gpu());
      cpu().pool2d_forward(c.desc, x.cpu(), y.cpu());
      gpu.pool2d_forward(c.desc, x16.alone, y16.alone);
      // A maximum is one of the 16-bit inputs: the same bits. An average is the CPU's float
      // average rounded, within half a unit in the last place (at most 2^-8 of the largest value
      // in bf16, 2^-11 in fp16).
      const std::vector<std::uint16_t> bits = bits_on_host(gpu, y16);
      std::vector<float> written(bits.size());
      cpu().from_16bit(bits.data(), Tensor{written.data(), Shape{static_cast<int>(written.size())}}, format);
      CHECK(relative_error(written, y.cpu_values()) <= (c.desc.mode == PoolMode::max ? 0.0 : p == Precision::bf16 ? 4.5e-3 : 6e-4));

      Twin dy(gpu, ys, 43);
      for (bool accumulate : {false, true}) {
        INFO("accumulate " << accumulate);
        Twin dx(gpu, xs, 44);
        cpu().pool2d_backward(c.desc, x.cpu(), y.cpu(), dy.cpu(), dx.cpu(), accumulate);
        gpu.pool2d_backward(c.desc, x16.alone, y16.alone, dy.gpu(), dx.gpu(), accumulate);
        CHECK(dx.relative_error() <= 1e-6);
      }
    }
  }
}
