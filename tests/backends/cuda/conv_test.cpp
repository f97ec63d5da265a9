// Convolution on cuDNN against the CPU backend: forward (with and without bias), backward-data
// (writing and accumulating) and backward-filter (accumulating into weights and bias gradients).
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>

#include "support.hpp"

#include "base/error.hpp"

using namespace cnn;
using namespace cnn::cuda_test;

namespace {

struct ConvCase {
  const char* name;
  int n, c, h, w, k, kh, kw, stride, pad;
};

const ConvCase kCases[] = {
    {"3x3 stride 1 padding 1, non-square image", 4, 3, 17, 13, 8, 3, 3, 1, 1},
    {"5x5 stride 2 padding 2", 3, 5, 16, 20, 6, 5, 5, 2, 2},
    {"1x1", 2, 16, 9, 9, 32, 1, 1, 1, 0},
    {"1x1 stride 2", 2, 8, 10, 10, 16, 1, 1, 2, 0},
    {"3x5 kernel padding 1", 2, 4, 12, 15, 5, 3, 5, 1, 1},
    {"7x7 stride 2 padding 3", 2, 3, 32, 32, 16, 7, 7, 2, 3},
    {"3x3 stride 2 no padding, odd sizes", 3, 7, 11, 9, 9, 3, 3, 2, 0},
    {"3x3 wide channels", 8, 64, 8, 8, 64, 3, 3, 1, 1},
};

Conv2dDesc desc_of(const ConvCase& c) {
  Conv2dDesc d;
  d.in_channels = c.c;
  d.out_channels = c.k;
  d.kernel_h = c.kh;
  d.kernel_w = c.kw;
  d.stride = c.stride;
  d.padding = c.pad;
  return d;
}

Shape input_shape(const ConvCase& c) { return {c.n, c.c, c.h, c.w}; }
Shape output_shape(const ConvCase& c) {
  return {c.n, c.k, (c.h + 2 * c.pad - c.kh) / c.stride + 1, (c.w + 2 * c.pad - c.kw) / c.stride + 1};
}
Shape weight_shape(const ConvCase& c) { return {c.k, c.c, c.kh, c.kw}; }

struct Workspaces {
  DeviceBuffer cpu_buffer, gpu_buffer;
  Workspace cpu() const { return {cpu_buffer.data(), cpu_buffer.bytes()}; }
  Workspace gpu() const { return {gpu_buffer.data(), gpu_buffer.bytes()}; }
};

Workspaces workspaces(Backend& gpu, const ConvCase& c, ConvPass pass, std::size_t limit) {
  const Conv2dDesc d = desc_of(c);
  const std::size_t cpu_bytes =
      cpu().conv2d_workspace_bytes(d, input_shape(c), output_shape(c), pass, std::numeric_limits<std::size_t>::max());
  const std::size_t gpu_bytes = gpu.conv2d_workspace_bytes(d, input_shape(c), output_shape(c), pass, limit);
  REQUIRE(gpu_bytes <= limit);
  return Workspaces{DeviceBuffer(cpu(), cpu_bytes), DeviceBuffer(gpu, gpu_bytes)};
}

void check_convolution(Backend& gpu, const ConvCase& c, double tolerance, std::size_t limit) {
  INFO(c.name);
  const Conv2dDesc d = desc_of(c);
  const Shape xs = input_shape(c), ys = output_shape(c), ws = weight_shape(c);
  Twin x(gpu, xs, 1), w(gpu, ws, 2), bias(gpu, Shape{c.k}, 3);

  {
    Workspaces forward = workspaces(gpu, c, ConvPass::forward, limit);
    Twin y(gpu, ys, 4);  // stale values that forward must overwrite
    cpu().conv2d_forward(d, x.cpu(), w.cpu(), bias.cpu(), y.cpu(), forward.cpu());
    gpu.conv2d_forward(d, x.gpu(), w.gpu(), bias.gpu(), y.gpu(), forward.gpu());
    CHECK(y.relative_error() <= tolerance);

    Twin y_no_bias(gpu, ys, 5);
    cpu().conv2d_forward(d, x.cpu(), w.cpu(), Tensor{}, y_no_bias.cpu(), forward.cpu());
    gpu.conv2d_forward(d, x.gpu(), w.gpu(), Tensor{}, y_no_bias.gpu(), forward.gpu());
    CHECK(y_no_bias.relative_error() <= tolerance);
  }

  Workspaces backward = workspaces(gpu, c, ConvPass::backward, limit);
  Twin dy(gpu, ys, 6);
  for (bool accumulate : {false, true}) {
    INFO("backward-data, accumulate " << accumulate);
    Twin dx(gpu, xs, 7);
    cpu().conv2d_backward_data(d, dy.cpu(), w.cpu(), dx.cpu(), accumulate, backward.cpu());
    gpu.conv2d_backward_data(d, dy.gpu(), w.gpu(), dx.gpu(), accumulate, backward.gpu());
    CHECK(dx.relative_error() <= tolerance);
  }
  {
    Twin dw(gpu, ws, 8), dbias(gpu, Shape{c.k}, 9);  // earlier micro-batches' gradients
    cpu().conv2d_backward_filter(d, x.cpu(), dy.cpu(), dw.cpu(), dbias.cpu(), backward.cpu());
    gpu.conv2d_backward_filter(d, x.gpu(), dy.gpu(), dw.gpu(), dbias.gpu(), backward.gpu());
    CHECK(dw.relative_error() <= tolerance);
    CHECK(dbias.relative_error() <= tolerance);

    Twin dw_no_bias(gpu, ws, 10);
    cpu().conv2d_backward_filter(d, x.cpu(), dy.cpu(), dw_no_bias.cpu(), Tensor{}, backward.cpu());
    gpu.conv2d_backward_filter(d, x.gpu(), dy.gpu(), dw_no_bias.gpu(), Tensor{}, backward.gpu());
    CHECK(dw_no_bias.relative_error() <= tolerance);
  }
}

constexpr std::size_t kLimit = std::size_t{256} << 20;

}  // namespace

TEST_CASE("cuda conv2d: measured algorithms match the CPU in fp32", "[cuda][conv]") {
  for (const ConvCase& c : kCases) check_convolution(gpu(), c, 1e-4, kLimit);
}

TEST_CASE("cuda conv2d: algorithms without workspace match the CPU", "[cuda][conv]") {
  for (const ConvCase& c : kCases) check_convolution(gpu(), c, 1e-4, 0);
}

TEST_CASE("cuda conv2d: heuristic algorithms (fast start) match the CPU", "[cuda][conv]") {
  for (const ConvCase& c : kCases) check_convolution(gpu_fast(), c, 1e-4, kLimit);
}

TEST_CASE("cuda conv2d: tf32 stays within 1e-2 of the CPU", "[cuda][conv][tf32]") {
  for (const ConvCase& c : kCases) check_convolution(gpu_tf32(), c, 1e-2, kLimit);
}

TEST_CASE("cuda conv2d: a workspace smaller than planned still gives the right result", "[cuda][conv]") {
  const ConvCase& c = kCases[1];
  const Conv2dDesc d = desc_of(c);
  Workspaces planned = workspaces(gpu(), c, ConvPass::forward, kLimit);
  Twin x(gpu(), input_shape(c), 11), w(gpu(), weight_shape(c), 12), y(gpu(), output_shape(c), 13);
  cpu().conv2d_forward(d, x.cpu(), w.cpu(), Tensor{}, y.cpu(), planned.cpu());
  gpu().conv2d_forward(d, x.gpu(), w.gpu(), Tensor{}, y.gpu(), Workspace{});
  CHECK(y.relative_error() <= 1e-4);
}

TEST_CASE("cuda conv2d: shapes that do not fit the convolution are refused", "[cuda][conv]") {
  const ConvCase& c = kCases[0];
  Shape wrong = output_shape(c);
  wrong[2] += 1;
  CHECK_THROWS_AS(gpu().conv2d_workspace_bytes(desc_of(c), input_shape(c), wrong, ConvPass::forward, kLimit),
                  ShapeError);
}
