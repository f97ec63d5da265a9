// Convolution on cuDNN against the CPU backend: forward (with and without bias, writing and
// accumulating), backward-data (writing and accumulating), backward-filter (accumulating into
// weights and bias gradients) and both backward passes in one call, plain, grouped, dilated and depthwise (the CPU's own depthwise
// kernels), in fp32, tf32, bf16 and fp16; the transposed convolution layer, made of those calls and
// the channel bias, on both backends.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "support.hpp"

#include <cnnengine/base/error.hpp>
#include "layers/conv_transpose2d.hpp"

using namespace cnn;
using namespace cnn::cuda_test;

namespace {

struct ConvCase {
  const char* name;
  int n, c, h, w, k, kh, kw, stride, pad;
  int dilation = 1, groups = 1;
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
    {"3x3 groups 4", 4, 16, 12, 11, 8, 3, 3, 1, 1, 1, 4},
    {"3x3 groups 2 stride 2", 3, 6, 13, 14, 10, 3, 3, 2, 1, 1, 2},
    {"1x1 groups 4", 2, 8, 7, 9, 12, 1, 1, 1, 0, 1, 4},
    {"3x3 dilation 2 padding 2", 3, 5, 15, 13, 7, 3, 3, 1, 2, 2, 1},
    {"5x5 dilation 3 stride 2, groups 3", 2, 6, 25, 22, 9, 5, 5, 2, 4, 3, 3},
    {"depthwise 3x3", 4, 32, 28, 28, 32, 3, 3, 1, 1, 1, 32},
    {"depthwise 3x3 stride 2", 4, 24, 15, 17, 24, 3, 3, 2, 1, 1, 24},
    {"depthwise 5x5 stride 2 padding 2", 2, 16, 14, 14, 16, 5, 5, 2, 2, 1, 16},
    {"depthwise 3x3 dilation 2", 2, 8, 11, 10, 8, 3, 3, 1, 2, 2, 8},
};

Conv2dDesc desc_of(const ConvCase& c) {
  Conv2dDesc d;
  d.in_channels = c.c;
  d.out_channels = c.k;
  d.kernel_h = c.kh;
  d.kernel_w = c.kw;
  d.stride = c.stride;
  d.padding = c.pad;
  d.dilation = c.dilation;
  d.groups = c.groups;
  return d;
}

Shape input_shape(const ConvCase& c) { return {c.n, c.c, c.h, c.w}; }
Shape output_shape(const ConvCase& c) {
  return {c.n, c.k, (c.h + 2 * c.pad - c.dilation * (c.kh - 1) - 1) / c.stride + 1,
          (c.w + 2 * c.pad - c.dilation * (c.kw - 1) - 1) / c.stride + 1};
}
Shape weight_shape(const ConvCase& c) { return {c.k, c.c / c.groups, c.kh, c.kw}; }

struct Workspaces {
  DeviceBuffer cpu_buffer, gpu_buffer;
  Workspace cpu() const { return {cpu_buffer.data(), cpu_buffer.bytes()}; }
  Workspace gpu() const { return {gpu_buffer.data(), gpu_buffer.bytes()}; }
};

Shape in_order(Shape s, bool channels_last) {
  s.channels_last = channels_last;
  return s;
}

Workspaces workspaces(Backend& gpu, const ConvCase& c, ConvPass pass, std::size_t limit, bool channels_last = false) {
  const Conv2dDesc d = desc_of(c);
  const std::size_t cpu_bytes =
      cpu().conv2d_workspace_bytes(d, input_shape(c), output_shape(c), pass, std::numeric_limits<std::size_t>::max());
  const std::size_t gpu_bytes = gpu.conv2d_workspace_bytes(d, in_order(input_shape(c), channels_last),
                                                           in_order(output_shape(c), channels_last), pass, limit);
  REQUIRE(gpu_bytes <= limit);
  return Workspaces{DeviceBuffer(cpu(), cpu_bytes), DeviceBuffer(gpu, gpu_bytes)};
}

// A convolution's x and w, rounded to `gpu`'s 16-bit format first where it has one so that both
// sides multiply the same numbers, and its bias.
struct ConvOperands {
  Twin x, w, bias;
};
ConvOperands conv_operands(Backend& gpu, const ConvCase& c, bool channels_last = false) {
  const Precision p = gpu.precision();
  return {Twin(gpu, input_shape(c), rounded16(p, random_values(input_shape(c).elements(), 1)), channels_last),
          Twin(gpu, weight_shape(c), rounded16(p, random_values(weight_shape(c).elements(), 2))),
          Twin(gpu, Shape{c.k}, 3)};
}

// `gpu` against the fp32 CPU backend. The operands (x, w, dy) are rounded to `gpu`'s 16-bit
// format first where it has one; what a call adds to is not. Where `channels_last`, the GPU's
// images (x, y, dy, dx) are (Note [Channels-last images]); the weights never are.
void check_convolution(Backend& gpu, const ConvCase& c, double tolerance, std::size_t limit,
                       bool channels_last = false) {
  INFO(c.name << ", " << to_string(gpu.precision()) << (channels_last ? ", channels last" : ""));
  const Conv2dDesc d = desc_of(c);
  const Shape xs = input_shape(c), ys = output_shape(c), ws = weight_shape(c);
  const Precision p = gpu.precision();
  const bool cl = channels_last;
  const ConvOperands operands = conv_operands(gpu, c, cl);
  const Twin &x = operands.x, &w = operands.w, &bias = operands.bias;

  {
    Workspaces forward = workspaces(gpu, c, ConvPass::forward, limit, cl);
    Twin y(gpu, ys, 4, cl);  // stale values that forward must overwrite
    cpu().conv2d_forward(d, x.cpu(), w.cpu(), bias.cpu(), y.cpu(), false, forward.cpu());
    gpu.conv2d_forward(d, x.gpu(), w.gpu(), bias.gpu(), y.gpu(), false, forward.gpu());
    CHECK(y.relative_error() <= tolerance);

    Twin y_no_bias(gpu, ys, 5, cl);
    cpu().conv2d_forward(d, x.cpu(), w.cpu(), Tensor{}, y_no_bias.cpu(), false, forward.cpu());
    gpu.conv2d_forward(d, x.gpu(), w.gpu(), Tensor{}, y_no_bias.gpu(), false, forward.gpu());
    CHECK(y_no_bias.relative_error() <= tolerance);

    for (bool with_bias : {false, true}) {
      INFO("forward, accumulating, bias " << with_bias);
      Twin y_added(gpu, ys, 14, cl);  // what forward adds to
      cpu().conv2d_forward(d, x.cpu(), w.cpu(), with_bias ? bias.cpu() : Tensor{}, y_added.cpu(), true, forward.cpu());
      gpu.conv2d_forward(d, x.gpu(), w.gpu(), with_bias ? bias.gpu() : Tensor{}, y_added.gpu(), true, forward.gpu());
      CHECK(y_added.relative_error() <= tolerance);
    }
  }

  Workspaces backward = workspaces(gpu, c, ConvPass::backward, limit, cl);
  Twin dy(gpu, ys, rounded16(p, random_values(ys.elements(), 6)), cl);
  for (bool accumulate : {false, true}) {
    INFO("backward-data, accumulate " << accumulate);
    Twin dx(gpu, xs, 7, cl);
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
  // Both passes in one call (in bf16 and fp16 the data pass takes the weight pass's 16-bit dy).
  for (bool accumulate : {false, true}) {
    INFO("both passes in one call, accumulate " << accumulate);
    Twin dx(gpu, xs, 16, cl), dw(gpu, ws, 17), dbias(gpu, Shape{c.k}, 18);
    cpu().conv2d_backward(d, x.cpu(), dy.cpu(), w.cpu(), dw.cpu(), dbias.cpu(), dx.cpu(), accumulate, backward.cpu());
    gpu.conv2d_backward(d, x.gpu(), dy.gpu(), w.gpu(), dw.gpu(), dbias.gpu(), dx.gpu(), accumulate, backward.gpu());
    CHECK(dx.relative_error() <= tolerance);
    CHECK(dw.relative_error() <= tolerance);
    CHECK(dbias.relative_error() <= tolerance);
  }
  {
    INFO("both passes in one call, no input gradient (a network's first layer)");
    Twin dw(gpu, ws, 19);
    cpu().conv2d_backward(d, x.cpu(), dy.cpu(), w.cpu(), dw.cpu(), Tensor{}, Tensor{}, false, backward.cpu());
    gpu.conv2d_backward(d, x.gpu(), dy.gpu(), w.gpu(), dw.gpu(), Tensor{}, Tensor{}, false, backward.gpu());
    CHECK(dw.relative_error() <= tolerance);
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

// Note [16-bit products on CUDA]: with the operands already 16-bit numbers, every product is exact
// in float and cuDNN sums them in float, as the CPU does; its result is then rounded to 16 bits, by
// at most half a unit in the last place: 2^-8 of a value in bfloat16, 2^-11 in half. The
// tolerances leave room over those for the order of the sums.
TEST_CASE("cuda conv2d in bf16 and fp16: float sums of 16-bit products, rounded to 16 bits", "[cuda][conv][bf16]") {
  for (const ConvCase& c : kCases) {
    check_convolution(gpu_16bit(Precision::bf16), c, 1e-2, kLimit);
    check_convolution(gpu_16bit(Precision::fp16), c, 2e-3, kLimit);
  }
}

// The same convolutions on channels-last images (Note [Channels-last images]): cuDNN's NHWC
// descriptors, the filter's 16-bit copy in its NHWC order and the weight gradient put back in
// the engine's (Note [Filters in channels-last order]); refused in fp32, whose filter has no
// 16-bit copy to reorder.
TEST_CASE("cuda conv2d in bf16 and fp16 on channels-last images matches the CPU's NCHW", "[cuda][conv][bf16]") {
  for (const ConvCase& c : kCases) {
    check_convolution(gpu_channels_last(Precision::bf16), c, 1e-2, kLimit, true);
    check_convolution(gpu_channels_last(Precision::fp16), c, 2e-3, kLimit, true);
  }
  const ConvCase& c = kCases[0];
  CHECK_FALSE(gpu().takes_channels_last());
  CHECK_FALSE(gpu_16bit(Precision::bf16).takes_channels_last());  // CudaOptions::channels_last is off by default
  CHECK(gpu_channels_last(Precision::bf16).takes_channels_last());
  CHECK_THROWS_WITH(gpu().conv2d_workspace_bytes(desc_of(c), in_order(input_shape(c), true),
                                                 in_order(output_shape(c), true), ConvPass::forward, kLimit),
                    Catch::Contains("conv2d_workspace_bytes") && Catch::Contains("takes images in NCHW order only"));
}

TEST_CASE("cuda conv2d in bf16: one sample's workspace runs a batch in halves, an empty one is refused",
          "[cuda][conv][bf16]") {
  Backend& gpu = gpu_16bit(Precision::bf16);
  const ConvCase& c = kCases[1];
  const Conv2dDesc d = desc_of(c);
  Shape x1 = input_shape(c), y1 = output_shape(c);
  x1[0] = y1[0] = 1;
  const DeviceBuffer single(gpu, gpu.conv2d_workspace_bytes(d, x1, y1, ConvPass::forward, 0));
  Workspaces planned = workspaces(gpu, c, ConvPass::forward, kLimit);
  const Precision p = Precision::bf16;
  Twin x(gpu, input_shape(c), rounded16(p, random_values(input_shape(c).elements(), 11)));
  Twin w(gpu, weight_shape(c), rounded16(p, random_values(weight_shape(c).elements(), 12)));
  Twin y(gpu, output_shape(c), 13);
  cpu().conv2d_forward(d, x.cpu(), w.cpu(), Tensor{}, y.cpu(), false, planned.cpu());
  gpu.conv2d_forward(d, x.gpu(), w.gpu(), Tensor{}, y.gpu(), false, Workspace{single.data(), single.bytes()});
  CHECK(y.relative_error() <= 1e-2);
  CHECK_THROWS_WITH(gpu.conv2d_forward(d, x.gpu(), w.gpu(), Tensor{}, y.gpu(), false, Workspace{}),
                    Catch::Contains("conv2d_forward") && Catch::Contains("bf16 copies"));
}

namespace {

// A 16-bit output against the CPU's float one: the 16-bit rounding is within the tolerances.
double packed_error(Backend& gpu, const Twin& reference, const Stored16& stored) {
  const std::vector<float> want = reference.cpu_values();
  const std::size_t n = want.size();
  const std::vector<std::uint16_t> packed = bits_on_host(gpu, stored);
  std::vector<float> got(n);
  cpu().from_16bit(packed.data(), Tensor{got.data(), Shape{static_cast<int>(n)}}, value_format(gpu.precision()));
  return relative_error(got, want);
}

// The calls as a step makes them on a plan that stores values in 16 bits (Note [Values as they are
// stored], backend.hpp): x forward and backward-filter, and dy backward-data as a transposed
// convolution passes its input, come as 16-bit values beside their floats or alone, and the
// forward output is rounded into 16-bit values of its own, its floats scratch or, unless the call
// adds to it, none.
void check_stored_values(Backend& gpu, const ConvCase& c, double tolerance, Workspace forward_ws = {}) {
  const Conv2dDesc d = desc_of(c);
  const Shape xs = input_shape(c), ys = output_shape(c), ws = weight_shape(c);
  const Precision p = gpu.precision();
  const ConvOperands operands = conv_operands(gpu, c);
  const Twin &x = operands.x, &w = operands.w, &bias = operands.bias;
  const Stored16 x16 = stored16(gpu, x.gpu());
  Workspaces forward = workspaces(gpu, c, ConvPass::forward, kLimit);
  Workspaces backward = workspaces(gpu, c, ConvPass::backward, kLimit);
  const Workspace gpu_forward = forward_ws.data ? forward_ws : forward.gpu();
  Twin dy(gpu, ys, rounded16(p, random_values(ys.elements(), 6)));
  const Stored16 dy16 = stored16(gpu, dy.gpu());
  for (bool alone : {false, true}) {
    INFO(c.name << ", " << to_string(p) << ", 16-bit values " << (alone ? "alone" : "beside the floats"));
    const Tensor x_in = alone ? x16.alone : x16.beside;
    for (bool with_bias : {false, true}) {
      for (int mode = 0; mode < 3; ++mode) {
        const bool accumulate = mode == 1, output_alone = mode == 2;
        INFO("forward, bias " << with_bias << ", accumulating " << accumulate << ", output alone " << output_alone);
        Twin y(gpu, ys, rounded16(p, random_values(ys.elements(), 4)));  // what an accumulating call adds to
        const Stored16 y16 = stored16(gpu, y.gpu());
        const Tensor y_out = output_alone ? y16.alone : y16.beside;
        cpu().conv2d_forward(d, x.cpu(), w.cpu(), with_bias ? bias.cpu() : Tensor{}, y.cpu(), accumulate,
                             forward.cpu());
        gpu.conv2d_forward(d, x_in, w.gpu(), with_bias ? bias.gpu() : Tensor{}, y_out, accumulate, gpu_forward);
        CHECK(packed_error(gpu, y, y16) <= tolerance);
      }
    }
    Twin dx(gpu, xs, 7);
    cpu().conv2d_backward_data(d, dy.cpu(), w.cpu(), dx.cpu(), true, backward.cpu());
    gpu.conv2d_backward_data(d, alone ? dy16.alone : dy16.beside, w.gpu(), dx.gpu(), true, backward.gpu());
    CHECK(dx.relative_error() <= tolerance);
    Twin dw(gpu, ws, 8);
    cpu().conv2d_backward_filter(d, x.cpu(), dy.cpu(), dw.cpu(), Tensor{}, backward.cpu());
    gpu.conv2d_backward_filter(d, x_in, alone ? dy16.alone : dy16.beside, dw.gpu(), Tensor{}, backward.gpu());
    CHECK(dw.relative_error() <= tolerance);
  }
}

}  // namespace

TEST_CASE("cuda conv2d in bf16 and fp16 takes and writes values as the step stores them", "[cuda][conv][bf16]") {
  for (const ConvCase& c : kCases) {
    check_stored_values(gpu_16bit(Precision::bf16), c, 1e-2);
    check_stored_values(gpu_16bit(Precision::fp16), c, 2e-3);
  }
  // In halves (Note [Convolutions in halves]) each half takes and writes its own samples' 16-bit
  // values. A sample of this output is 960 bytes in 16 bits and one of its input 3,200, so a
  // later half starts off the copies' 256-byte alignment and goes through the copies instead:
  // both ways are taken.
  Backend& gpu = gpu_16bit(Precision::bf16);
  const ConvCase& c = kCases[1];
  Shape x1 = input_shape(c), y1 = output_shape(c);
  x1[0] = y1[0] = 1;
  const DeviceBuffer single(gpu, gpu.conv2d_workspace_bytes(desc_of(c), x1, y1, ConvPass::forward, 0));
  check_stored_values(gpu, c, 1e-2, Workspace{single.data(), single.bytes()});
}

TEST_CASE("cuda conv2d refuses 16-bit values in fp32, a tensor with no values, a sum into a 16-bit output with no floats and a bias gradient from 16 bits alone", "[cuda][conv][bf16]") {
  const ConvCase& c = kCases[2];
  const Conv2dDesc d = desc_of(c);
  Twin x(gpu(), input_shape(c), 1), w(gpu(), weight_shape(c), 2), y(gpu(), output_shape(c), 3);
  Workspaces forward = workspaces(gpu(), c, ConvPass::forward, kLimit);
  DeviceBuffer bits(gpu(), input_shape(c).elements() * 2);
  Tensor x_bits{nullptr, input_shape(c)};
  x_bits.packed16 = bits.data();
  CHECK_THROWS_WITH(gpu().conv2d_forward(d, x_bits, w.gpu(), Tensor{}, y.gpu(), false, forward.gpu()),
                    Catch::Contains("conv2d_forward") && Catch::Contains("16-bit value"));
  Backend& bf16 = gpu_16bit(Precision::bf16);
  Workspaces forward16 = workspaces(bf16, c, ConvPass::forward, kLimit);
  Twin x16(bf16, input_shape(c), 1), w16(bf16, weight_shape(c), 2);
  CHECK_THROWS_WITH(bf16.conv2d_forward(d, x16.gpu(), w16.gpu(), Tensor{}, Tensor{nullptr, output_shape(c)}, false,
                                        forward16.gpu()),
                    Catch::Contains("conv2d_forward") && Catch::Contains("neither floats nor 16-bit values"));
  DeviceBuffer y_bits(bf16, output_shape(c).elements() * 2);
  Tensor y16{nullptr, output_shape(c)};
  y16.packed16 = y_bits.data();
  CHECK_THROWS_WITH(bf16.conv2d_forward(d, x16.gpu(), w16.gpu(), Tensor{}, y16, true, forward16.gpu()),
                    Catch::Contains("conv2d_forward") && Catch::Contains("needs its floats to work in"));
  // cuDNN sums a bias gradient from dy's floats: a dy in 16 bits alone gets none.
  Workspaces backward16 = workspaces(bf16, c, ConvPass::backward, kLimit);
  Twin dw(bf16, weight_shape(c), 4), dbias(bf16, Shape{c.k}, 5);
  CHECK_THROWS_WITH(bf16.conv2d_backward_filter(d, x16.gpu(), y16, dw.gpu(), dbias.gpu(), backward16.gpu()),
                    Catch::Contains("conv2d_backward_filter") && Catch::Contains("needs dy's floats"));
}

TEST_CASE("cuda conv2d: a workspace smaller than planned still gives the right result", "[cuda][conv]") {
  const ConvCase& c = kCases[1];
  const Conv2dDesc d = desc_of(c);
  Workspaces planned = workspaces(gpu(), c, ConvPass::forward, kLimit);
  Twin x(gpu(), input_shape(c), 11), w(gpu(), weight_shape(c), 12), y(gpu(), output_shape(c), 13);
  cpu().conv2d_forward(d, x.cpu(), w.cpu(), Tensor{}, y.cpu(), false, planned.cpu());
  gpu().conv2d_forward(d, x.gpu(), w.gpu(), Tensor{}, y.gpu(), false, Workspace{});
  CHECK(y.relative_error() <= 1e-4);
}

TEST_CASE("cuda conv2d: shapes that do not fit the convolution are refused", "[cuda][conv]") {
  const ConvCase& c = kCases[0];
  Shape wrong = output_shape(c);
  wrong[2] += 1;
  CHECK_THROWS_AS(gpu().conv2d_workspace_bytes(desc_of(c), input_shape(c), wrong, ConvPass::forward, kLimit),
                  ShapeError);
}

namespace {

// The layer's forward and backward passes on one backend, with the same inputs on both sides.
struct DeconvRun {
  Twin y, dx, dw, dbias;
};

void run_deconv(Backend& backend, bool on_gpu, ConvTranspose2D& layer, int batch, const Twin& x, const Twin& w,
                const Twin& bias, const Twin& dy, DeconvRun& out, bool accumulate) {
  auto side = [&](const Twin& t) { return on_gpu ? t.gpu() : t.cpu(); };
  // Each pass gets exactly the bytes it asks for: backward adds dx with no room of its own.
  const std::size_t forward_bytes = layer.workspace_bytes(backend, batch, ConvPass::forward, kLimit);
  const std::size_t backward_bytes = layer.workspace_bytes(backend, batch, ConvPass::backward, kLimit);
  DeviceBuffer ws(backend, std::max<std::size_t>(std::max(forward_bytes, backward_bytes), 4));
  const Tensor inputs[1] = {side(x)};
  const Tensor params[2] = {side(w), side(bias)};
  const Tensor grads[2] = {side(out.dw), side(out.dbias)};
  const Tensor grad_inputs[1] = {side(out.dx)};
  const bool acc[1] = {accumulate};
  LayerContext c;
  c.backend = &backend;
  c.batch = batch;
  c.inputs = inputs;
  c.output = side(out.y);
  c.params = params;
  c.grads = grads;
  c.workspace = Workspace{ws.data(), forward_bytes};
  layer.forward(c);
  c.workspace = Workspace{ws.data(), backward_bytes};
  c.grad_output = side(dy);
  c.grad_inputs = grad_inputs;
  c.accumulate = acc;
  layer.backward(c);
  backend.synchronize();
}

}  // namespace

TEST_CASE("cuda conv_transpose2d (the layer) matches the CPU", "[cuda][conv]") {
  struct Case {
    int c, h, w, k, kernel, stride, pad, output_pad;
  };
  for (const Case& t : {Case{8, 7, 9, 4, 2, 2, 0, 0}, Case{6, 5, 6, 3, 3, 2, 1, 1}, Case{4, 8, 8, 8, 3, 1, 1, 0}}) {
    INFO("deconv " << t.k << " " << t.kernel << " stride " << t.stride << " pad " << t.pad);
    for (bool accumulate : {false, true}) {
      ConvTranspose2D layer(t.k, t.kernel, t.stride, t.pad, t.output_pad);
      const Shape in{t.c, t.h, t.w};
      const Shape out = layer.output_shape({in});
      const int n = 3;
      Twin x(gpu(), in.batched(n), 21), w(gpu(), layer.parameters()[0].shape, 22), bias(gpu(), Shape{t.k}, 23);
      Twin dy(gpu(), out.batched(n), 24);
      DeconvRun run{Twin(gpu(), out.batched(n), 25), Twin(gpu(), in.batched(n), 26),
                    Twin(gpu(), layer.parameters()[0].shape, 27), Twin(gpu(), Shape{t.k}, 28)};
      run_deconv(cpu(), false, layer, n, x, w, bias, dy, run, accumulate);
      run_deconv(gpu(), true, layer, n, x, w, bias, dy, run, accumulate);
      CHECK(run.y.relative_error() <= 1e-4);
      CHECK(run.dx.relative_error() <= 1e-4);
      CHECK(run.dw.relative_error() <= 1e-4);
      CHECK(run.dbias.relative_error() <= 1e-4);
    }
  }
}

TEST_CASE("cuda channel bias matches the CPU and sums the same bits every run", "[cuda][conv]") {
  const Shape ys{5, 7, 9, 11};
  Twin y(gpu(), ys, 31), bias(gpu(), Shape{7}, 32);
  cpu().add_channel_bias(bias.cpu(), y.cpu());
  gpu().add_channel_bias(bias.gpu(), y.gpu());
  CHECK(y.relative_error() <= 1e-6);
  Twin db(gpu(), Shape{7}, 33);
  cpu().channel_bias_backward(y.cpu(), db.cpu());
  gpu().channel_bias_backward(y.gpu(), db.gpu());
  CHECK(db.relative_error() <= 1e-5);
  Twin again(gpu(), Shape{7}, 33);
  gpu().channel_bias_backward(y.gpu(), again.gpu());
  CHECK(again.gpu_values() == db.gpu_values());
}

TEST_CASE("cuda channel bias on channels-last images matches the CPU's NCHW", "[cuda][conv][bf16]") {
  Backend& gpu = gpu_channels_last(Precision::bf16);
  const Shape ys{5, 7, 9, 11};
  Twin y(gpu, ys, 31, true), bias(gpu, Shape{7}, 32);
  cpu().add_channel_bias(bias.cpu(), y.cpu());
  gpu.add_channel_bias(bias.gpu(), y.gpu());
  CHECK(y.relative_error() <= 1e-6);
  Twin db(gpu, Shape{7}, 33);
  cpu().channel_bias_backward(y.cpu(), db.cpu());
  gpu.channel_bias_backward(y.gpu(), db.gpu());
  CHECK(db.relative_error() <= 1e-5);
}

// A network's first convolution reads its NCHW input under a channels-last output
// (Backend::takes_channels_last): the input's 16-bit copy is reordered on the way.
TEST_CASE("cuda conv2d in bf16 reads an NCHW input under a channels-last output", "[cuda][conv][bf16]") {
  Backend& gpu = gpu_channels_last(Precision::bf16);
  for (const ConvCase& c : {kCases[0], kCases[5], kCases[8]}) {
    INFO(c.name);
    const Conv2dDesc d = desc_of(c);
    const Shape xs = input_shape(c), ys = output_shape(c), ws = weight_shape(c);
    const ConvOperands operands = conv_operands(gpu, c);  // x NCHW on both sides
    const Twin &x = operands.x, &w = operands.w, &bias = operands.bias;
    const std::size_t bytes =
        std::max(gpu.conv2d_workspace_bytes(d, xs, in_order(ys, true), ConvPass::forward, kLimit),
                 gpu.conv2d_workspace_bytes(d, xs, in_order(ys, true), ConvPass::backward, kLimit));
    const DeviceBuffer space(gpu, bytes);
    const std::size_t cpu_bytes = std::max(cpu().conv2d_workspace_bytes(d, xs, ys, ConvPass::forward, kLimit),
                                           cpu().conv2d_workspace_bytes(d, xs, ys, ConvPass::backward, kLimit));
    const DeviceBuffer cpu_space(cpu(), cpu_bytes);
    const Workspace gws{space.data(), space.bytes()}, cws{cpu_space.data(), cpu_space.bytes()};
    Twin y(gpu, ys, 4, true);
    cpu().conv2d_forward(d, x.cpu(), w.cpu(), bias.cpu(), y.cpu(), false, cws);
    gpu.conv2d_forward(d, x.gpu(), w.gpu(), bias.gpu(), y.gpu(), false, gws);
    CHECK(y.relative_error() <= 1e-2);
    Twin dy(gpu, ys, rounded16(Precision::bf16, random_values(ys.elements(), 6)), true);
    Twin dw(gpu, ws, 19), dbias(gpu, Shape{c.k}, 20);
    cpu().conv2d_backward(d, x.cpu(), dy.cpu(), w.cpu(), dw.cpu(), dbias.cpu(), Tensor{}, false, cws);
    gpu.conv2d_backward(d, x.gpu(), dy.gpu(), w.gpu(), dw.gpu(), dbias.gpu(), Tensor{}, false, gws);
    CHECK(dw.relative_error() <= 1e-2);
    CHECK(dbias.relative_error() <= 1e-2);
  }
  // Backward-data has no such case: an input gradient is in its image's order.
  const ConvCase& c = kCases[0];
  Twin dy(gpu, output_shape(c), 6, true), w(gpu, weight_shape(c), 2), dx(gpu, input_shape(c), 7);
  CHECK_THROWS_WITH(gpu.conv2d_backward_data(desc_of(c), dy.gpu(), w.gpu(), dx.gpu(), false, Workspace{}),
                    Catch::Contains("conv2d_backward_data") && Catch::Contains("lie in different orders"));
}
