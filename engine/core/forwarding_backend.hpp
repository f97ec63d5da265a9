#pragma once
// A Backend that hands every call to another one: the base of a wrapper that watches calls
// (tests/engine/recording_backend.hpp records them, benchmarks/cpu_profile/timing_backend.hpp
// times them). Every call that computes or copies passes through run(), so a wrapper overrides
// run() to watch them all, and a call of its own only to look at that call's arguments. A new
// Backend method is added here once; no wrapper changes.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>

#include "engine/core/backend.hpp"

namespace cnn {

// One call on its way to the inner backend.
struct BackendCall {
  const char* name = "";            // the Backend method's: "conv2d_forward"
  std::span<const Tensor> outputs;  // the tensors it writes; valid during run() only
  // A copy between host and device memory (copy_to_device, copy_to_host and their _async forms):
  // run() must do it before it returns, never keep it for later.
  bool host_transfer = false;
};

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(Backend& inner) : inner_(inner) {}

  DeviceKind kind() const override { return inner_.kind(); }
  std::string description() const override { return inner_.description(); }
  Precision precision() const override { return inner_.precision(); }
  bool takes_packed_values() const override { return inner_.takes_packed_values(); }
  memory::MemoryResource& device_memory() override { return inner_.device_memory(); }
  memory::MemoryResource& staging_memory() override { return inner_.staging_memory(); }
  std::size_t library_reserved_bytes() const override { return inner_.library_reserved_bytes(); }
  std::size_t available_memory() const override { return inner_.available_memory(); }
  std::size_t largest_tensor_elements() const override { return inner_.largest_tensor_elements(); }
  ComputeRates compute_rates() const override { return inner_.compute_rates(); }
  std::string determinism_report() const override { return inner_.determinism_report(); }

  void copy_to_device(const void* host, void* device, std::size_t bytes) override {
    transfer("copy_to_device", [&] { inner_.copy_to_device(host, device, bytes); });
  }
  void copy_to_host(const void* device, void* host, std::size_t bytes) override {
    transfer("copy_to_host", [&] { inner_.copy_to_host(device, host, bytes); });
  }
  void fill(Tensor t, float value) override {
    call("fill", {t}, [=, this] { inner_.fill(t, value); });
  }
  void synchronize() override { inner_.synchronize(); }

  bool copies_overlap_compute() const override { return inner_.copies_overlap_compute(); }
  Fence copy_to_device_async(const void* host, void* device, std::size_t bytes) override {
    Fence fence;
    transfer("copy_to_device_async", [&] { fence = inner_.copy_to_device_async(host, device, bytes); });
    return fence;
  }
  Fence copy_to_host_async(const void* device, void* host, std::size_t bytes) override {
    Fence fence;
    transfer("copy_to_host_async", [&] { fence = inner_.copy_to_host_async(device, host, bytes); });
    return fence;
  }
  bool reached(Fence fence) override { return inner_.reached(fence); }
  void wait(Fence fence) override { inner_.wait(fence); }
  void copy_on_device(const void* src, void* dst, std::size_t bytes) override {
    call("copy_on_device", {}, [=, this] { inner_.copy_on_device(src, dst, bytes); });
  }
  void to_16bit(const Tensor& x, void* packed, ValueFormat format) override {
    call("to_16bit", {}, [=, this] { inner_.to_16bit(x, packed, format); });
  }
  void from_16bit(const void* packed, Tensor x, ValueFormat format) override {
    call("from_16bit", {x}, [=, this] { inner_.from_16bit(packed, x, format); });
  }

  std::size_t conv2d_workspace_bytes(const Conv2dDesc& d, const Shape& x, const Shape& y, ConvPass pass,
                                     std::size_t limit) override {
    return inner_.conv2d_workspace_bytes(d, x, y, pass, limit);
  }
  void conv2d_forward(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,
                      bool accumulate, Workspace ws) override {
    call("conv2d_forward", {y}, [=, this] { inner_.conv2d_forward(d, x, w, bias, y, accumulate, ws); });
  }
  void conv2d_backward_data(const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor dx, bool accumulate,
                            Workspace ws) override {
    call("conv2d_backward_data", {dx}, [=, this] { inner_.conv2d_backward_data(d, dy, w, dx, accumulate, ws); });
  }
  void conv2d_backward_filter(const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor dw, Tensor dbias,
                              Workspace ws) override {
    call("conv2d_backward_filter", {dw, dbias}, [=, this] { inner_.conv2d_backward_filter(d, x, dy, dw, dbias, ws); });
  }

  std::size_t dense_workspace_bytes(const Shape& x, int out, ConvPass pass) override {
    return inner_.dense_workspace_bytes(x, out, pass);
  }
  void dense_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y, Workspace ws) override {
    call("dense_forward", {y}, [=, this] { inner_.dense_forward(x, w, bias, y, ws); });
  }
  void dense_backward_data(const Tensor& dy, const Tensor& w, Tensor dx, bool accumulate, Workspace ws) override {
    call("dense_backward_data", {dx}, [=, this] { inner_.dense_backward_data(dy, w, dx, accumulate, ws); });
  }
  void dense_backward_weights(const Tensor& x, const Tensor& dy, Tensor dw, Tensor dbias, Workspace ws) override {
    call("dense_backward_weights", {dw, dbias}, [=, this] { inner_.dense_backward_weights(x, dy, dw, dbias, ws); });
  }

  void relu_forward(const Tensor& x, Tensor y) override {
    call("relu_forward", {y}, [=, this] { inner_.relu_forward(x, y); });
  }
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor dx, bool accumulate) override {
    call("relu_backward", {dx}, [=, this] { inner_.relu_backward(y, dy, dx, accumulate); });
  }
  void activation_forward(const ActivationDesc& d, const Tensor& x, Tensor y) override {
    call("activation_forward", {y}, [=, this] { inner_.activation_forward(d, x, y); });
  }
  void activation_backward(const ActivationDesc& d, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor dx,
                           bool accumulate) override {
    call("activation_backward", {dx}, [=, this] { inner_.activation_backward(d, x, y, dy, dx, accumulate); });
  }
  void pool2d_forward(const Pool2dDesc& d, const Tensor& x, Tensor y) override {
    call("pool2d_forward", {y}, [=, this] { inner_.pool2d_forward(d, x, y); });
  }
  void pool2d_backward(const Pool2dDesc& d, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor dx,
                       bool accumulate) override {
    call("pool2d_backward", {dx}, [=, this] { inner_.pool2d_backward(d, x, y, dy, dx, accumulate); });
  }

  void batchnorm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                  Tensor running_mean, Tensor running_var, float momentum, float epsilon,
                                  Tensor saved_mean, Tensor saved_inv_std) override {
    call("batchnorm_forward_training", {y, running_mean, running_var, saved_mean, saved_inv_std}, [=, this] {
      inner_.batchnorm_forward_training(x, gamma, beta, y, running_mean, running_var, momentum, epsilon, saved_mean,
                                        saved_inv_std);
    });
  }
  void batchnorm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   const Tensor& running_mean, const Tensor& running_var, float epsilon,
                                   Tensor y) override {
    call("batchnorm_forward_inference", {y},
         [=, this] { inner_.batchnorm_forward_inference(x, gamma, beta, running_mean, running_var, epsilon, y); });
  }
  void batchnorm_forward_saved(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& saved_mean,
                               const Tensor& saved_inv_std, Tensor y) override {
    call("batchnorm_forward_saved", {y},
         [=, this] { inner_.batchnorm_forward_saved(x, gamma, beta, saved_mean, saved_inv_std, y); });
  }
  void batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& saved_mean,
                          const Tensor& saved_inv_std, float epsilon, Tensor dx, Tensor dgamma, Tensor dbeta,
                          bool accumulate) override {
    call("batchnorm_backward", {dx, dgamma, dbeta}, [=, this] {
      inner_.batchnorm_backward(x, dy, gamma, saved_mean, saved_inv_std, epsilon, dx, dgamma, dbeta, accumulate);
    });
  }
  void batchnorm_channel_sums(const Tensor& x, Tensor sums) override {
    call("batchnorm_channel_sums", {sums}, [=, this] { inner_.batchnorm_channel_sums(x, sums); });
  }
  void batchnorm_centered_squares(const Tensor& x, const Tensor& sums, double count, Tensor out) override {
    call("batchnorm_centered_squares", {out}, [=, this] { inner_.batchnorm_centered_squares(x, sums, count, out); });
  }
  void batchnorm_forward_from_sums(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                   Tensor running_mean, Tensor running_var, float momentum, float epsilon,
                                   double count, Tensor saved_mean, Tensor saved_inv_std) override {
    call("batchnorm_forward_from_sums", {y, running_mean, running_var, saved_mean, saved_inv_std}, [=, this] {
      inner_.batchnorm_forward_from_sums(x, gamma, beta, y, running_mean, running_var, momentum, epsilon, count,
                                         saved_mean, saved_inv_std);
    });
  }
  void batchnorm_backward_sums(const Tensor& x, const Tensor& dy, const Tensor& saved_mean,
                               const Tensor& saved_inv_std, Tensor sums) override {
    call("batchnorm_backward_sums", {sums},
         [=, this] { inner_.batchnorm_backward_sums(x, dy, saved_mean, saved_inv_std, sums); });
  }
  void batchnorm_backward_from_sums(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                    const Tensor& saved_mean, const Tensor& saved_inv_std, const Tensor& sums,
                                    double count, Tensor dx, bool accumulate) override {
    call("batchnorm_backward_from_sums", {dx}, [=, this] {
      inner_.batchnorm_backward_from_sums(x, dy, gamma, saved_mean, saved_inv_std, sums, count, dx, accumulate);
    });
  }

  void dropout_forward(const Tensor& x, Tensor y, Tensor mask, float p, const StepScalars* step,
                       std::uint64_t layer) override {
    call("dropout_forward", {y, mask}, [=, this] { inner_.dropout_forward(x, y, mask, p, step, layer); });
  }
  void dropout_backward(const Tensor& dy, const Tensor& mask, Tensor dx, bool accumulate) override {
    call("dropout_backward", {dx}, [=, this] { inner_.dropout_backward(dy, mask, dx, accumulate); });
  }
  void add(const Tensor& a, const Tensor& b, Tensor y) override {
    call("add", {y}, [=, this] { inner_.add(a, b, y); });
  }
  void copy_or_add(const Tensor& src, Tensor dst, bool accumulate) override {
    call("copy_or_add", {dst}, [=, this] { inner_.copy_or_add(src, dst, accumulate); });
  }
  void copy_channels(const Tensor& from, int from_channel, Tensor to, int to_channel, int channels,
                     bool accumulate) override {
    call("copy_channels", {to},
         [=, this] { inner_.copy_channels(from, from_channel, to, to_channel, channels, accumulate); });
  }
  void multiply(const Tensor& a, const Tensor& b, Tensor y) override {
    call("multiply", {y}, [=, this] { inner_.multiply(a, b, y); });
  }
  void multiply_backward(const Tensor& a, const Tensor& b, const Tensor& dy, Tensor da, bool accumulate_a, Tensor db,
                         bool accumulate_b) override {
    call("multiply_backward", {da, db},
         [=, this] { inner_.multiply_backward(a, b, dy, da, accumulate_a, db, accumulate_b); });
  }
  void add_channel_bias(const Tensor& bias, Tensor y) override {
    call("add_channel_bias", {y}, [=, this] { inner_.add_channel_bias(bias, y); });
  }
  void channel_bias_backward(const Tensor& dy, Tensor dbias) override {
    call("channel_bias_backward", {dbias}, [=, this] { inner_.channel_bias_backward(dy, dbias); });
  }
  void upsample_forward(const UpsampleDesc& d, const Tensor& x, Tensor y) override {
    call("upsample_forward", {y}, [=, this] { inner_.upsample_forward(d, x, y); });
  }
  void upsample_backward(const UpsampleDesc& d, const Tensor& dy, Tensor dx, bool accumulate) override {
    call("upsample_backward", {dx}, [=, this] { inner_.upsample_backward(d, dy, dx, accumulate); });
  }
  void group_norm_forward(const GroupNormDesc& d, const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                          Tensor saved_mean, Tensor saved_inv_std) override {
    call("group_norm_forward", {y, saved_mean, saved_inv_std},
         [=, this] { inner_.group_norm_forward(d, x, gamma, beta, y, saved_mean, saved_inv_std); });
  }
  void group_norm_backward(const GroupNormDesc& d, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                           const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor dx, bool accumulate,
                           Tensor dgamma, Tensor dbeta, Workspace ws) override {
    call("group_norm_backward", {dx, dgamma, dbeta}, [=, this] {
      inner_.group_norm_backward(d, x, dy, gamma, saved_mean, saved_inv_std, dx, accumulate, dgamma, dbeta, ws);
    });
  }
  std::size_t group_norm_workspace_bytes(const GroupNormDesc& d, const Shape& x) override {
    return inner_.group_norm_workspace_bytes(d, x);
  }
  void softmax_cross_entropy(const Tensor& logits, const IntTensor& labels, float label_smoothing, Tensor dlogits, const StepScalars* step,
                             Tensor loss_sum, Tensor correct) override {
    call("softmax_cross_entropy", {dlogits, loss_sum, correct},
         [=, this] { inner_.softmax_cross_entropy(logits, labels, label_smoothing, dlogits, step, loss_sum, correct); });
  }
  void pixel_cross_entropy(const Tensor& logits, const ByteTensor& masks, const Tensor& class_weights, Tensor dlogits,
                           const StepScalars* step, Tensor loss_sum, Tensor correct, Tensor counted, Workspace ws) override {
    call("pixel_cross_entropy", {dlogits, loss_sum, correct, counted}, [=, this] {
      inner_.pixel_cross_entropy(logits, masks, class_weights, dlogits, step, loss_sum, correct, counted, ws);
    });
  }
  void sigmoid_cross_entropy(const Tensor& logits, const Tensor& targets, const Tensor& positive_weights,
                             float threshold_logit, Tensor dlogits, const StepScalars* step, Tensor loss_sum,
                             Tensor correct, Tensor counted, Workspace ws) override {
    call("sigmoid_cross_entropy", {dlogits, loss_sum, correct, counted}, [=, this] {
      inner_.sigmoid_cross_entropy(logits, targets, positive_weights, threshold_logit, dlogits, step, loss_sum, correct,
                                   counted, ws);
    });
  }
  void regression_loss(RegressionLoss kind, float delta, const Tensor& outputs, const Tensor& targets,
                       Tensor doutputs, const StepScalars* step, Tensor loss_sum, Tensor correct,
                       Tensor counted, Workspace ws) override {
    call("regression_loss", {doutputs, loss_sum, correct, counted}, [=, this] {
      inner_.regression_loss(kind, delta, outputs, targets, doutputs, step, loss_sum, correct, counted, ws);
    });
  }
  std::size_t loss_workspace_bytes(Task task, const Shape& output) override {
    return inner_.loss_workspace_bytes(task, output);
  }
  void sgd_update(Tensor params, const Tensor& grads, Tensor velocity, const SgdConfig& config, float learning_rate,
                  const float* guard) override {
    call("sgd_update", {params, velocity},
         [=, this] { inner_.sgd_update(params, grads, velocity, config, learning_rate, guard); });
  }
  void adamw_update(Tensor params, const Tensor& grads, Tensor m, Tensor v, const AdamWConfig& config,
                    float learning_rate, long step, const float* guard) override {
    call("adamw_update", {params, m, v},
         [=, this] { inner_.adamw_update(params, grads, m, v, config, learning_rate, step, guard); });
  }

  void unscale_gradients(Tensor grads, float inverse_scale, Tensor found) override {
    call("unscale_gradients", {grads, found}, [=, this] { inner_.unscale_gradients(grads, inverse_scale, found); });
  }

  std::string capture_support() const override { return inner_.capture_support(); }
  void begin_capture() override { inner_.begin_capture(); }
  std::unique_ptr<CapturedCalls> end_capture() override { return inner_.end_capture(); }
  void abort_capture() noexcept override { inner_.abort_capture(); }

 protected:
  // Where every call that computes or copies goes: `work` makes it on the inner backend. A
  // compute call's work holds its arguments by value and may be kept and run later (a recording);
  // a host transfer's must run before run() returns.
  virtual void run(const BackendCall& /*call*/, const std::function<void()>& work) { work(); }

  Backend& inner() { return inner_; }
  const Backend& inner() const { return inner_; }

 private:
  void call(const char* name, std::initializer_list<Tensor> outputs, const std::function<void()>& work) {
    run(BackendCall{name, std::span<const Tensor>(outputs.begin(), outputs.size()), false}, work);
  }
  void transfer(const char* name, const std::function<void()>& work) { run(BackendCall{name, {}, true}, work); }

  Backend& inner_;
};

}  // namespace cnn
