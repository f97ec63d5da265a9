// Dense layers on cuBLAS against the CPU backend. The input is 4-d to check that everything after
// the batch dimension is flattened.
#include <catch2/catch.hpp>

#include <algorithm>

#include "support.hpp"

using namespace cnn;
using namespace cnn::cuda_test;

namespace {

void check_dense(Backend& gpu, int n, Shape sample, int out, double tolerance) {
  const int in = static_cast<int>(sample.elements());
  const Shape xs = sample.batched(n), ys{n, out}, ws{out, in};
  Twin x(gpu, xs, 21), w(gpu, ws, 22), bias(gpu, Shape{out}, 23);
  // The CPU backend packs its matrix products in a workspace; cuBLAS keeps its own.
  const DeviceBuffer cpu_space(cpu(), std::max(cpu().dense_workspace_bytes(xs, out, ConvPass::forward),
                                               cpu().dense_workspace_bytes(xs, out, ConvPass::backward)));
  const Workspace cpu_ws{cpu_space.data(), cpu_space.bytes()};

  Twin y(gpu, ys, 24);
  cpu().dense_forward(x.cpu(), w.cpu(), bias.cpu(), y.cpu(), cpu_ws);
  gpu.dense_forward(x.gpu(), w.gpu(), bias.gpu(), y.gpu(), Workspace{});
  CHECK(y.relative_error() <= tolerance);

  Twin y_no_bias(gpu, ys, 25);
  cpu().dense_forward(x.cpu(), w.cpu(), Tensor{}, y_no_bias.cpu(), cpu_ws);
  gpu.dense_forward(x.gpu(), w.gpu(), Tensor{}, y_no_bias.gpu(), Workspace{});
  CHECK(y_no_bias.relative_error() <= tolerance);

  Twin dy(gpu, ys, 26);
  for (bool accumulate : {false, true}) {
    INFO("accumulate " << accumulate);
    Twin dx(gpu, xs, 27);
    cpu().dense_backward_data(dy.cpu(), w.cpu(), dx.cpu(), accumulate, cpu_ws);
    gpu.dense_backward_data(dy.gpu(), w.gpu(), dx.gpu(), accumulate, Workspace{});
    CHECK(dx.relative_error() <= tolerance);
  }

  Twin dw(gpu, ws, 28), dbias(gpu, Shape{out}, 29);
  cpu().dense_backward_weights(x.cpu(), dy.cpu(), dw.cpu(), dbias.cpu(), cpu_ws);
  gpu.dense_backward_weights(x.gpu(), dy.gpu(), dw.gpu(), dbias.gpu(), Workspace{});
  CHECK(dw.relative_error() <= tolerance);
  CHECK(dbias.relative_error() <= tolerance);

  Twin dw_no_bias(gpu, ws, 30);
  cpu().dense_backward_weights(x.cpu(), dy.cpu(), dw_no_bias.cpu(), Tensor{}, cpu_ws);
  gpu.dense_backward_weights(x.gpu(), dy.gpu(), dw_no_bias.gpu(), Tensor{}, Workspace{});
  CHECK(dw_no_bias.relative_error() <= tolerance);
}

}  // namespace

TEST_CASE("cuda dense matches the CPU in fp32", "[cuda][dense]") {
  check_dense(gpu(), 7, Shape{3, 4, 5}, 13, 1e-4);
  check_dense(gpu(), 256, Shape{3136}, 128, 1e-4);
  check_dense(gpu(), 1, Shape{10}, 1, 1e-4);
}

TEST_CASE("cuda dense with tf32 stays within 1e-2", "[cuda][dense][tf32]") {
  check_dense(gpu_tf32(), 256, Shape{3136}, 128, 1e-2);
  check_dense(gpu_tf32(), 33, Shape{64, 3, 3}, 10, 1e-2);
}
