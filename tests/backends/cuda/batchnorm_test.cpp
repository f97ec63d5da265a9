// Batch normalisation on cuDNN against the CPU backend: outputs, running and saved statistics,
// and gradients that accumulate.
#include <catch2/catch.hpp>

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
