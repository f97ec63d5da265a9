// BatchNorm and pooling on channels-last images (Note [Channels-last images]) on CUDA in bf16 and
// fp16, against the CPU backend's NCHW: training forward and backward (plain, with the ReLU, with
// the residual add and the ReLU), from saved statistics and for inference, on floats and on
// 16-bit values as a step stores them; max, average and global average pooling both ways. Channel
// counts that are read 8, 4 and 1 at a time (Note [BatchNorm over channels-last images]).
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "support.hpp"

#include <cnnengine/base/error.hpp>

using namespace cnn;
using namespace cnn::cuda_test;

namespace {

Shape channels_last(Shape s) {
  s.channels_last = true;
  return s;
}

// A 16-bit tensor's values on the device, widened and put back in NCHW order.
std::vector<float> nchw_values(Backend& gpu, const Stored16& stored) {
  const std::vector<std::uint16_t> bits = bits_on_host(gpu, stored);
  std::vector<float> values(bits.size());
  cpu().from_16bit(bits.data(), Tensor{values.data(), Shape{static_cast<int>(values.size())}},
                   value_format(gpu.precision()));
  return from_channels_last(values, stored.alone.shape);
}

struct Statistics {
  Twin running_mean, running_var, saved_mean, saved_inv_std;
  Statistics(Backend& gpu, const Shape& cs)
      : running_mean(gpu, cs, 60), running_var(gpu, cs, random_values(cs.elements(), 61, 0.5f, 1.5f)),
        saved_mean(gpu, cs, 62), saved_inv_std(gpu, cs, 63) {}
  void check(double tolerance) const {
    CHECK(running_mean.relative_error() <= tolerance);
    CHECK(running_var.relative_error() <= tolerance);
    CHECK(saved_mean.relative_error() <= tolerance);
    CHECK(saved_inv_std.relative_error() <= tolerance);
  }
};

enum class Fused { none, relu, add_relu };

// Training forward and backward of BatchNorm (`fused` with what) on channels-last x in `gpu`'s
// format, against the CPU's calls on the same numbers in NCHW. `stored`: x and y as a step
// stores them (16 bits alone), else floats.
void check_training(Backend& gpu, const Shape& xs, Fused fused, bool stored) {
  INFO(xs.str() << ", " << to_string(gpu.precision()) << ", fused " << static_cast<int>(fused) << ", stored "
                << stored);
  const Precision p = gpu.precision();
  const Shape cs{xs[1]};
  Twin x(gpu, xs, rounded16(p, random_values(xs.elements(), 70, -2.0f, 3.0f)), true);
  Twin gamma(gpu, cs, random_values(cs.elements(), 71, 0.5f, 1.5f)), beta(gpu, cs, 72);
  Twin residual(gpu, xs, rounded16(p, random_values(xs.elements(), 73, -2.0f, 2.0f)), true);
  Twin y(gpu, xs, 74, true);
  Statistics stats(gpu, cs);
  const Stored16 x16 = stored16(gpu, x.gpu()), y16 = stored16(gpu, y.gpu());
  const Tensor gx = stored ? x16.alone : x.gpu(), gy = stored ? y16.alone : y.gpu();

  cpu().batchnorm_forward_training(x.cpu(), gamma.cpu(), beta.cpu(), y.cpu(), stats.running_mean.cpu(),
                                   stats.running_var.cpu(), 0.1f, 1e-5f, stats.saved_mean.cpu(),
                                   stats.saved_inv_std.cpu());
  if (fused == Fused::add_relu) cpu().add(y.cpu(), residual.cpu(), y.cpu());
  if (fused != Fused::none) cpu().relu_forward(y.cpu(), y.cpu());
  const auto forward = [&](const Tensor& out) {
    if (fused == Fused::none)
      gpu.batchnorm_forward_training(gx, gamma.gpu(), beta.gpu(), out, stats.running_mean.gpu(),
                                     stats.running_var.gpu(), 0.1f, 1e-5f, stats.saved_mean.gpu(),
                                     stats.saved_inv_std.gpu());
    else if (fused == Fused::relu)
      gpu.batchnorm_relu_forward_training(gx, gamma.gpu(), beta.gpu(), out, stats.running_mean.gpu(),
                                          stats.running_var.gpu(), 0.1f, 1e-5f, stats.saved_mean.gpu(),
                                          stats.saved_inv_std.gpu());
    else
      gpu.batchnorm_add_relu_forward_training(gx, residual.gpu(), gamma.gpu(), beta.gpu(), out,
                                              stats.running_mean.gpu(), stats.running_var.gpu(), 0.1f, 1e-5f,
                                              stats.saved_mean.gpu(), stats.saved_inv_std.gpu());
  };
  forward(gy);
  stats.check(1e-5);
  // A float output holds the CPU's floats within the sums' order; a 16-bit one is rounded once.
  const double output_tolerance = !stored ? 1e-5 : p == Precision::bf16 ? 1e-2 : 2e-3;
  const std::vector<float> gpu_y = stored ? nchw_values(gpu, y16) : y.gpu_values();
  CHECK(relative_error(gpu_y, y.cpu_values()) <= output_tolerance);

  Twin dy(gpu, xs, random_values(xs.elements(), 75), true);
  for (bool accumulate : {false, true}) {
    INFO("backward, accumulate " << accumulate);
    Twin dx(gpu, xs, 76, true), dgamma(gpu, cs, 77), dbeta(gpu, cs, 78), dresidual(gpu, xs, 79, true);
    // The CPU's composed calls on the GPU's forward output (the mask is the ReLU's, from y).
    Twin cpu_y(gpu, xs, gpu_y, true), masked(gpu, xs, dy.cpu_values(), true);
    if (fused != Fused::none) cpu().relu_backward(cpu_y.cpu(), masked.cpu(), masked.cpu(), false);
    if (fused == Fused::add_relu) cpu().copy_or_add(masked.cpu(), dresidual.cpu(), accumulate);
    cpu().batchnorm_backward(x.cpu(), masked.cpu(), gamma.cpu(), stats.saved_mean.cpu(), stats.saved_inv_std.cpu(),
                             1e-5f, dx.cpu(), dgamma.cpu(), dbeta.cpu(), accumulate);
    if (fused == Fused::none)
      gpu.batchnorm_backward(gx, dy.gpu(), gamma.gpu(), stats.saved_mean.gpu(), stats.saved_inv_std.gpu(), 1e-5f,
                             dx.gpu(), dgamma.gpu(), dbeta.gpu(), accumulate);
    else if (fused == Fused::relu)
      gpu.batchnorm_relu_backward(gx, gy, dy.gpu(), gamma.gpu(), stats.saved_mean.gpu(), stats.saved_inv_std.gpu(),
                                  1e-5f, dx.gpu(), dgamma.gpu(), dbeta.gpu(), accumulate);
    else
      gpu.batchnorm_add_relu_backward(gx, gy, dy.gpu(), gamma.gpu(), stats.saved_mean.gpu(),
                                      stats.saved_inv_std.gpu(), 1e-5f, dx.gpu(), dgamma.gpu(), dbeta.gpu(),
                                      accumulate, dresidual.gpu(), accumulate);
    CHECK(dx.relative_error() <= 1e-4);
    CHECK(dgamma.relative_error() <= 1e-4);
    CHECK(dbeta.relative_error() <= 1e-4);
    if (fused == Fused::add_relu) CHECK(dresidual.relative_error() <= 1e-6);
  }

  // The same call again gives the same bits: the sums' order is fixed.
  if (!stored && fused == Fused::none) {
    const std::vector<float> first = y.gpu_values();
    Statistics again(gpu, cs);
    gpu.batchnorm_forward_training(gx, gamma.gpu(), beta.gpu(), gy, again.running_mean.gpu(), again.running_var.gpu(),
                                   0.1f, 1e-5f, again.saved_mean.gpu(), again.saved_inv_std.gpu());
    CHECK(y.gpu_values() == first);
    CHECK(again.saved_inv_std.gpu_values() == stats.saved_inv_std.gpu_values());
  }
}

// From saved statistics (a recomputation) and from running ones (inference).
void check_normalise(Backend& gpu, const Shape& xs) {
  INFO(xs.str() << ", " << to_string(gpu.precision()));
  const Shape cs{xs[1]};
  Twin x(gpu, xs, random_values(xs.elements(), 80, -2.0f, 3.0f), true);
  Twin gamma(gpu, cs, random_values(cs.elements(), 81, 0.5f, 1.5f)), beta(gpu, cs, 82), mean(gpu, cs, 83);
  Twin spread(gpu, cs, random_values(cs.elements(), 84, 0.5f, 1.5f));
  Twin y(gpu, xs, 85, true), y_inference(gpu, xs, 86, true);
  cpu().batchnorm_forward_saved(x.cpu(), gamma.cpu(), beta.cpu(), mean.cpu(), spread.cpu(), y.cpu());
  gpu.batchnorm_forward_saved(x.gpu(), gamma.gpu(), beta.gpu(), mean.gpu(), spread.gpu(), y.gpu());
  CHECK(y.relative_error() <= 1e-6);
  cpu().batchnorm_forward_inference(x.cpu(), gamma.cpu(), beta.cpu(), mean.cpu(), spread.cpu(), 1e-5f,
                                    y_inference.cpu());
  gpu.batchnorm_forward_inference(x.gpu(), gamma.gpu(), beta.gpu(), mean.gpu(), spread.gpu(), 1e-5f,
                                  y_inference.gpu());
  CHECK(y_inference.relative_error() <= 1e-6);
}

// Channels read 8 at a time in groups of 64 (64, 2048: 32 groups), 8 at a time all in one group
// (16; 1000: 125 threads a pixel, 250 a block, its last warp partial), 4 (12) and 1 (5) at a time
// (Note [BatchNorm over channels-last images]).
const Shape kShapes[] = {Shape{8, 16, 7, 9}, Shape{32, 64, 8, 8}, Shape{4, 12, 5, 5}, Shape{3, 5, 4, 6},
                         Shape{2, 2048, 2, 3}, Shape{3, 1000, 3, 2}};

}  // namespace

TEST_CASE("cuda batchnorm on channels-last images matches the CPU's NCHW", "[cuda][batchnorm][bf16]") {
  for (Precision p : {Precision::bf16, Precision::fp16})
    for (const Shape& xs : kShapes)
      for (Fused fused : {Fused::none, Fused::relu, Fused::add_relu})
        for (bool stored : {false, true}) check_training(gpu_channels_last(p), xs, fused, stored);
  for (const Shape& xs : kShapes) check_normalise(gpu_channels_last(Precision::bf16), xs);
}

TEST_CASE("cuda batchnorm refuses channels-last images it cannot take", "[cuda][batchnorm][bf16]") {
  const Shape xs = channels_last(Shape{2, 4, 3, 3}), cs{4};
  Twin x(gpu(), xs, random_values(xs.elements(), 90)), c(gpu(), cs, 91), y(gpu(), xs, 92);
  Tensor gx = x.gpu(), gy = y.gpu();
  gx.shape = gy.shape = xs;
  // fp32 takes NCHW alone.
  CHECK_THROWS_WITH(gpu().batchnorm_forward_training(gx, c.gpu(), c.gpu(), gy, c.gpu(), c.gpu(), 0.1f, 1e-5f,
                                                     c.gpu(), c.gpu()),
                    Catch::Contains("batchnorm_forward_training") && Catch::Contains("NCHW order only"));
  // Synchronised BatchNorm's sums read NCHW on every backend.
  Backend& bf16 = gpu_channels_last(Precision::bf16);
  // Without CudaOptions::channels_last, bf16 takes NCHW alone too.
  CHECK_THROWS_WITH(gpu_16bit(Precision::bf16).pool2d_forward(Pool2dDesc{}, Tensor{gx.data, channels_last(Shape{2, 4, 4, 4})},
                                                               Tensor{gy.data, channels_last(Shape{2, 4, 2, 2})}),
                    Catch::Contains("pool2d_forward") && Catch::Contains("NCHW order only"));
  Twin x16(bf16, Shape{2, 4, 3, 3}, 93, true), sums(bf16, cs, 94);
  CHECK_THROWS_WITH(bf16.batchnorm_channel_sums(x16.gpu(), sums.gpu()),
                    Catch::Contains("batchnorm_channel_sums") && Catch::Contains("takes images in NCHW order"));
  // More than 256 vectors of channels a pixel, in one group (not a multiple of 64).
  const Shape wide{1, 2056, 1, 2}, wide_cs{2056};
  Twin xw(bf16, wide, 95, true), yw(bf16, wide, 96, true), cw(bf16, wide_cs, 97);
  Twin mean(bf16, wide_cs, 98), var(bf16, wide_cs, random_values(2056, 99, 0.5f, 1.5f));
  Twin saved_mean(bf16, wide_cs, 100), saved_inv_std(bf16, wide_cs, 101);
  CHECK_THROWS_WITH(bf16.batchnorm_forward_training(xw.gpu(), cw.gpu(), cw.gpu(), yw.gpu(), mean.gpu(), var.gpu(),
                                                    0.1f, 1e-5f, saved_mean.gpu(), saved_inv_std.gpu()),
                    Catch::Contains("batchnorm_forward_training") && Catch::Contains("up to 256 reads a pixel"));
}

TEST_CASE("cuda pooling on channels-last images matches the CPU's NCHW", "[cuda][pool][bf16]") {
  Backend& gpu = gpu_channels_last(Precision::bf16);
  struct Case {
    PoolMode mode;
    int window, stride, pad;
    Shape x;
  };
  for (const Case& c : {Case{PoolMode::max, 2, 2, 0, Shape{4, 16, 8, 10}}, Case{PoolMode::max, 3, 2, 1, Shape{3, 5, 9, 7}},
                        Case{PoolMode::average, 3, 2, 1, Shape{3, 12, 9, 7}},
                        Case{PoolMode::average, 7, 1, 0, Shape{5, 64, 7, 7}}}) {  // global
    INFO("mode " << static_cast<int>(c.mode) << " window " << c.window << " on " << c.x.str());
    Pool2dDesc d;
    d.mode = c.mode;
    d.window_h = d.window_w = c.window;
    d.stride_h = d.stride_w = c.stride;
    d.pad_h = d.pad_w = c.pad;
    const int out_h = (c.x[2] + 2 * c.pad - c.window) / c.stride + 1;
    const int out_w = (c.x[3] + 2 * c.pad - c.window) / c.stride + 1;
    const Shape ys{c.x[0], c.x[1], out_h, out_w};
    Twin x(gpu, c.x, 110, true), y(gpu, ys, 111, true), dy(gpu, ys, 112, true);
    cpu().pool2d_forward(d, x.cpu(), y.cpu());
    gpu.pool2d_forward(d, x.gpu(), y.gpu());
    CHECK(y.relative_error() <= 1e-6);
    for (bool accumulate : {false, true}) {
      Twin dx(gpu, c.x, 113, true);
      cpu().pool2d_backward(d, x.cpu(), y.cpu(), dy.cpu(), dx.cpu(), accumulate);
      gpu.pool2d_backward(d, x.gpu(), y.gpu(), dy.gpu(), dx.gpu(), accumulate);
      CHECK(dx.relative_error() <= 1e-6);
    }
  }
}
