// Group and layer normalisation on CUDA against the CPU backend: outputs, saved statistics and
// gradients (dx written and added to, dgamma and dbeta added to), a group of 802816 values far
// from zero, gradients without dx, inference without saved buffers, and the same bits every run.
#include <catch2/catch.hpp>
#include <vector>

#include "support.hpp"

using namespace cnn;
using namespace cnn::cuda_test;

namespace {

void check_group_norm(const GroupNormDesc& d, Shape xs, float offset = 0.5f) {
  INFO(d.groups << " groups of input " << xs.str() << (d.per_element_affine ? ", per element" : "") << ", eps "
                << d.epsilon);
  const Shape as =
      d.per_element_affine ? Shape{static_cast<int>(xs.elements() / static_cast<std::size_t>(xs[0]))} : Shape{xs[1]};
  const Shape st{xs[0] * d.groups};
  Twin x(gpu(), xs, random_values(xs.elements(), 41, offset - 2.0f, offset + 2.0f));
  Twin gamma(gpu(), as, random_values(as.elements(), 42, 0.5f, 1.5f));
  Twin beta(gpu(), as, 43);
  Twin y(gpu(), xs, 44), mean(gpu(), st, 45), inv_std(gpu(), st, 46);
  cpu().group_norm_forward(d, x.cpu(), gamma.cpu(), beta.cpu(), y.cpu(), mean.cpu(), inv_std.cpu());
  gpu().group_norm_forward(d, x.gpu(), gamma.gpu(), beta.gpu(), y.gpu(), mean.gpu(), inv_std.gpu());
  CHECK(y.relative_error() <= 1e-5);
  CHECK(mean.relative_error() <= 1e-5);
  CHECK(inv_std.relative_error() <= 1e-5);

  // The CPU's backward keeps its sums in its workspace; CUDA's needs none.
  CHECK(gpu().group_norm_workspace_bytes(d, xs) == 0);
  std::vector<double> scratch(cpu().group_norm_workspace_bytes(d, xs) / sizeof(double));
  const Workspace cpu_ws{scratch.data(), scratch.size() * sizeof(double)};

  Twin dy(gpu(), xs, 47);
  for (bool accumulate : {false, true}) {
    INFO("accumulate " << accumulate);
    Twin dx(gpu(), xs, 48), dgamma(gpu(), as, 49), dbeta(gpu(), as, 50);
    cpu().group_norm_backward(d, x.cpu(), dy.cpu(), gamma.cpu(), mean.cpu(), inv_std.cpu(), dx.cpu(), accumulate,
                              dgamma.cpu(), dbeta.cpu(), cpu_ws);
    gpu().group_norm_backward(d, x.gpu(), dy.gpu(), gamma.gpu(), mean.gpu(), inv_std.gpu(), dx.gpu(), accumulate,
                              dgamma.gpu(), dbeta.gpu(), Workspace{});
    CHECK(dx.relative_error() <= 1e-4);
    CHECK(dgamma.relative_error() <= 1e-4);
    CHECK(dbeta.relative_error() <= 1e-4);
  }

  // No input gradient wanted: the parameter gradients alone, as with one.
  Twin dgamma(gpu(), as, 51), dbeta(gpu(), as, 52);
  cpu().group_norm_backward(d, x.cpu(), dy.cpu(), gamma.cpu(), mean.cpu(), inv_std.cpu(), Tensor{}, false, dgamma.cpu(),
                            dbeta.cpu(), cpu_ws);
  gpu().group_norm_backward(d, x.gpu(), dy.gpu(), gamma.gpu(), mean.gpu(), inv_std.gpu(), Tensor{}, false, dgamma.gpu(),
                            dbeta.gpu(), Workspace{});
  CHECK(dgamma.relative_error() <= 1e-4);
  CHECK(dbeta.relative_error() <= 1e-4);

  // Inference: no statistics kept.
  Twin y_inference(gpu(), xs, 53);
  gpu().group_norm_forward(d, x.gpu(), gamma.gpu(), beta.gpu(), y_inference.gpu(), Tensor{}, Tensor{});
  CHECK(y_inference.gpu_values() == y.gpu_values());
}

}  // namespace

TEST_CASE("cuda group norm matches the CPU", "[cuda][group_norm]") {
  check_group_norm({32, 1e-5f, false}, Shape{4, 64, 14, 14});
  check_group_norm({1, 1e-5f, false}, Shape{3, 8, 7, 9});
  check_group_norm({16, 1e-3f, false}, Shape{5, 16, 6, 5});               // InstanceNorm
  check_group_norm({4, 1e-5f, false}, Shape{6, 12});                      // flat features
  check_group_norm({1, 1e-5f, true}, Shape{3, 8, 7, 9});                  // LayerNorm over C, H, W
  check_group_norm({1, 1e-5f, true}, Shape{9, 33});                       // LayerNorm over features
  check_group_norm({2, 1e-5f, false}, Shape{1, 128, 112, 112}, 1000.0f);  // 802816 values a group
}

TEST_CASE("cuda group norm gives the same bits every run", "[cuda][group_norm]") {
  const GroupNormDesc d{8, 1e-5f, false};
  const Shape xs{16, 32, 20, 20}, cs{32}, st{16 * 8};
  Twin x(gpu(), xs, 61), gamma(gpu(), cs, 62), beta(gpu(), cs, 63), dy(gpu(), xs, 64);
  std::vector<float> first_y, first_dx, first_dgamma;
  for (int run = 0; run < 3; ++run) {
    Twin y(gpu(), xs, 65), mean(gpu(), st, 66), inv_std(gpu(), st, 67), dx(gpu(), xs, 68);
    Twin dgamma(gpu(), cs, std::vector<float>(32, 0.f)), dbeta(gpu(), cs, std::vector<float>(32, 0.f));
    gpu().group_norm_forward(d, x.gpu(), gamma.gpu(), beta.gpu(), y.gpu(), mean.gpu(), inv_std.gpu());
    gpu().group_norm_backward(d, x.gpu(), dy.gpu(), gamma.gpu(), mean.gpu(), inv_std.gpu(), dx.gpu(), false,
                              dgamma.gpu(), dbeta.gpu(), Workspace{});
    if (run == 0) {
      first_y = y.gpu_values();
      first_dx = dx.gpu_values();
      first_dgamma = dgamma.gpu_values();
      continue;
    }
    CHECK(y.gpu_values() == first_y);
    CHECK(dx.gpu_values() == first_dx);
    CHECK(dgamma.gpu_values() == first_dgamma);
  }
}
