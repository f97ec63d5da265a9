// Batch normalisation on CUDA against the CPU backend: outputs, running and saved statistics,
// and gradients that accumulate; on floats (cuDNN) and, in bf16 and fp16, on values as a step
// stores them (own kernels).
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "support.hpp"

using namespace cnn;
using namespace cnn::cuda_test;

namespace {

void check_batchnorm(Shape xs, float momentum, float epsilon) {
  INFO("input " << xs.str());
  const Shape cs{xs[1]};
  Twin x(gpu(), xs, random_values(xs.elements(), 41, -2.0f, 3.0f));
  Twin gamma(gpu(), cs, random_values(cs.elements(), 42, 0.5f, 1.5f));
  Twin beta(gpu(), cs, 43);
  Twin running_mean(gpu(), cs, 44);
  Twin running_var(gpu(), cs, random_values(cs.elements(), 45, 0.5f, 1.5f));
  Twin saved_mean(gpu(), cs, 46), saved_inv_std(gpu(), cs, 47), y(gpu(), xs, 48);

  cpu().batchnorm_forward_training(x.cpu(), gamma.cpu(), beta.cpu(), y.cpu(), running_mean.cpu(),
                                   running_var.cpu(), momentum, epsilon, saved_mean.cpu(), saved_inv_std.cpu());
  gpu().batchnorm_forward_training(x.gpu(), gamma.gpu(), beta.gpu(), y.gpu(), running_mean.gpu(),
                                   running_var.gpu(), momentum, epsilon, saved_mean.gpu(), saved_inv_std.gpu());
  CHECK(y.relative_error() <= 1e-4);
  CHECK(running_mean.relative_error() <= 1e-4);
  CHECK(running_var.relative_error() <= 1e-4);
  CHECK(saved_mean.relative_error() <= 1e-4);
  CHECK(saved_inv_std.relative_error() <= 1e-4);

  Twin dy(gpu(), xs, 49);
  for (bool accumulate : {false, true}) {
    INFO("accumulate " << accumulate);
    Twin dx(gpu(), xs, 50), dgamma(gpu(), cs, 51), dbeta(gpu(), cs, 52);
    cpu().batchnorm_backward(x.cpu(), dy.cpu(), gamma.cpu(), saved_mean.cpu(), saved_inv_std.cpu(), epsilon,
                             dx.cpu(), dgamma.cpu(), dbeta.cpu(), accumulate);
    gpu().batchnorm_backward(x.gpu(), dy.gpu(), gamma.gpu(), saved_mean.gpu(), saved_inv_std.gpu(), epsilon,
                             dx.gpu(), dgamma.gpu(), dbeta.gpu(), accumulate);
    CHECK(dx.relative_error() <= 1e-4);
    CHECK(dgamma.relative_error() <= 1e-4);
    CHECK(dbeta.relative_error() <= 1e-4);
  }

  Twin y_inference(gpu(), xs, 53);
  cpu().batchnorm_forward_inference(x.cpu(), gamma.cpu(), beta.cpu(), running_mean.cpu(), running_var.cpu(),
                                    epsilon, y_inference.cpu());
  gpu().batchnorm_forward_inference(x.gpu(), gamma.gpu(), beta.gpu(), running_mean.gpu(), running_var.gpu(),
                                    epsilon, y_inference.gpu());
  CHECK(y_inference.relative_error() <= 1e-4);
}

}  // namespace

TEST_CASE("cuda batchnorm matches the CPU", "[cuda][batchnorm]") {
  check_batchnorm(Shape{8, 16, 7, 9}, 0.1f, 1e-5f);
  check_batchnorm(Shape{64, 32, 16, 16}, 0.1f, 1e-5f);
  check_batchnorm(Shape{5, 3, 1, 1}, 0.5f, 1e-3f);
  check_batchnorm(Shape{32, 10}, 0.01f, 1e-5f);  // after a dense layer: [N, C]
}

TEST_CASE("cuda batchnorm backward takes forward's epsilon as an argument, wherever the statistics are kept",
          "[cuda][batchnorm]") {
  // The backward used to look epsilon up by the saved buffer's address and fall back to 1e-5 at
  // any other: statistics kept elsewhere (a copy, a later plan) met the wrong epsilon.
  const Shape xs{8, 4, 5, 5}, cs{4};
  const float epsilon = 0.5f;
  Twin x(gpu(), xs, random_values(xs.elements(), 61, -2.0f, 3.0f));
  Twin gamma(gpu(), cs, random_values(cs.elements(), 62, 0.5f, 1.5f));
  Twin beta(gpu(), cs, 63), running_mean(gpu(), cs, 64), y(gpu(), xs, 65);
  Twin running_var(gpu(), cs, random_values(cs.elements(), 66, 0.5f, 1.5f));
  Twin saved_mean(gpu(), cs, 67), saved_inv_std(gpu(), cs, 68);
  cpu().batchnorm_forward_training(x.cpu(), gamma.cpu(), beta.cpu(), y.cpu(), running_mean.cpu(), running_var.cpu(),
                                   0.1f, epsilon, saved_mean.cpu(), saved_inv_std.cpu());
  gpu().batchnorm_forward_training(x.gpu(), gamma.gpu(), beta.gpu(), y.gpu(), running_mean.gpu(), running_var.gpu(),
                                   0.1f, epsilon, saved_mean.gpu(), saved_inv_std.gpu());
  const Twin moved_mean(gpu(), cs, saved_mean.gpu_values()), moved_inv_std(gpu(), cs, saved_inv_std.gpu_values());
  Twin dy(gpu(), xs, 69), dx(gpu(), xs, 70), dgamma(gpu(), cs, 71), dbeta(gpu(), cs, 72);
  cpu().batchnorm_backward(x.cpu(), dy.cpu(), gamma.cpu(), saved_mean.cpu(), saved_inv_std.cpu(), epsilon, dx.cpu(),
                           dgamma.cpu(), dbeta.cpu(), false);
  gpu().batchnorm_backward(x.gpu(), dy.gpu(), gamma.gpu(), moved_mean.gpu(), moved_inv_std.gpu(), epsilon, dx.gpu(),
                           dgamma.gpu(), dbeta.gpu(), false);
  CHECK(dx.relative_error() <= 1e-4);
  CHECK(dgamma.relative_error() <= 1e-4);
  CHECK(dbeta.relative_error() <= 1e-4);
}

TEST_CASE("cuda batchnorm from saved statistics matches the CPU and the GPU's training output", "[cuda][batchnorm]") {
  // A recomputation during backward: the statistics forward saved, no running statistic.
  for (const Shape xs : {Shape{8, 16, 7, 9}, Shape{32, 64, 16, 16}, Shape{12, 10}}) {
    INFO("input " << xs.str());
    const Shape cs{xs[1]};
    Twin x(gpu(), xs, random_values(xs.elements(), 81, -2.0f, 3.0f));
    Twin gamma(gpu(), cs, random_values(cs.elements(), 82, 0.5f, 1.5f));
    Twin beta(gpu(), cs, 83), running_mean(gpu(), cs, 84);
    Twin running_var(gpu(), cs, random_values(cs.elements(), 85, 0.5f, 1.5f));
    Twin saved_mean(gpu(), cs, 86), saved_inv_std(gpu(), cs, 87), y(gpu(), xs, 88);
    gpu().batchnorm_forward_training(x.gpu(), gamma.gpu(), beta.gpu(), y.gpu(), running_mean.gpu(),
                                     running_var.gpu(), 0.1f, 1e-5f, saved_mean.gpu(), saved_inv_std.gpu());
    // The same statistics on both sides: the GPU's, copied to the reference.
    const Twin mean(gpu(), cs, saved_mean.gpu_values()), inv_std(gpu(), cs, saved_inv_std.gpu_values());
    const std::vector<float> running_before = running_mean.gpu_values();
    Twin again(gpu(), xs, 89);
    cpu().batchnorm_forward_saved(x.cpu(), gamma.cpu(), beta.cpu(), mean.cpu(), inv_std.cpu(), again.cpu());
    gpu().batchnorm_forward_saved(x.gpu(), gamma.gpu(), beta.gpu(), mean.gpu(), inv_std.gpu(), again.gpu());
    CHECK(again.relative_error() <= 1e-6);
    CHECK(relative_error(again.gpu_values(), y.gpu_values()) <= 1e-5);
    CHECK(running_mean.gpu_values() == running_before);
  }
}

namespace {

// Values the GPU wrote in 16 bits, widened on the host.
std::vector<float> widened_on_host(Backend& gpu, const Stored16& stored) {
  const std::vector<std::uint16_t> bits = bits_on_host(gpu, stored);
  std::vector<float> values(bits.size());
  cpu().from_16bit(bits.data(), Tensor{values.data(), Shape{static_cast<int>(values.size())}},
                   value_format(gpu.precision()));
  return values;
}

// BatchNorm and the ReLU after it in one pass (step_plan.cpp, Note [BatchNorm and ReLU in one
// pass]) give the bits of the calls they are made of, forward and backward: relu_forward over the
// rounded output, relu_backward's mask from the ReLU's output.
void check_fused_relu(Backend& gpu, const Tensor& x, const Twin& gamma, const Twin& beta, const Twin& dy) {
  const Shape xs = x.shape, cs{xs[1]};
  struct Statistics {
    Twin running_mean, running_var, saved_mean, saved_inv_std;
    Statistics(Backend& gpu, Shape cs)
        : running_mean(gpu, cs, 160), running_var(gpu, cs, random_values(cs.elements(), 161, 0.5f, 1.5f)),
          saved_mean(gpu, cs, 162), saved_inv_std(gpu, cs, 163) {}
  } fused_stats(gpu, cs), composed_stats(gpu, cs);
  Twin fused_y(gpu, xs, 164), composed_y(gpu, xs, 164);
  const Stored16 fused = stored16(gpu, fused_y.gpu()), composed = stored16(gpu, composed_y.gpu());
  gpu.batchnorm_relu_forward_training(x, gamma.gpu(), beta.gpu(), fused.alone, fused_stats.running_mean.gpu(),
                                      fused_stats.running_var.gpu(), 0.1f, 1e-5f, fused_stats.saved_mean.gpu(),
                                      fused_stats.saved_inv_std.gpu());
  gpu.batchnorm_forward_training(x, gamma.gpu(), beta.gpu(), composed.alone, composed_stats.running_mean.gpu(),
                                 composed_stats.running_var.gpu(), 0.1f, 1e-5f, composed_stats.saved_mean.gpu(),
                                 composed_stats.saved_inv_std.gpu());
  gpu.relu_forward(composed.alone, composed.alone);
  CHECK(bits_on_host(gpu, fused) == bits_on_host(gpu, composed));
  CHECK(fused_stats.running_var.gpu_values() == composed_stats.running_var.gpu_values());

  const std::vector<float> gradient = dy.gpu_values();
  for (bool accumulate : {false, true}) {
    INFO("fused backward, accumulate " << accumulate);
    Twin fused_dy(gpu, xs, gradient), composed_dy(gpu, xs, gradient);
    Twin fused_dx(gpu, xs, 165), composed_dx(gpu, xs, 165), fused_dgamma(gpu, cs, 166), composed_dgamma(gpu, cs, 166),
        fused_dbeta(gpu, cs, 167), composed_dbeta(gpu, cs, 167);
    gpu.batchnorm_relu_backward(x, fused.alone, fused_dy.gpu(), gamma.gpu(), fused_stats.saved_mean.gpu(),
                                fused_stats.saved_inv_std.gpu(), 1e-5f, fused_dx.gpu(), fused_dgamma.gpu(),
                                fused_dbeta.gpu(), accumulate);
    gpu.relu_backward(composed.alone, composed_dy.gpu(), composed_dy.gpu(), false);
    gpu.batchnorm_backward(x, composed_dy.gpu(), gamma.gpu(), composed_stats.saved_mean.gpu(),
                           composed_stats.saved_inv_std.gpu(), 1e-5f, composed_dx.gpu(), composed_dgamma.gpu(),
                           composed_dbeta.gpu(), accumulate);
    CHECK(fused_dx.gpu_values() == composed_dx.gpu_values());
    CHECK(fused_dgamma.gpu_values() == composed_dgamma.gpu_values());
    CHECK(fused_dbeta.gpu_values() == composed_dbeta.gpu_values());
  }
}

// BatchNorm, a residual add and the ReLU in one pass (step_plan.cpp, Note [BatchNorm, add and ReLU
// in one pass]) give the bits of the calls they are made of, forward and backward, with the
// residual in 16 bits (a layer's output) or floats (the network input), its gradient written or
// added to.
void check_fused_add_relu(Backend& gpu, const Tensor& x, const Twin& gamma, const Twin& beta, const Twin& dy) {
  const Shape xs = x.shape, cs{xs[1]};
  Twin residual_values(gpu, xs, random_values(xs.elements(), 170, -2.0f, 2.0f));
  const Stored16 residual_bits = stored16(gpu, residual_values.gpu());
  for (bool residual16 : {true, false}) {
    INFO("residual in " << (residual16 ? "16 bits" : "floats"));
    const Tensor residual = residual16 ? residual_bits.alone : residual_values.gpu();
    Twin fused_running_mean(gpu, cs, 171), composed_running_mean(gpu, cs, 171);
    Twin fused_running_var(gpu, cs, 172), composed_running_var(gpu, cs, 172);
    Twin saved_mean(gpu, cs, 173), saved_inv_std(gpu, cs, 174), composed_saved_mean(gpu, cs, 173),
        composed_saved_inv_std(gpu, cs, 174);
    Twin fused_y(gpu, xs, 175), composed_y(gpu, xs, 175);
    const Stored16 fused = stored16(gpu, fused_y.gpu()), composed = stored16(gpu, composed_y.gpu());
    gpu.batchnorm_add_relu_forward_training(x, residual, gamma.gpu(), beta.gpu(), fused.alone,
                                            fused_running_mean.gpu(), fused_running_var.gpu(), 0.1f, 1e-5f,
                                            saved_mean.gpu(), saved_inv_std.gpu());
    gpu.batchnorm_forward_training(x, gamma.gpu(), beta.gpu(), composed.alone, composed_running_mean.gpu(),
                                   composed_running_var.gpu(), 0.1f, 1e-5f, composed_saved_mean.gpu(),
                                   composed_saved_inv_std.gpu());
    gpu.add(composed.alone, residual, composed.alone);
    gpu.relu_forward(composed.alone, composed.alone);
    CHECK(bits_on_host(gpu, fused) == bits_on_host(gpu, composed));
    CHECK(fused_running_mean.gpu_values() == composed_running_mean.gpu_values());
    CHECK(fused_running_var.gpu_values() == composed_running_var.gpu_values());
    CHECK(saved_mean.gpu_values() == composed_saved_mean.gpu_values());
    CHECK(saved_inv_std.gpu_values() == composed_saved_inv_std.gpu_values());

    const std::vector<float> gradient = dy.gpu_values();
    for (bool accumulate : {false, true})
      for (bool accumulate_residual : {false, true}) {
        INFO("fused backward, accumulate " << accumulate << ", the residual's " << accumulate_residual);
        Twin fused_dy(gpu, xs, gradient), composed_dy(gpu, xs, gradient);
        Twin fused_dx(gpu, xs, 176), composed_dx(gpu, xs, 176), fused_dresidual(gpu, xs, 177),
            composed_dresidual(gpu, xs, 177), fused_dgamma(gpu, cs, 178), composed_dgamma(gpu, cs, 178),
            fused_dbeta(gpu, cs, 179), composed_dbeta(gpu, cs, 179);
        gpu.batchnorm_add_relu_backward(x, fused.alone, fused_dy.gpu(), gamma.gpu(), saved_mean.gpu(),
                                        saved_inv_std.gpu(), 1e-5f, fused_dx.gpu(), fused_dgamma.gpu(),
                                        fused_dbeta.gpu(), accumulate, fused_dresidual.gpu(), accumulate_residual);
        gpu.relu_backward(composed.alone, composed_dy.gpu(), composed_dy.gpu(), false);
        gpu.copy_or_add(composed_dy.gpu(), composed_dresidual.gpu(), accumulate_residual);
        gpu.batchnorm_backward(x, composed_dy.gpu(), gamma.gpu(), saved_mean.gpu(), saved_inv_std.gpu(), 1e-5f,
                               composed_dx.gpu(), composed_dgamma.gpu(), composed_dbeta.gpu(), accumulate);
        CHECK(fused_dx.gpu_values() == composed_dx.gpu_values());
        CHECK(fused_dresidual.gpu_values() == composed_dresidual.gpu_values());
        CHECK(fused_dgamma.gpu_values() == composed_dgamma.gpu_values());
        CHECK(fused_dbeta.gpu_values() == composed_dbeta.gpu_values());
      }
    // Without the residual's gradient (the network input wants none): the ReLU's and BatchNorm's.
    Twin fused_dy(gpu, xs, gradient), composed_dy(gpu, xs, gradient);
    Twin fused_dx(gpu, xs, 180), composed_dx(gpu, xs, 180), fused_dgamma(gpu, cs, 181),
        composed_dgamma(gpu, cs, 181), fused_dbeta(gpu, cs, 182), composed_dbeta(gpu, cs, 182);
    gpu.batchnorm_add_relu_backward(x, fused.alone, fused_dy.gpu(), gamma.gpu(), saved_mean.gpu(),
                                    saved_inv_std.gpu(), 1e-5f, fused_dx.gpu(), fused_dgamma.gpu(),
                                    fused_dbeta.gpu(), false, Tensor{}, false);
    gpu.relu_backward(composed.alone, composed_dy.gpu(), composed_dy.gpu(), false);
    gpu.batchnorm_backward(x, composed_dy.gpu(), gamma.gpu(), saved_mean.gpu(), saved_inv_std.gpu(), 1e-5f,
                           composed_dx.gpu(), composed_dgamma.gpu(), composed_dbeta.gpu(), false);
    CHECK(fused_dx.gpu_values() == composed_dx.gpu_values());
    CHECK(fused_dgamma.gpu_values() == composed_dgamma.gpu_values());
    CHECK(fused_dbeta.gpu_values() == composed_dbeta.gpu_values());
  }
}

// BatchNorm on a 16-bit backend with its input and output as a step stores them (Note [Values as
// they are stored], backend.hpp): the CPU on the same values, widened, is the reference. Sums are
// in double on both sides, so statistics and float results agree to float rounding; an output
// written in 16 bits is the CPU's float output rounded, within half a unit in its last place
// whichever way a value near a tie went: relative to the largest value, at most 2^-8 in bf16
// (a value at or just above a power of two, itself the largest) and 2^-11 in fp16.
void check_stored_batchnorm(Precision p, Shape xs, std::size_t offset) {
  INFO(to_string(p) << ", input " << xs.str() << ", " << offset << " values into its buffer");
  Backend& gpu = gpu_16bit(p);
  const double rounding = p == Precision::bf16 ? 4.5e-3 : 6e-4;
  const Shape cs{xs[1]};
  const std::size_t n = xs.elements();
  // Views `offset` values into a buffer, as a later half of a batch is: the kernels then read
  // one value at a time.
  const Shape padded{static_cast<int>(n + offset)};
  Twin x_buffer(gpu, padded, rounded16(p, random_values(n + offset, 141, -2.0f, 3.0f)));
  const Stored16 x_bits = stored16(gpu, x_buffer.gpu());
  const Tensor x_cpu{x_buffer.cpu().data + offset, xs};
  const Tensor x_alone{nullptr, xs, static_cast<std::uint16_t*>(x_bits.bits.data()) + offset};
  Twin gamma(gpu, cs, random_values(cs.elements(), 142, 0.5f, 1.5f)), beta(gpu, cs, 143);
  Twin running_mean(gpu, cs, 144), running_var(gpu, cs, random_values(cs.elements(), 145, 0.5f, 1.5f));
  Twin saved_mean(gpu, cs, 146), saved_inv_std(gpu, cs, 147), y(gpu, xs, 148);
  Stored16 y_bits = stored16(gpu, y.gpu());  // y's floats stay as its scratch

  cpu().batchnorm_forward_training(x_cpu, gamma.cpu(), beta.cpu(), y.cpu(), running_mean.cpu(), running_var.cpu(),
                                   0.1f, 1e-5f, saved_mean.cpu(), saved_inv_std.cpu());
  gpu.batchnorm_forward_training(x_alone, gamma.gpu(), beta.gpu(), y_bits.beside, running_mean.gpu(),
                                 running_var.gpu(), 0.1f, 1e-5f, saved_mean.gpu(), saved_inv_std.gpu());
  CHECK(relative_error(widened_on_host(gpu, y_bits), y.cpu_values()) <= rounding);
  CHECK(running_mean.relative_error() <= 1e-5);
  CHECK(running_var.relative_error() <= 1e-5);
  CHECK(saved_mean.relative_error() <= 1e-5);
  CHECK(saved_inv_std.relative_error() <= 1e-5);

  // A recomputation from the saved statistics writes training's bits again.
  Twin again(gpu, xs, 149);
  const Stored16 again_bits = stored16(gpu, again.gpu());
  gpu.batchnorm_forward_saved(x_alone, gamma.gpu(), beta.gpu(), saved_mean.gpu(), saved_inv_std.gpu(), again_bits.alone);
  CHECK(bits_on_host(gpu, again_bits) == bits_on_host(gpu, y_bits));
  // Into floats, from the same statistics as the CPU's.
  const Twin mean(gpu, cs, saved_mean.gpu_values()), inv_std(gpu, cs, saved_inv_std.gpu_values());
  cpu().batchnorm_forward_saved(x_cpu, gamma.cpu(), beta.cpu(), mean.cpu(), inv_std.cpu(), again.cpu());
  gpu.batchnorm_forward_saved(x_alone, gamma.gpu(), beta.gpu(), mean.gpu(), inv_std.gpu(), again.gpu());
  CHECK(again.relative_error() <= 1e-6);

  Twin dy(gpu, xs, random_values(n, 150));
  for (bool accumulate : {false, true}) {
    INFO("accumulate " << accumulate);
    Twin dx(gpu, xs, 151), dgamma(gpu, cs, 152), dbeta(gpu, cs, 153);
    cpu().batchnorm_backward(x_cpu, dy.cpu(), gamma.cpu(), saved_mean.cpu(), saved_inv_std.cpu(), 1e-5f, dx.cpu(),
                             dgamma.cpu(), dbeta.cpu(), accumulate);
    gpu.batchnorm_backward(x_alone, dy.gpu(), gamma.gpu(), saved_mean.gpu(), saved_inv_std.gpu(), 1e-5f, dx.gpu(),
                           dgamma.gpu(), dbeta.gpu(), accumulate);
    CHECK(dx.relative_error() <= 1e-4);
    CHECK(dgamma.relative_error() <= 1e-4);
    CHECK(dbeta.relative_error() <= 1e-4);
  }

  Twin inferred(gpu, xs, 154);
  Stored16 inferred_bits = stored16(gpu, inferred.gpu());
  cpu().batchnorm_forward_inference(x_cpu, gamma.cpu(), beta.cpu(), running_mean.cpu(), running_var.cpu(), 1e-5f,
                                    inferred.cpu());
  gpu.batchnorm_forward_inference(x_alone, gamma.gpu(), beta.gpu(), running_mean.gpu(), running_var.gpu(), 1e-5f,
                                  inferred_bits.alone);
  CHECK(relative_error(widened_on_host(gpu, inferred_bits), inferred.cpu_values()) <= rounding);

  check_fused_relu(gpu, x_alone, gamma, beta, dy);
  check_fused_add_relu(gpu, x_alone, gamma, beta, dy);

  // The same bits on every run: a channel's blocks add up in rank order (Note [One block a
  // channel]). Last, as it moves the running statistics once more.
  Twin y_again(gpu, xs, 155), saved_mean_again(gpu, cs, 156);
  const Stored16 y_again_bits = stored16(gpu, y_again.gpu());
  gpu.batchnorm_forward_training(x_alone, gamma.gpu(), beta.gpu(), y_again_bits.beside, running_mean.gpu(),
                                 running_var.gpu(), 0.1f, 1e-5f, saved_mean_again.gpu(), saved_inv_std.gpu());
  CHECK(bits_on_host(gpu, y_again_bits) == bits_on_host(gpu, y_bits));
  CHECK(saved_mean_again.gpu_values() == saved_mean.gpu_values());
}

}  // namespace

TEST_CASE("cuda batchnorm takes and writes values as the step stores them", "[cuda][batchnorm][bf16]") {
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    check_stored_batchnorm(p, Shape{8, 16, 7, 9}, 0);    // one value at a time (a plane of 63)
    check_stored_batchnorm(p, Shape{6, 12, 14, 14}, 0);  // four at a time (196)
    check_stored_batchnorm(p, Shape{64, 32, 16, 16}, 0);  // eight, 256 threads a channel
    check_stored_batchnorm(p, Shape{160, 8, 16, 16}, 0);  // eight, 512 threads (40,960 values a channel)
    // On Hopper a channel's blocks form a cluster: 2 above, 6 here, with shares of unequal size.
    check_stored_batchnorm(p, Shape{251, 3, 20, 20}, 0);
    check_stored_batchnorm(p, Shape{64, 32, 16, 16}, 1);  // unaligned: one at a time
    check_stored_batchnorm(p, Shape{32, 10}, 0);          // after a dense layer: [N, C]
  }
}

TEST_CASE("cuda batchnorm refuses 16-bit values on an fp32 backend, a 16-bit gradient and missing statistics", "[cuda][batchnorm][bf16]") {
  const Shape xs{4, 3, 5, 5}, cs{3};
  for (bool fp32 : {true, false}) {
    Backend& gpu = fp32 ? cuda_test::gpu() : gpu_16bit(Precision::bf16);
    Twin x(gpu, xs, 161), gamma(gpu, cs, 162), beta(gpu, cs, 163), mean(gpu, cs, 164), var(gpu, cs, 165);
    Twin saved_mean(gpu, cs, 166), saved_inv_std(gpu, cs, 167), y(gpu, xs, 168), dx(gpu, xs, 169);
    Twin dgamma(gpu, cs, 170), dbeta(gpu, cs, 171);
    DeviceBuffer bits(gpu, xs.elements() * 2);
    const Tensor x16{nullptr, xs, bits.data()};
    if (fp32) {
      CHECK_THROWS_WITH(gpu.batchnorm_forward_training(x16, gamma.gpu(), beta.gpu(), y.gpu(), mean.gpu(), var.gpu(),
                                                       0.1f, 1e-5f, saved_mean.gpu(), saved_inv_std.gpu()),
                        Catch::Contains("batchnorm_forward_training") && Catch::Contains("16-bit value"));
    } else {
      CHECK_THROWS_WITH(gpu.batchnorm_backward(x.gpu(), x16, gamma.gpu(), saved_mean.gpu(), saved_inv_std.gpu(), 1e-5f,
                                               dx.gpu(), dgamma.gpu(), dbeta.gpu(), false),
                        Catch::Contains("batchnorm_backward") && Catch::Contains("must be floats"));
      CHECK_THROWS_WITH(gpu.batchnorm_forward_inference(Tensor{nullptr, xs}, gamma.gpu(), beta.gpu(), mean.gpu(),
                                                        var.gpu(), 1e-5f, y.gpu()),
                        Catch::Contains("batchnorm_forward_inference") &&
                            Catch::Contains("neither floats nor 16-bit values"));
      // The 16-bit kernels write every running statistic (cuDNN's float call may be given none),
      // and an output must hold the input's values.
      CHECK_THROWS_WITH(gpu.batchnorm_forward_training(x16, gamma.gpu(), beta.gpu(), y.gpu(), Tensor{}, var.gpu(),
                                                       0.1f, 1e-5f, saved_mean.gpu(), saved_inv_std.gpu()),
                        Catch::Contains("batchnorm_forward_training") &&
                            Catch::Contains("is not one value for each of [4x3x5x5]'s 3 channels"));
      CHECK_THROWS_WITH(gpu.batchnorm_forward_training(x16, gamma.gpu(), beta.gpu(), dgamma.gpu(), mean.gpu(),
                                                       var.gpu(), 0.1f, 1e-5f, saved_mean.gpu(), saved_inv_std.gpu()),
                        Catch::Contains("batchnorm_forward_training") && Catch::Contains("differ in size"));
      CHECK_THROWS_WITH(gpu.batchnorm_backward(x16, x.gpu(), gamma.gpu(), Tensor{}, saved_inv_std.gpu(), 1e-5f,
                                               dx.gpu(), dgamma.gpu(), dbeta.gpu(), false),
                        Catch::Contains("batchnorm_backward") &&
                            Catch::Contains("is not one value for each of [4x3x5x5]'s 3 channels"));
    }
  }
}
