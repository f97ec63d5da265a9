// Backend's fronts (Note [One front per backend call], backend.hpp): a call whose arguments break
// the contract is refused before any backend sees it, with the same error on the CPU backend and
// on a forwarding backend, whose inner backend is then never called.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/base/error.hpp>
#include "engine/core/forwarding_backend.hpp"

using namespace cnn;

namespace {

// Counts the calls that reach run(), that is, the calls the front let through.
class CountingBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  int calls = 0;

 private:
  void run(const BackendCall& /*call*/, const std::function<void()>& work) override {
    ++calls;
    work();
  }
};

// The message of the Error that `call` throws on `backend`; "nothing thrown" where it returns.
template <class Error>
std::string refusal(Backend& backend, const std::function<void(Backend&)>& call) {
  try {
    call(backend);
  } catch (const Error& e) {
    return e.what();
  }
  return "nothing thrown";
}

// Refused alike by the CPU backend and by a forwarding backend over one, which passes nothing on.
template <class Error>
void check_refused(const std::function<void(Backend&)>& call, const std::string& message) {
  CpuBackend cpu(1);
  CountingBackend forwarding(cpu);
  CHECK(refusal<Error>(cpu, call) == message);
  CHECK(refusal<Error>(forwarding, call) == message);
  CHECK(forwarding.calls == 0);
}

}  // namespace

TEST_CASE("backend fronts: the task losses' arguments are checked before a backend runs them", "[backend][loss]") {
  std::vector<float> out(6), target(6), grad(6), sums(3);
  const Tensor outputs{out.data(), Shape{2, 3}}, targets{target.data(), Shape{2, 3}};
  const Tensor loss_sum{sums.data(), Shape{1}}, correct{sums.data() + 1, Shape{1}}, counted{sums.data() + 2, Shape{1}};
  StepScalars step;

  check_refused<ConfigError>(
      [&](Backend& b) {
        b.regression_loss(RegressionLoss::huber, 0.0f, outputs, targets, Tensor{}, nullptr, loss_sum, correct, counted,
                          Workspace{});
      },
      "regression_loss: the Huber loss's delta 0.000000 is not a positive number");
  check_refused<ShapeError>(
      [&](Backend& b) {
        b.regression_loss(RegressionLoss::mse, 1.0f, outputs, Tensor{target.data(), Shape{2, 2}}, Tensor{}, nullptr,
                          loss_sum, correct, counted, Workspace{});
      },
      "regression_loss: outputs [2x3] and targets [2x2] differ in size");
  check_refused<ShapeError>(
      [&](Backend& b) {
        b.sigmoid_cross_entropy(outputs, targets, Tensor{}, 0.0f, Tensor{grad.data(), Shape{2, 2}}, &step, loss_sum,
                                correct, counted, Workspace{});
      },
      "sigmoid_cross_entropy: the gradient [2x2] is not the size of the output [2x3]");
  check_refused<ConfigError>(
      [&](Backend& b) {
        b.sigmoid_cross_entropy(outputs, targets, Tensor{}, 0.0f, Tensor{grad.data(), Shape{2, 3}}, nullptr, loss_sum,
                                correct, counted, Workspace{});
      },
      "sigmoid_cross_entropy: a gradient needs the step scalars");
  check_refused<ConfigError>(
      [&](Backend& b) {
        b.sigmoid_cross_entropy(outputs, targets, Tensor{sums.data(), Shape{2}}, 0.0f, Tensor{}, nullptr, loss_sum,
                                correct, counted, Workspace{});
      },
      "sigmoid_cross_entropy: 2 positive weights for 3 classes");
  check_refused<ShapeError>(
      [&](Backend& b) {
        b.sigmoid_cross_entropy(outputs, targets, Tensor{}, 0.0f, Tensor{}, nullptr, loss_sum, correct, Tensor{},
                                Workspace{});
      },
      "sigmoid_cross_entropy: the loss, accuracy and count sums need a float each");

  std::vector<std::uint8_t> masks(5);
  check_refused<ShapeError>(
      [&](Backend& b) {
        b.pixel_cross_entropy(Tensor{out.data(), Shape{1, 2, 1, 3}}, ByteTensor{masks.data(), masks.size()}, Tensor{},
                              Tensor{}, nullptr, loss_sum, correct, counted, Workspace{});
      },
      "pixel_cross_entropy: logits [1x2x1x3] and 5 mask bytes do not fit together");

  std::vector<std::int32_t> labels(2);
  check_refused<ConfigError>(
      [&](Backend& b) {
        b.softmax_cross_entropy(outputs, IntTensor{labels.data(), labels.size()}, 1.0f, Tensor{}, nullptr, loss_sum,
                                correct);
      },
      "softmax_cross_entropy: label smoothing 1.000000 is outside [0, 1)");
}

TEST_CASE("backend fronts: shapes that do not fit are refused before a backend runs the call", "[backend]") {
  std::vector<float> a(16), b(16), y(16), w(72);
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.copy_channels(Tensor{a.data(), Shape{1, 2, 2, 2}}, 1, Tensor{y.data(), Shape{1, 2, 2, 2}}, 0, 2, false);
      },
      "copy_channels: channels [1, +2) of [1x2x2x2] to channel 0 of [1x2x2x2] do not fit");
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.multiply(Tensor{a.data(), Shape{1, 2, 2, 2}}, Tensor{b.data(), Shape{1, 2, 2, 1}},
                    Tensor{y.data(), Shape{1, 2, 2, 2}});
      },
      "multiply: [1x2x2x1] is neither the shape of [1x2x2x2] nor one value per sample and channel");
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.multiply(Tensor{a.data(), Shape{1, 8}}, Tensor{b.data(), Shape{1, 8}}, Tensor{y.data(), Shape{1, 4}});
      },
      "multiply: output [1x4] is not [1x8]");
  check_refused<ConfigError>(
      [&](Backend& be) {
        be.upsample_forward(UpsampleDesc{0, UpsampleMode::nearest}, Tensor{a.data(), Shape{1, 1, 2, 2}},
                            Tensor{y.data(), Shape{1, 1, 2, 2}});
      },
      "upsample_forward: factor 0 is below 1");
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.upsample_backward(UpsampleDesc{2, UpsampleMode::nearest}, Tensor{y.data(), Shape{1, 1, 4, 2}},
                             Tensor{a.data(), Shape{1, 1, 2, 2}}, false);
      },
      "upsample_backward: [1x1x4x2] is not [1x1x2x2] upsampled by 2");
  check_refused<ConfigError>(
      [&](Backend& be) {
        be.pad_forward(PadDesc{0, 0, -1, 1, 0.0f}, Tensor{a.data(), Shape{1, 1, 2, 2}}, Tensor{y.data(), Shape{1, 1, 2, 2}});
      },
      "pad_forward: pads -1, 1, 0, 0 (left, right, top, bottom) must be 0 or more, and the value a number");
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.pad_backward(PadDesc{1, 0, 0, 0, 0.0f}, Tensor{y.data(), Shape{1, 1, 2, 2}},
                        Tensor{a.data(), Shape{1, 1, 2, 2}}, false);
      },
      "pad_backward: [1x1x2x2] is not [1x1x2x2] padded by 0, 0, 1, 0 (left, right, top, bottom)");
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.dense_forward(Tensor{a.data(), Shape{2, 4}}, Tensor{w.data(), Shape{3, 4}}, Tensor{},
                         Tensor{y.data(), Shape{2, 2}}, Workspace{});
      },
      "dense_forward: the weights [3x4] are not 2 x 4 values (out x in)");
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.dense_backward_weights(Tensor{a.data(), Shape{2, 4}}, Tensor{y.data(), Shape{3, 2}},
                                  Tensor{w.data(), Shape{2, 4}}, Tensor{}, Workspace{});
      },
      "dense_backward_weights: the input [2x4] and output [3x2] hold different numbers of samples");
  check_refused<ShapeError>(
      [&](Backend& be) { be.relu_forward(Tensor{a.data(), Shape{2, 8}}, Tensor{y.data(), Shape{2, 4}}); },
      "relu_forward: [2x8] and [2x4] differ in size");
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.batchnorm_forward_inference(Tensor{a.data(), Shape{2, 4, 2, 1}}, Tensor{b.data(), Shape{4}},
                                       Tensor{b.data(), Shape{4}}, Tensor{b.data(), Shape{3}},
                                       Tensor{b.data(), Shape{4}}, 1e-5f, Tensor{y.data(), Shape{2, 4, 2, 1}});
      },
      "batchnorm_forward_inference: [3] is not one value for each of [2x4x2x1]'s 4 channels");
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.batchnorm_backward(Tensor{a.data(), Shape{16}}, Tensor{y.data(), Shape{16}}, Tensor{b.data(), Shape{1}},
                              Tensor{b.data(), Shape{1}}, Tensor{b.data(), Shape{1}}, 1e-5f,
                              Tensor{w.data(), Shape{16}}, Tensor{b.data(), Shape{1}}, Tensor{b.data(), Shape{1}},
                              false);
      },
      "batchnorm_backward: [16] has no channels (BatchNorm takes [N, C, ...])");
  Conv2dDesc conv;  // 4 channels into 2, 3x3 padded by 1
  conv.in_channels = 4;
  conv.out_channels = 2;
  conv.kernel_h = conv.kernel_w = 3;
  conv.padding = 1;
  Conv2dDesc no_stride = conv;
  no_stride.stride = 0;
  check_refused<ConfigError>(
      [&](Backend& be) {
        be.conv2d_forward(no_stride, Tensor{a.data(), Shape{1, 4, 2, 2}}, Tensor{w.data(), Shape{2, 4, 3, 3}},
                          Tensor{}, Tensor{y.data(), Shape{1, 2, 2, 2}}, false, Workspace{});
      },
      "conv2d_forward: a 3x3 kernel at stride 0, padding 1, dilation 1, 1 groups and 2 output channels: kernels, "
      "strides and output channels must be 1 or more, padding 0 or more, and the output channels a multiple of the "
      "groups");
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.conv2d_forward(conv, Tensor{a.data(), Shape{1, 4, 2, 2}}, Tensor{w.data(), Shape{2, 4, 3, 3}}, Tensor{},
                          Tensor{y.data(), Shape{1, 2, 3, 2}}, false, Workspace{});
      },
      "conv2d_forward: [1x2x3x2] is not [1x4x2x2] convolved into 2 channels by a 3x3 kernel at stride 1, padding 1, "
      "dilation 1, 1 groups");
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.conv2d_backward_data(conv, Tensor{y.data(), Shape{1, 2, 2, 2}}, Tensor{w.data(), Shape{2, 4, 3, 2}},
                                Tensor{a.data(), Shape{1, 4, 2, 2}}, false, Workspace{});
      },
      "conv2d_backward_data: the weights [2x4x3x2] are not 72 values (out x in / groups x kernel)");
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.conv2d_backward_filter(conv, Tensor{a.data(), Shape{1, 4, 2, 2}}, Tensor{y.data(), Shape{1, 2, 2, 2}},
                                  Tensor{w.data(), Shape{2, 4, 3, 3}}, Tensor{b.data(), Shape{3}}, Workspace{});
      },
      "conv2d_backward_filter: the bias [3] is not one value for each of 2 output channels");
  Pool2dDesc stem;  // torchvision's ResNet stem: max 3x3 at stride 2, padded by 1
  stem.window_h = stem.window_w = 3;
  stem.pad_h = stem.pad_w = 1;
  Pool2dDesc padded_past = stem;
  padded_past.pad_w = 3;
  check_refused<ConfigError>(
      [&](Backend& be) {
        be.pool2d_forward(padded_past, Tensor{a.data(), Shape{1, 1, 4, 4}}, Tensor{y.data(), Shape{1, 1, 2, 2}});
      },
      "pool2d_forward: windows 3x3 at stride 2x2, padded by 1x3: windows and strides must be 1 or more, padding 0 or "
      "more and smaller than the window");
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.pool2d_forward(stem, Tensor{a.data(), Shape{1, 1, 4, 4}}, Tensor{y.data(), Shape{1, 1, 4, 2}});
      },
      "pool2d_forward: [1x1x4x2] is not [1x1x4x4] pooled by 3x3 windows at stride 2x2, padded by 1x1");
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.pool2d_backward(stem, Tensor{a.data(), Shape{1, 1, 4, 4}}, Tensor{y.data(), Shape{1, 1, 2, 2}},
                           Tensor{b.data(), Shape{1, 1, 2, 3}}, Tensor{a.data(), Shape{1, 1, 4, 4}}, false);
      },
      "pool2d_backward: [1x1x2x2] and [1x1x2x3] differ in size");
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.unscale_gradients(Tensor{a.data(), Shape{16}}, 0.5f, Tensor{b.data(), Shape{2}});
      },
      "unscale_gradients: `found` holds one float, not 2");
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.activation_forward(ActivationDesc{Activation::tanh}, Tensor{a.data(), Shape{2, 8}},
                              Tensor{y.data(), Shape{2, 4}});
      },
      "activation_forward: [2x8] and [2x4] differ in size");
  check_refused<ConfigError>(
      [&](Backend& be) { be.to_16bit(Tensor{a.data(), Shape{16}}, b.data(), ValueFormat::fp32); },
      "to_16bit: fp32 is not a 16-bit format");
}

TEST_CASE("backend fronts: synchronised BatchNorm's sums and counts are checked", "[backend]") {
  std::vector<float> x(16), y(16), c(4), sums(8);
  const Shape shape{2, 4, 2, 1};
  auto per_channel = [&](std::size_t n) { return Tensor{c.data(), Shape{static_cast<int>(n)}}; };
  check_refused<ShapeError>(
      [&](Backend& be) { be.batchnorm_channel_sums(Tensor{x.data(), shape}, Tensor{sums.data(), Shape{3}}); },
      "batchnorm_channel_sums: the sums [3] are not one value for each of [2x4x2x1]'s 4 channels");
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.batchnorm_centered_squares(Tensor{x.data(), shape}, per_channel(4), 8.0, Tensor{sums.data(), Shape{8}});
      },
      "batchnorm_centered_squares: the sums [8] are not one value for each of [2x4x2x1]'s 4 channels");
  for (const auto& [count, shown] : {std::pair{0.0, "0"}, std::pair{-3.0, "-3"}, std::pair{0.5, "0.5"},
                                     std::pair{std::numeric_limits<double>::quiet_NaN(), "nan"},
                                     std::pair{std::numeric_limits<double>::infinity(), "inf"}})
    check_refused<ConfigError>(
        [&](Backend& be) {
          be.batchnorm_centered_squares(Tensor{x.data(), shape}, per_channel(4), count, per_channel(4));
        },
        std::string("batchnorm_centered_squares: a count of ") + shown +
            " values a channel (every rank's N x H x W: 1 or more)");
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.batchnorm_forward_from_sums(Tensor{x.data(), shape}, per_channel(4), per_channel(4),
                                       Tensor{y.data(), shape}, per_channel(4), per_channel(3), 0.1f, 1e-5f, 4.0,
                                       per_channel(4), per_channel(4));
      },
      "batchnorm_forward_from_sums: [3] is not one value for each of [2x4x2x1]'s 4 channels");
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.batchnorm_backward_sums(Tensor{x.data(), shape}, Tensor{y.data(), shape}, per_channel(4), per_channel(4),
                                   Tensor{sums.data(), Shape{4}});
      },
      "batchnorm_backward_sums: the sums [4] are not 2 values for each of [2x4x2x1]'s 4 channels");
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.batchnorm_backward_from_sums(Tensor{x.data(), shape}, Tensor{y.data(), shape}, per_channel(4),
                                        per_channel(4), per_channel(4), Tensor{sums.data(), Shape{8}}, 4.0,
                                        Tensor{y.data(), Shape{2, 4}}, false);
      },
      "batchnorm_backward_from_sums: [2x4x2x1] and [2x4] differ in size");
}

TEST_CASE("backend fronts: a call that keeps the contract reaches the backend once", "[backend]") {
  CpuBackend cpu(1);
  CountingBackend forwarding(cpu);
  std::vector<float> a{1.f, 2.f, 3.f, 4.f}, gate{2.f}, y(4);
  forwarding.multiply(Tensor{a.data(), Shape{1, 1, 2, 2}}, Tensor{gate.data(), Shape{1, 1, 1, 1}},
                      Tensor{y.data(), Shape{1, 1, 2, 2}});
  CHECK(forwarding.calls == 1);
  CHECK(y == std::vector<float>{2.f, 4.f, 6.f, 8.f});
}

namespace {
Shape channels_last(Shape s) {
  s.channels_last = true;
  return s;
}
}  // namespace

TEST_CASE("backend fronts: channels-last images reach only the calls and backends that take them", "[backend]") {
  std::vector<float> a(64), b(64), y(64), w(64), sums(8);
  const Shape image = channels_last(Shape{1, 2, 2, 2});
  const Conv2dDesc conv{2, 2, 1, 1, 1, 0};
  // The CPU backend reads NCHW alone: its convolutions refuse the order, and say which backend did.
  const std::string cpu_description = CpuBackend(1).description();
  check_refused<ConfigError>(
      [&](Backend& be) {
        be.conv2d_forward(conv, Tensor{a.data(), image}, Tensor{w.data(), Shape{2, 2, 1, 1}}, Tensor{},
                          Tensor{y.data(), image}, false, Workspace{});
      },
      "conv2d_forward: [1x2x2x2, channels last] is channels last, and " + cpu_description +
          " takes images in NCHW order only");
  check_refused<ConfigError>(
      [&](Backend& be) { be.conv2d_workspace_bytes(conv, image, image, ConvPass::forward, 0); },
      "conv2d_workspace_bytes: [1x2x2x2, channels last] is channels last, and " + cpu_description +
          " takes images in NCHW order only");
  // Whatever the backend: x and y in one order, the weights never reordered.
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.conv2d_backward_data(conv, Tensor{y.data(), image}, Tensor{w.data(), Shape{2, 2, 1, 1}},
                                Tensor{a.data(), Shape{1, 2, 2, 2}}, false, Workspace{});
      },
      "conv2d_backward_data: [1x2x2x2] and [1x2x2x2, channels last] lie in different orders");
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.conv2d_backward_filter(conv, Tensor{a.data(), Shape{1, 2, 2, 2}}, Tensor{y.data(), Shape{1, 2, 2, 2}},
                                  Tensor{w.data(), channels_last(Shape{2, 2, 1, 1})}, Tensor{}, Workspace{});
      },
      "conv2d_backward_filter: the parameters [2x2x1x1, channels last] cannot be channels last (weights are [out, "
      "in, kh, kw] in every layout)");
  // BatchNorm and pooling take the order where the backend does; the CPU does not.
  check_refused<ConfigError>(
      [&](Backend& be) {
        be.pool2d_forward(Pool2dDesc{}, Tensor{a.data(), image}, Tensor{y.data(), channels_last(Shape{1, 2, 1, 1})});
      },
      "pool2d_forward: [1x2x2x2, channels last] is channels last, and " + cpu_description +
          " takes images in NCHW order only");
  check_refused<ConfigError>(
      [&](Backend& be) {
        be.batchnorm_forward_inference(Tensor{a.data(), image}, Tensor{b.data(), Shape{2}}, Tensor{b.data(), Shape{2}},
                                       Tensor{b.data(), Shape{2}}, Tensor{b.data(), Shape{2}}, 1e-5f,
                                       Tensor{y.data(), image});
      },
      "batchnorm_forward_inference: [1x2x2x2, channels last] is channels last, and " + cpu_description +
          " takes images in NCHW order only");
  // Calls that read NCHW refuse the order on every backend.
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.upsample_forward(UpsampleDesc{2, UpsampleMode::nearest}, Tensor{a.data(), image},
                            Tensor{y.data(), channels_last(Shape{1, 2, 4, 4})});
      },
      "upsample_forward: [1x2x2x2, channels last] is channels last; this call takes images in NCHW order");
  check_refused<ShapeError>(
      [&](Backend& be) { be.batchnorm_channel_sums(Tensor{a.data(), image}, Tensor{sums.data(), Shape{2}}); },
      "batchnorm_channel_sums: [1x2x2x2, channels last] is channels last; this call takes images in NCHW order");
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.dense_forward(Tensor{a.data(), image}, Tensor{w.data(), Shape{3, 8}}, Tensor{},
                         Tensor{y.data(), Shape{1, 3}}, Workspace{});
      },
      "dense_forward: [1x2x2x2, channels last] is channels last; this call takes images in NCHW order");
  // Element-wise calls take either order, the same for all their tensors.
  check_refused<ShapeError>(
      [&](Backend& be) { be.relu_forward(Tensor{a.data(), image}, Tensor{y.data(), Shape{1, 2, 2, 2}}); },
      "relu_forward: [1x2x2x2, channels last] and [1x2x2x2] lie in different orders");
  check_refused<ShapeError>(
      [&](Backend& be) {
        be.add(Tensor{a.data(), image}, Tensor{b.data(), image}, Tensor{y.data(), Shape{1, 2, 2, 2}});
      },
      "add: [1x2x2x2, channels last] and [1x2x2x2] lie in different orders");

  CpuBackend cpu(1);
  CountingBackend forwarding(cpu);
  std::vector<float> x{-1.f, 2.f, -3.f, 4.f, 5.f, -6.f, 7.f, -8.f};
  forwarding.relu_forward(Tensor{x.data(), image}, Tensor{y.data(), image});
  CHECK(forwarding.calls == 1);
  CHECK(std::vector<float>(y.begin(), y.begin() + 8) == std::vector<float>{0.f, 2.f, 0.f, 4.f, 5.f, 0.f, 7.f, 0.f});
  // [N, C, 1, 1] lies the same way in either order: a dense layer after a global pooling takes it.
  const Shape pooled = channels_last(Shape{1, 2, 1, 1});
  std::vector<float> features{1.f, 2.f}, weights{1.f, 1.f, 2.f, -1.f}, out(2);
  alignas(64) std::byte scratch[1 << 14];
  REQUIRE(forwarding.dense_workspace_bytes(pooled, 2, ConvPass::forward) <= sizeof scratch);
  forwarding.dense_forward(Tensor{features.data(), pooled}, Tensor{weights.data(), Shape{2, 2}}, Tensor{},
                           Tensor{out.data(), Shape{1, 2}}, Workspace{scratch, sizeof scratch});
  CHECK(forwarding.calls == 2);
  CHECK(out == std::vector<float>{3.f, 0.f});
  CHECK(Shape{1, 2, 2, 2} != image);
}
