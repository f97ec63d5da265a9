// Channels-last images (Note [Channels-last images], tensor.hpp): which training steps keep their
// images channels last (a backend that takes them, every layer taking them, the network input
// read only by convolutions or alike in either order, an output alike in either order; never
// inference), what the layers' workspace queries are told, and that training so gives the NCHW
// run's bits: through a CPU backend that takes channels-last images by putting them in NCHW
// order around each call (ChannelsLastCpu).
#include <catch2/catch.hpp>

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "engine/core/forwarding_backend.hpp"
#include "engine/plan/detail/step_plan.hpp"
#include <cnnengine/engine/train/trainer.hpp>
#include "memory/host_resource.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/channels_last_order.hpp"
#include "tests/engine/test_networks.hpp"

using namespace cnn;
using cnn::testing::channels_last_index;

namespace {

constexpr int kClasses = 4, kBatch = 8, kSteps = 3;

bool reordered(const Shape& s) { return s.channels_last && s.rank == 4 && !one_order(Shape{s[1], s[2], s[3]}); }

// The images of one call in NCHW order: each channels-last tensor handed over is pointed at an
// NCHW copy of its values (one copy a buffer, so tensors that share one still do), and the
// outputs' copies are put back in channels-last order when it goes.
class InNchw {
 public:
  InNchw(std::initializer_list<Tensor*> images, std::initializer_list<const Tensor*> outputs) {
    for (Tensor* t : images) {
      const bool reorder = !t->empty() && reordered(t->shape);
      t->shape.channels_last = false;  // lies alike either way where it is not reordered
      if (!reorder) continue;
      auto [copy, fresh] = copies_.try_emplace(t->data);
      if (fresh) {
        copy->second.resize(t->elements());
        for (std::size_t i = 0; i < t->elements(); ++i) copy->second[i] = t->data[channels_last_index(t->shape, i)];
        shapes_[t->data] = t->shape;
      }
      for (const Tensor* out : outputs)
        if (out == t) written_.push_back(t->data);
      t->data = copy->second.data();
    }
  }
  InNchw(const InNchw&) = delete;
  InNchw& operator=(const InNchw&) = delete;
  ~InNchw() {
    for (float* data : written_) {
      const std::vector<float>& copy = copies_.at(data);
      const Shape& shape = shapes_.at(data);
      for (std::size_t i = 0; i < copy.size(); ++i) data[channels_last_index(shape, i)] = copy[i];
    }
  }
  bool any() const { return !copies_.empty(); }

 private:
  std::map<float*, std::vector<float>> copies_;
  std::map<float*, Shape> shapes_;
  std::vector<float*> written_;
};

// A CPU backend that takes channels-last images (Backend::takes_channels_last) in the calls that
// may get them, each computed in NCHW order as the CPU computes it; it counts the calls that got
// some.
class ChannelsLastCpu final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  bool takes_channels_last() const override { return true; }
  int reordered_calls = 0;

 protected:
  std::size_t do_conv2d_workspace_bytes(const Conv2dDesc& desc, const Shape& x, const Shape& y, ConvPass pass,
                                        std::size_t limit) override {
    Shape xs = x, ys = y;
    xs.channels_last = ys.channels_last = false;
    return ForwardingBackend::do_conv2d_workspace_bytes(desc, xs, ys, pass, limit);
  }
  void do_conv2d_forward(const Conv2dDesc& desc, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,
                         bool accumulate, Workspace ws) override {
    Tensor xs = x;
    const InNchw order({&xs, &y}, {&y});
    counted(order);
    ForwardingBackend::do_conv2d_forward(desc, xs, w, bias, y, accumulate, ws);
  }
  void do_conv2d_backward_data(const Conv2dDesc& desc, const Tensor& dy, const Tensor& w, Tensor dx, bool accumulate,
                               Workspace ws) override {
    Tensor dys = dy;
    const InNchw order({&dys, &dx}, {&dx});
    counted(order);
    ForwardingBackend::do_conv2d_backward_data(desc, dys, w, dx, accumulate, ws);
  }
  void do_conv2d_backward_filter(const Conv2dDesc& desc, const Tensor& x, const Tensor& dy, Tensor dw, Tensor dbias,
                                 Workspace ws) override {
    Tensor xs = x, dys = dy;
    const InNchw order({&xs, &dys}, {});
    counted(order);
    ForwardingBackend::do_conv2d_backward_filter(desc, xs, dys, dw, dbias, ws);
  }
  void do_batchnorm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                     Tensor running_mean, Tensor running_var, float momentum, float epsilon,
                                     Tensor saved_mean, Tensor saved_inv_std) override {
    Tensor xs = x;
    const InNchw order({&xs, &y}, {&y});
    counted(order);
    ForwardingBackend::do_batchnorm_forward_training(xs, gamma, beta, y, running_mean, running_var, momentum, epsilon,
                                                     saved_mean, saved_inv_std);
  }
  void do_batchnorm_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                          Tensor running_mean, Tensor running_var, float momentum, float epsilon,
                                          Tensor saved_mean, Tensor saved_inv_std) override {
    Tensor xs = x;
    const InNchw order({&xs, &y}, {&y});
    counted(order);
    ForwardingBackend::do_batchnorm_relu_forward_training(xs, gamma, beta, y, running_mean, running_var, momentum,
                                                          epsilon, saved_mean, saved_inv_std);
  }
  void do_batchnorm_add_relu_forward_training(const Tensor& x, const Tensor& residual, const Tensor& gamma,
                                              const Tensor& beta, Tensor y, Tensor running_mean, Tensor running_var,
                                              float momentum, float epsilon, Tensor saved_mean,
                                              Tensor saved_inv_std) override {
    Tensor xs = x, rs = residual;
    const InNchw order({&xs, &rs, &y}, {&y});
    counted(order);
    ForwardingBackend::do_batchnorm_add_relu_forward_training(xs, rs, gamma, beta, y, running_mean, running_var,
                                                              momentum, epsilon, saved_mean, saved_inv_std);
  }
  void do_batchnorm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                      const Tensor& running_mean, const Tensor& running_var, float epsilon,
                                      Tensor y) override {
    Tensor xs = x;
    const InNchw order({&xs, &y}, {&y});
    counted(order);
    ForwardingBackend::do_batchnorm_forward_inference(xs, gamma, beta, running_mean, running_var, epsilon, y);
  }
  void do_batchnorm_forward_saved(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& saved_mean,
                                  const Tensor& saved_inv_std, Tensor y) override {
    Tensor xs = x;
    const InNchw order({&xs, &y}, {&y});
    counted(order);
    ForwardingBackend::do_batchnorm_forward_saved(xs, gamma, beta, saved_mean, saved_inv_std, y);
  }
  void do_batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& saved_mean,
                             const Tensor& saved_inv_std, float epsilon, Tensor dx, Tensor dgamma, Tensor dbeta,
                             bool accumulate) override {
    Tensor xs = x, dys = dy;
    const InNchw order({&xs, &dys, &dx}, {&dx});
    counted(order);
    ForwardingBackend::do_batchnorm_backward(xs, dys, gamma, saved_mean, saved_inv_std, epsilon, dx, dgamma, dbeta,
                                             accumulate);
  }
  void do_batchnorm_relu_backward(const Tensor& x, const Tensor& y, Tensor dy, const Tensor& gamma,
                                  const Tensor& saved_mean, const Tensor& saved_inv_std, float epsilon, Tensor dx,
                                  Tensor dgamma, Tensor dbeta, bool accumulate) override {
    Tensor xs = x, ys = y;
    const InNchw order({&xs, &ys, &dy, &dx}, {&dy, &dx});
    counted(order);
    ForwardingBackend::do_batchnorm_relu_backward(xs, ys, dy, gamma, saved_mean, saved_inv_std, epsilon, dx, dgamma,
                                                  dbeta, accumulate);
  }
  void do_batchnorm_add_relu_backward(const Tensor& x, const Tensor& y, Tensor dy, const Tensor& gamma,
                                      const Tensor& saved_mean, const Tensor& saved_inv_std, float epsilon, Tensor dx,
                                      Tensor dgamma, Tensor dbeta, bool accumulate, Tensor dresidual,
                                      bool accumulate_residual) override {
    Tensor xs = x, ys = y;
    const InNchw order({&xs, &ys, &dy, &dx, &dresidual}, {&dy, &dx, &dresidual});
    counted(order);
    ForwardingBackend::do_batchnorm_add_relu_backward(xs, ys, dy, gamma, saved_mean, saved_inv_std, epsilon, dx,
                                                      dgamma, dbeta, accumulate, dresidual, accumulate_residual);
  }
  void do_pool2d_forward(const Pool2dDesc& desc, const Tensor& x, Tensor y) override {
    Tensor xs = x;
    const InNchw order({&xs, &y}, {&y});
    counted(order);
    ForwardingBackend::do_pool2d_forward(desc, xs, y);
  }
  void do_pool2d_backward(const Pool2dDesc& desc, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor dx,
                          bool accumulate) override {
    Tensor xs = x, ys = y, dys = dy;
    const InNchw order({&xs, &ys, &dys, &dx}, {&dx});
    counted(order);
    ForwardingBackend::do_pool2d_backward(desc, xs, ys, dys, dx, accumulate);
  }

 private:
  void counted(const InNchw& order) {
    if (order.any()) ++reordered_calls;
  }
};

const Shape kImage{3, 8, 8};

// Two residual blocks with BatchNorm (one through a 1x1 shortcut), max pooling, a global average
// pooling and a dense layer: every layer takes channels-last images.
const char* const kResidual =
    "conv 8 3 pad=1 bias=0\nbatchnorm\nrelu as=a\nconv 8 3 pad=1 bias=0\nbatchnorm\nadd a\nrelu as=b\n"
    "maxpool 2\nconv 16 3 pad=1 bias=0\nbatchnorm\nrelu\nconv 16 3 pad=1 bias=0\nbatchnorm as=m\n"
    "conv 16 1 stride=2 bias=0 in=b\nbatchnorm\nadd m\nrelu\nconv 16 3 pad=1\nglobalavgpool\nflatten\ndense 4\n";

StepNeeds needs_of(Network& net, Backend& backend, bool training = true) {
  return step_needs(net, backend, 4, training, std::size_t{64} << 20);
}

struct Run {
  std::vector<float> losses, parameters;
};

Run train(const std::string& model, const Shape& image, Backend& backend, RecomputePolicy recompute) {
  Network net = parse_network(model, image, kClasses);
  TrainerOptions options = testing::constant_sgd(kBatch);
  options.micro_batch = kBatch / 2;
  options.seed = 11;
  options.recompute = recompute;
  Trainer trainer(net, backend, memory::host_resource(), options);
  const testing::SyntheticData data(kSteps * kBatch, image, kClasses, 29);
  Run run;
  for (int s = 0; s < kSteps; ++s) run.losses.push_back(trainer.train_step(data.batch(s * kBatch, kBatch)).loss);
  run.parameters = trainer.parameters().download();
  return run;
}

}  // namespace

TEST_CASE("a training step keeps its images channels last where the backend and every layer take them",
          "[plan][channels_last]") {
  CpuBackend cpu(1);
  ChannelsLastCpu channels_last(cpu);
  ForwardingBackend nchw(cpu);
  Network net = parse_network(kResidual, kImage, kClasses);
  CHECK(needs_of(net, channels_last).channels_last);
  CHECK(plan_step(net, needs_of(net, channels_last)).channels_last);
  CHECK_FALSE(needs_of(net, nchw).channels_last);                  // the CPU reads NCHW
  CHECK_FALSE(needs_of(net, channels_last, false).channels_last);  // inference keeps NCHW

  // A layer whose calls read NCHW; a flattening of a 4x4 image (its pixels would come in another
  // order); a BatchNorm reading the network's 3-channel input, which stays as staged (NCHW).
  for (const char* text : {"conv 8 3 pad=1\nupsample 2\nglobalavgpool\nflatten\ndense 4\n",
                           "conv 8 3 pad=1\nmaxpool 2\nflatten\ndense 4\n",
                           "batchnorm\nconv 8 3 pad=1\nglobalavgpool\nflatten\ndense 4\n"}) {
    INFO(text);
    Network other = parse_network(text, kImage, kClasses);
    CHECK_FALSE(needs_of(other, channels_last).channels_last);
  }
  // A one-channel input lies alike in either order: any layer may read it.
  Network gray = parse_network("batchnorm\nconv 8 3 pad=1\nglobalavgpool\nflatten\ndense 4\n", Shape{1, 8, 8},
                               kClasses);
  CHECK(needs_of(gray, channels_last).channels_last);
}

TEST_CASE("training on channels-last images gives the NCHW run's bits", "[plan][channels_last]") {
  for (RecomputePolicy recompute : {RecomputePolicy::none, RecomputePolicy::cheap}) {
    INFO("recompute " << static_cast<int>(recompute));
    CpuBackend cpu(1);
    ChannelsLastCpu channels_last(cpu);
    ForwardingBackend nchw(cpu);
    const Run expected = train(kResidual, kImage, nchw, recompute);
    const Run run = train(kResidual, kImage, channels_last, recompute);
    CHECK(channels_last.reordered_calls > 0);
    CHECK(run.losses == expected.losses);
    CHECK(run.parameters == expected.parameters);
  }
  // The one-channel input read by a BatchNorm as it lies.
  CpuBackend cpu(1);
  ChannelsLastCpu channels_last(cpu);
  ForwardingBackend nchw(cpu);
  const char* const gray = "batchnorm\nconv 8 3 pad=1\nrelu\nglobalavgpool\nflatten\ndense 4\n";
  const Run expected = train(gray, Shape{1, 8, 8}, nchw, RecomputePolicy::none);
  const Run run = train(gray, Shape{1, 8, 8}, channels_last, RecomputePolicy::none);
  CHECK(channels_last.reordered_calls > 0);
  CHECK(run.losses == expected.losses);
  CHECK(run.parameters == expected.parameters);
}
