// Concatenation's channel copies, the element-wise product (same shapes and per-channel gate),
// upsampling (nearest, bilinear) and padding against the CPU backend, both gradient modes; and that
// the gradients that sum (the gate's, bilinear's) give the same bits on two runs.
#include <catch2/catch.hpp>

#include <cmath>

#include "support.hpp"

using namespace cnn;
using namespace cnn::cuda_test;

TEST_CASE("cuda copy_channels matches the CPU", "[cuda][join]") {
  struct Case {
    Shape from, to;
    int from_channel, to_channel, channels;
  };
  for (const Case& c : {Case{{3, 4, 5, 7}, {3, 9, 5, 7}, 0, 2, 4}, Case{{3, 9, 5, 7}, {3, 4, 5, 7}, 5, 0, 4},
                        Case{{2, 6}, {2, 11}, 1, 3, 5}, Case{{4, 64, 28, 28}, {4, 128, 28, 28}, 0, 64, 64}}) {
    INFO(c.from.str() << " channel " << c.from_channel << " to " << c.to.str() << " channel " << c.to_channel);
    Twin from(gpu(), c.from, 71);
    for (bool accumulate : {false, true}) {
      Twin to(gpu(), c.to, 72);
      cpu().copy_channels(from.cpu(), c.from_channel, to.cpu(), c.to_channel, c.channels, accumulate);
      gpu().copy_channels(from.gpu(), c.from_channel, to.gpu(), c.to_channel, c.channels, accumulate);
      CHECK(to.gpu_values() == to.cpu_values());  // copies and single additions: exact
    }
  }
}

TEST_CASE("cuda multiply matches the CPU, same shapes and a gate per channel", "[cuda][join]") {
  for (const Shape gate : {Shape{3, 5, 6, 7}, Shape{3, 5, 1, 1}}) {
    INFO("b " << gate.str());
    const Shape xs{3, 5, 6, 7};
    Twin a(gpu(), xs, 73), b(gpu(), gate, 74), y(gpu(), xs, 75), dy(gpu(), xs, 76);
    cpu().multiply(a.cpu(), b.cpu(), y.cpu());
    gpu().multiply(a.gpu(), b.gpu(), y.gpu());
    CHECK(y.gpu_values() == y.cpu_values());
    for (bool accumulate : {false, true}) {
      Twin da(gpu(), xs, 77), db(gpu(), gate, 78);
      cpu().multiply_backward(a.cpu(), b.cpu(), dy.cpu(), da.cpu(), accumulate, db.cpu(), accumulate);
      gpu().multiply_backward(a.gpu(), b.gpu(), dy.gpu(), da.gpu(), accumulate, db.gpu(), accumulate);
      CHECK(da.relative_error() <= 1e-6);
      CHECK(db.relative_error() <= 1e-5);
    }
    // One gradient alone.
    Twin db(gpu(), gate, 79);
    cpu().multiply_backward(a.cpu(), b.cpu(), dy.cpu(), Tensor{}, false, db.cpu(), false);
    gpu().multiply_backward(a.gpu(), b.gpu(), dy.gpu(), Tensor{}, false, db.gpu(), false);
    CHECK(db.relative_error() <= 1e-5);
  }
}

TEST_CASE("cuda gate gradient over large planes is deterministic", "[cuda][join]") {
  const Shape xs{8, 32, 56, 56}, gate{8, 32, 1, 1};
  Twin a(gpu(), xs, 80), b(gpu(), gate, 81), dy(gpu(), xs, 82), first(gpu(), gate, 83), second(gpu(), gate, 83);
  gpu().multiply_backward(a.gpu(), b.gpu(), dy.gpu(), Tensor{}, false, first.gpu(), false);
  gpu().multiply_backward(a.gpu(), b.gpu(), dy.gpu(), Tensor{}, false, second.gpu(), false);
  CHECK(first.gpu_values() == second.gpu_values());
  cpu().multiply_backward(a.cpu(), b.cpu(), dy.cpu(), Tensor{}, false, first.cpu(), false);
  CHECK(first.relative_error() <= 1e-5);
}

TEST_CASE("cuda upsampling matches the CPU", "[cuda][join]") {
  for (UpsampleMode mode : {UpsampleMode::nearest, UpsampleMode::bilinear})
    for (int factor : {1, 2, 3, 4})
      for (const Shape xs : {Shape{2, 3, 5, 7}, Shape{2, 2, 1, 1}, Shape{1, 4, 1, 9}, Shape{2, 2, 33, 1100}}) {
        INFO((mode == UpsampleMode::nearest ? "nearest" : "bilinear") << " x" << factor << " " << xs.str());
        const UpsampleDesc desc{factor, mode};
        const Shape ys{xs[0], xs[1], xs[2] * factor, xs[3] * factor};
        Twin x(gpu(), xs, 84), y(gpu(), ys, 85), dy(gpu(), ys, 86);
        cpu().upsample_forward(desc, x.cpu(), y.cpu());
        gpu().upsample_forward(desc, x.gpu(), y.gpu());
        CHECK(y.relative_error() <= 1e-6);
        for (bool accumulate : {false, true}) {
          Twin dx(gpu(), xs, 87);
          cpu().upsample_backward(desc, dy.cpu(), dx.cpu(), accumulate);
          gpu().upsample_backward(desc, dy.gpu(), dx.gpu(), accumulate);
          CHECK(dx.relative_error() <= 1e-5);
        }
        Twin again(gpu(), xs, 88), other(gpu(), xs, 88);
        gpu().upsample_backward(desc, dy.gpu(), again.gpu(), false);
        gpu().upsample_backward(desc, dy.gpu(), other.gpu(), false);
        CHECK(again.gpu_values() == other.gpu_values());
      }
}

TEST_CASE("cuda padding matches the CPU, to the bit", "[cuda][join]") {
  for (const PadDesc desc : {PadDesc{0, 1, 0, 1, 0.0f}, PadDesc{2, 0, 3, 1, 0.5f}, PadDesc{1, 1, 1, 1, -INFINITY}})
    for (const Shape xs : {Shape{2, 3, 5, 7}, Shape{1, 2, 1, 1}, Shape{2, 2, 33, 260}}) {
      INFO(xs.str() << " padded " << desc.left << " " << desc.right << " " << desc.top << " " << desc.bottom);
      const Shape ys{xs[0], xs[1], xs[2] + desc.top + desc.bottom, xs[3] + desc.left + desc.right};
      Twin x(gpu(), xs, 90), y(gpu(), ys, 91), dy(gpu(), ys, 92);
      cpu().pad_forward(desc, x.cpu(), y.cpu());
      gpu().pad_forward(desc, x.gpu(), y.gpu());
      CHECK(y.cpu_values() == y.gpu_values());
      for (bool accumulate : {false, true}) {
        Twin dx(gpu(), xs, 93);
        cpu().pad_backward(desc, dy.cpu(), dx.cpu(), accumulate);
        gpu().pad_backward(desc, dy.gpu(), dx.gpu(), accumulate);
        CHECK(dx.cpu_values() == dx.gpu_values());
      }
    }
}
