// The CPU backend in bf16 and fp16: each convolution and dense call computes what the fp32 backend
// computes from the operands rounded to bfloat16 or half (the products' sums agree to float
// rounding), training is reproducible and gives the same losses with or without the vector
// instructions, and learns as fp32 does; unknown precisions are refused by name.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/cpu_isa.hpp"
#include "backends/cpu/detail/gemm16.hpp"
#include "backends/cpu/detail/grouped_conv.hpp"
#include <cnnengine/backends/device/device.hpp>
#include <cnnengine/engine/train/trainer.hpp>
#include "tests/engine/test_networks.hpp"
#include "tests/relative_error.hpp"
#include "tests/rounded16.hpp"

using namespace cnn;
using cnn::testing::random_vector;
using cnn::testing::relative_error;
using cnn::testing::rounded16;

namespace {

constexpr Precision k16BitPrecisions[] = {Precision::bf16, Precision::fp16};


// A workspace of `bytes`, 64-byte aligned, in a vector that owns it.
struct AlignedWorkspace {
  std::vector<float> floats;
  Workspace ws;
  explicit AlignedWorkspace(std::size_t bytes) : floats(bytes / sizeof(float) + 16) {
    void* p = floats.data();
    std::size_t space = floats.size() * sizeof(float);
    ws = Workspace{std::align(64, bytes, p, space), bytes};
  }
};

struct ConvResults {
  std::vector<float> y, dx, dw, dbias;
};

// Forward, backward-data (accumulating onto ones) and backward-filter of one convolution.
ConvResults convolve(CpuBackend& backend, const Conv2dDesc& d, const Shape& xs, const Shape& ys,
                     const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& dy) {
  const Shape ws{d.out_channels, d.in_channels / d.groups, d.kernel_h, d.kernel_w};
  ConvResults r{std::vector<float>(ys.elements()), std::vector<float>(xs.elements(), 1.f), std::vector<float>(w.size()),
                std::vector<float>(static_cast<std::size_t>(d.out_channels))};
  AlignedWorkspace forward(backend.conv2d_workspace_bytes(d, xs, ys, ConvPass::forward, 0));
  AlignedWorkspace backward(backend.conv2d_workspace_bytes(d, xs, ys, ConvPass::backward, 0));
  backend.conv2d_forward(d, Tensor{const_cast<float*>(x.data()), xs}, Tensor{const_cast<float*>(w.data()), ws},
                         Tensor{}, Tensor{r.y.data(), ys}, false, forward.ws);
  backend.conv2d_backward_data(d, Tensor{const_cast<float*>(dy.data()), ys}, Tensor{const_cast<float*>(w.data()), ws},
                               Tensor{r.dx.data(), xs}, true, backward.ws);
  backend.conv2d_backward_filter(d, Tensor{const_cast<float*>(x.data()), xs}, Tensor{const_cast<float*>(dy.data()), ys},
                                 Tensor{r.dw.data(), ws}, Tensor{r.dbias.data(), Shape{d.out_channels}}, backward.ws);
  return r;
}

std::vector<float> losses(Precision precision, const std::string& model, int steps) {
  CpuBackend backend(2, precision);
  TrainerOptions options = testing::constant_sgd(32);
  options.optimizer.learning_rate = 0.05f;
  options.micro_batch = 16;
  options.seed = 5;
  return testing::preset_losses(backend, model, Shape{1, 28, 28}, options, steps, 31);
}

}  // namespace

TEST_CASE("bf16 and fp16 convolutions compute the fp32 convolution of rounded operands", "[bf16][conv]") {
  struct Case {
    Conv2dDesc d;
    int h, w;
  };
  // 3x3 padded, strided, 1x1 (pointwise: no column matrix), two groups at stride 2 (a product a
  // group), a patch deeper than a block of k (3 x 3 x 64 > 256). Then column matrices past half a
  // megabyte, which the forward pass makes by rows from the image and backward-data (at stride 1)
  // as a forward convolution of dy: rows that are the plane shifted (padded by 1, dilated by 2),
  // rows that are not (unpadded), and strided.
  const Case cases[] = {{{3, 16, 3, 3, 1, 1, 1, 1}, 9, 7},       {{8, 12, 3, 3, 2, 1, 1, 1}, 11, 10},
                        {{16, 40, 1, 1, 1, 0, 1, 1}, 6, 5},      {{8, 6, 3, 3, 2, 1, 1, 2}, 7, 7},
                        {{64, 20, 3, 3, 1, 1, 1, 1}, 5, 6},      {{16, 24, 3, 3, 1, 1, 1, 1}, 40, 40},
                        {{8, 8, 3, 3, 1, 2, 2, 1}, 50, 50},      {{16, 8, 3, 3, 1, 0, 1, 1}, 42, 41},
                        {{32, 8, 3, 3, 2, 1, 1, 1}, 48, 48}};
  for (Precision precision : k16BitPrecisions)
    for (int threads : {1, 2})
      for (const Case& c : cases) {
        CAPTURE(to_string(precision), threads, c.d.in_channels, c.d.out_channels, c.d.kernel_h, c.d.stride, c.d.groups);
        const int n = 3, ho = (c.h + 2 * c.d.padding - c.d.dilation * (c.d.kernel_h - 1) - 1) / c.d.stride + 1,
                  wo = (c.w + 2 * c.d.padding - c.d.dilation * (c.d.kernel_w - 1) - 1) / c.d.stride + 1;
        const Shape xs{n, c.d.in_channels, c.h, c.w}, ys{n, c.d.out_channels, ho, wo};
        const auto x = random_vector(xs.elements(), 1), dy = random_vector(ys.elements(), 3);
        const auto w = random_vector(
            static_cast<std::size_t>(c.d.out_channels * c.d.in_channels / c.d.groups * c.d.kernel_h * c.d.kernel_w), 2);
        CpuBackend narrow(threads, precision), fp32(threads);
        const ConvResults got = convolve(narrow, c.d, xs, ys, x, w, dy);
        const ConvResults want =
            convolve(fp32, c.d, xs, ys, rounded16(precision, x), rounded16(precision, w), rounded16(precision, dy));
        CHECK(relative_error(got.y, want.y) < 1e-5);
        CHECK(relative_error(got.dx, want.dx) < 1e-5);
        CHECK(relative_error(got.dw, want.dw) < 1e-5);
        // The bias's gradient sums dy itself, in float on both.
        CHECK(relative_error(got.dbias, convolve(fp32, c.d, xs, ys, x, w, dy).dbias) < 1e-6);
        // And the rounding is the format's: within a few 2^-9 (bfloat16; half: 2^-12) of the unrounded product.
        CHECK(relative_error(got.y, convolve(fp32, c.d, xs, ys, x, w, dy).y) < 2e-2);
      }
}

TEST_CASE("bf16 and fp16 leave depthwise and stride-1 grouped convolutions, their own direct kernels, in fp32",
          "[bf16][conv]") {
  for (Precision precision : k16BitPrecisions)
    for (const Conv2dDesc& d : {Conv2dDesc{8, 8, 3, 3, 1, 1, 1, 8}, Conv2dDesc{8, 6, 3, 3, 1, 1, 1, 2}}) {
      CAPTURE(d.groups);
      const Shape xs{2, 8, 7, 7}, ys{2, d.out_channels, 7, 7};
      const auto x = random_vector(xs.elements(), 1), dy = random_vector(ys.elements(), 3);
      const auto w = random_vector(static_cast<std::size_t>(d.out_channels * d.in_channels / d.groups * 9), 2);
      // Without AVX2 the grouped kernels do not run: im2col's 16-bit products do, tested above.
      if (d.groups != d.in_channels && !cpu::grouped_kernels_apply(d)) continue;
      CpuBackend narrow(2, precision), fp32(2);
      const ConvResults got = convolve(narrow, d, xs, ys, x, w, dy), want = convolve(fp32, d, xs, ys, x, w, dy);
      CHECK(got.y == want.y);
      CHECK(got.dx == want.dx);
      CHECK(got.dw == want.dw);
    }
}

TEST_CASE("bf16 and fp16 dense layers compute the fp32 products of rounded operands", "[bf16][dense]") {
  for (Precision precision : k16BitPrecisions)
    for (int threads : {1, 2}) {
      const int n = 29, in = 300, out = 45;
      CAPTURE(to_string(precision), threads);
      const auto x = random_vector(static_cast<std::size_t>(n * in), 4),
                 w = random_vector(static_cast<std::size_t>(out * in), 5),
                 dy = random_vector(static_cast<std::size_t>(n * out), 6);
      const Shape xs{n, in}, ys{n, out}, ws{out, in};
      auto run = [&](CpuBackend& backend, std::vector<float> xv, std::vector<float> wv, std::vector<float> dyv) {
        std::vector<float> y(ys.elements()), dx(xs.elements(), 0.5f), dw(wv.size(), 0.25f),
            db(static_cast<std::size_t>(out));
        AlignedWorkspace forward(backend.dense_workspace_bytes(xs, out, ConvPass::forward));
        AlignedWorkspace backward(backend.dense_workspace_bytes(xs, out, ConvPass::backward));
        backend.dense_forward(Tensor{xv.data(), xs}, Tensor{wv.data(), ws}, Tensor{}, Tensor{y.data(), ys}, forward.ws);
        backend.dense_backward_data(Tensor{dyv.data(), ys}, Tensor{wv.data(), ws}, Tensor{dx.data(), xs}, true,
                                    backward.ws);
        backend.dense_backward_weights(Tensor{xv.data(), xs}, Tensor{dyv.data(), ys}, Tensor{dw.data(), ws},
                                       Tensor{db.data(), Shape{out}}, backward.ws);
        return std::vector<std::vector<float>>{y, dx, dw};
      };
      CpuBackend narrow(threads, precision), fp32(threads);
      const auto got = run(narrow, x, w, dy),
                 want = run(fp32, rounded16(precision, x), rounded16(precision, w), rounded16(precision, dy));
      for (std::size_t i = 0; i < got.size(); ++i) CHECK(relative_error(got[i], want[i]) < 1e-5);
    }
}

// Under ASan and UBSan it took 72 s, the sanitized stage's slowest case (seven runs of 24 steps);
// the 16-bit kernels it trains on run there in this file's and gemm16_test's other cases.
TEST_CASE("bf16 and fp16 training are reproducible, the same with or without the instructions, and learn as fp32",
          "[bf16][train][slow_under_sanitizers]") {
  // From PyTorch's initialisation, small takes some 20 steps of SGD to leave chance on this data.
  constexpr int kSteps = 24;
  const std::vector<float> fp32 = losses(Precision::fp32, "small", kSteps);
  for (Precision precision : k16BitPrecisions) {
    CAPTURE(to_string(precision));
    const std::vector<float> once = losses(precision, "small", kSteps);
    CHECK(losses(precision, "small", kSteps) == once);
    if (precision == Precision::bf16 ? cpu::bf16_instructions() : cpu::fp16_instructions()) {
      // AMX's tiles round their sums otherwise (Note [bf16 products on AMX]): the vector
      // instructions are the ones their emulation gives the bits of.
      const bool tiles = precision == Precision::bf16 && cpu::bf16_tiles();
      const cpu::IsaLimit vectors(cpu::CpuIsa::avx512_bf16);
      const std::vector<float> on_vectors = tiles ? losses(precision, "small", kSteps) : once;
      const cpu::Gemm16Emulation emulation;
      CHECK(losses(precision, "small", kSteps) == on_vectors);
    }
    CHECK(once != fp32);  // the products did round
    CHECK(once.back() < 0.5f * once.front());
    // Half keeps 11 significant bits to bfloat16's 8: closer to fp32.
    CHECK(std::fabs(once.back() - fp32.back()) < (precision == Precision::bf16 ? 0.1f : 0.05f) * fp32.front());
  }
}

TEST_CASE("precisions: unknown words are refused by name, tf32 is fp32 on the CPU, and fp16 is its own", "[bf16]") {
  CHECK(CpuBackend(1, Precision::fp16).precision() == Precision::fp16);
  CHECK_THAT(CpuBackend(1, Precision::fp16).description(), Catch::Contains("fp16 products in float"));
  CHECK_THROWS_WITH(parse_precision("fp8"),
                    Catch::Contains("unknown precision 'fp8'") && Catch::Contains("fp32, tf32, bf16 or fp16"));
  CHECK(parse_precision("bf16") == Precision::bf16);
  CHECK(CpuBackend(1, Precision::tf32).precision() == Precision::fp32);
  DeviceRequest request{DeviceKind::cpu, 1};
  request.precision = Precision::bf16;
  const DeviceChoice choice = select_device(request);
  CHECK(choice.backend->precision() == Precision::bf16);
  CHECK_THAT(choice.backend->description(), Catch::Contains("bf16 products"));
}
