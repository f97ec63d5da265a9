// Dense layers on cuBLAS against the CPU backend, in fp32, tf32, bf16 and fp16. The input is 4-d to
// check that everything after the batch dimension is flattened.
#include <catch2/catch.hpp>

#include <algorithm>

#include "support.hpp"

using namespace cnn;
using namespace cnn::cuda_test;

namespace {

// `gpu` against the fp32 CPU backend. The operands (x, w, dy) are rounded to `gpu`'s 16-bit
// format first where it has one, so that both sides multiply the same numbers; what a call adds
// to is not.
void check_dense(Backend& gpu, int n, Shape sample, int out, double tolerance) {
  const int in = static_cast<int>(sample.elements());
  const Shape xs = sample.batched(n), ys{n, out}, ws{out, in};
  const Precision p = gpu.precision();
  Twin x(gpu, xs, rounded16(p, random_values(xs.elements(), 21))),
      w(gpu, ws, rounded16(p, random_values(ws.elements(), 22)));
  Twin bias(gpu, Shape{out}, 23);
  // The CPU backend packs its matrix products in a workspace; cuBLAS keeps its own, and in 16 bits
  // the operands' copies take the layer's.
  auto workspace_bytes = [&](Backend& b) {
    return std::max(b.dense_workspace_bytes(xs, out, ConvPass::forward),
                    b.dense_workspace_bytes(xs, out, ConvPass::backward));
  };
  const DeviceBuffer cpu_space(cpu(), workspace_bytes(cpu())), gpu_space(gpu, workspace_bytes(gpu));
  const Workspace cpu_ws{cpu_space.data(), cpu_space.bytes()};
  const Workspace gpu_ws{gpu_space.data(), gpu_space.bytes()};

  Twin y(gpu, ys, 24);
  cpu().dense_forward(x.cpu(), w.cpu(), bias.cpu(), y.cpu(), cpu_ws);
  gpu.dense_forward(x.gpu(), w.gpu(), bias.gpu(), y.gpu(), gpu_ws);
  CHECK(y.relative_error() <= tolerance);

  Twin y_no_bias(gpu, ys, 25);
  cpu().dense_forward(x.cpu(), w.cpu(), Tensor{}, y_no_bias.cpu(), cpu_ws);
  gpu.dense_forward(x.gpu(), w.gpu(), Tensor{}, y_no_bias.gpu(), gpu_ws);
  CHECK(y_no_bias.relative_error() <= tolerance);

  Twin dy(gpu, ys, rounded16(p, random_values(ys.elements(), 26)));
  for (bool accumulate : {false, true}) {
    INFO("accumulate " << accumulate);
    Twin dx(gpu, xs, 27);
    cpu().dense_backward_data(dy.cpu(), w.cpu(), dx.cpu(), accumulate, cpu_ws);
    gpu.dense_backward_data(dy.gpu(), w.gpu(), dx.gpu(), accumulate, gpu_ws);
    CHECK(dx.relative_error() <= tolerance);
  }

  Twin dw(gpu, ws, 28), dbias(gpu, Shape{out}, 29);
  cpu().dense_backward_weights(x.cpu(), dy.cpu(), dw.cpu(), dbias.cpu(), cpu_ws);
  gpu.dense_backward_weights(x.gpu(), dy.gpu(), dw.gpu(), dbias.gpu(), gpu_ws);
  CHECK(dw.relative_error() <= tolerance);
  CHECK(dbias.relative_error() <= tolerance);

  Twin dw_no_bias(gpu, ws, 30);
  cpu().dense_backward_weights(x.cpu(), dy.cpu(), dw_no_bias.cpu(), Tensor{}, cpu_ws);
  gpu.dense_backward_weights(x.gpu(), dy.gpu(), dw_no_bias.gpu(), Tensor{}, gpu_ws);
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

// With the operands already 16-bit numbers, every product is exact in float (8 + 8 or 11 + 11
// significant bits) and cuBLAS sums them in float into a float result: the two sides differ in
// the order of their sums, as in fp32, and in the tensor cores' float sums, which may truncate where
// an FMA rounds; 1e-3 leaves room for that and still catches a wrong layout or data type.
TEST_CASE("cuda dense in bf16 and fp16 sums the products of 16-bit operands in float", "[cuda][dense][bf16]") {
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    INFO(to_string(p));
    CHECK(gpu_16bit(p).dense_workspace_bytes(Shape{256, 3136}, 128, ConvPass::forward) > 0);
    check_dense(gpu_16bit(p), 7, Shape{3, 4, 5}, 13, 1e-3);
    check_dense(gpu_16bit(p), 256, Shape{3136}, 128, 1e-3);
    check_dense(gpu_16bit(p), 33, Shape{64, 3, 3}, 10, 1e-3);
  }
}

TEST_CASE("cuda dense in bf16 refuses a workspace without room for its copies", "[cuda][dense][bf16]") {
  Backend& gpu = gpu_16bit(Precision::bf16);
  Twin x(gpu, Shape{4, 8}, 31), w(gpu, Shape{3, 8}, 32), y(gpu, Shape{4, 3}, 33);
  CHECK_THROWS_WITH(gpu.dense_forward(x.gpu(), w.gpu(), Tensor{}, y.gpu(), Workspace{}),
                    Catch::Contains("dense_forward") && Catch::Contains("16-bit copies"));
}
