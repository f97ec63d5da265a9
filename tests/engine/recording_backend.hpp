#pragma once
// A CPU backend that captures as CUDA graphs do: between begin_capture and end_capture each
// compute call is recorded, with its tensors by address and every other argument by value, and
// runs only when replayed; copies and synchronisation while capturing are refused. Training
// with it must give the eager run's results to the bit: a per-step value that reached a kernel
// as an argument instead of through device memory would be replayed stale and show.
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"

namespace cnn::testing {

class RecordingBackend final : public Backend {
 public:
  explicit RecordingBackend(int threads) : cpu_(threads) {}

  // The n-th recorded call of the next capture throws (n >= 1; 0: none), as a library call
  // that cannot be captured would.
  void fail_next_capture_at(int call) { fail_at_ = call; }

  DeviceKind kind() const override { return DeviceKind::cpu; }
  std::string description() const override { return "recording " + cpu_.description(); }
  memory::MemoryResource& device_memory() override { return cpu_.device_memory(); }
  memory::MemoryResource& staging_memory() override { return cpu_.staging_memory(); }
  ComputeRates compute_rates() const override { return cpu_.compute_rates(); }

  void copy_to_device(const void* host, void* device, std::size_t bytes) override {
    refuse("copy_to_device");
    cpu_.copy_to_device(host, device, bytes);
  }
  void copy_to_host(const void* device, void* host, std::size_t bytes) override {
    refuse("copy_to_host");
    cpu_.copy_to_host(device, host, bytes);
  }
  void synchronize() override { refuse("synchronize"); }
  void copy_on_device(const void* src, void* dst, std::size_t bytes) override {
    call([=, this] { cpu_.copy_on_device(src, dst, bytes); });
  }
  void fill(Tensor t, float value) override {
    call([=, this] { cpu_.fill(t, value); });
  }

  std::size_t conv2d_workspace_bytes(const Conv2dDesc& d, const Shape& x, const Shape& y, ConvPass pass,
                                     std::size_t limit) override {
    return cpu_.conv2d_workspace_bytes(d, x, y, pass, limit);
  }
  void conv2d_forward(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,
                      Workspace ws) override {
    call([=, this] { cpu_.conv2d_forward(d, x, w, bias, y, ws); });
  }
  void conv2d_backward_data(const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor dx, bool accumulate,
                            Workspace ws) override {
    call([=, this] { cpu_.conv2d_backward_data(d, dy, w, dx, accumulate, ws); });
  }
  void conv2d_backward_filter(const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor dw, Tensor dbias,
                              Workspace ws) override {
    call([=, this] { cpu_.conv2d_backward_filter(d, x, dy, dw, dbias, ws); });
  }

  std::size_t dense_workspace_bytes(const Shape& x, int out, ConvPass pass) override {
    return cpu_.dense_workspace_bytes(x, out, pass);
  }
  void dense_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y, Workspace ws) override {
    call([=, this] { cpu_.dense_forward(x, w, bias, y, ws); });
  }
  void dense_backward_data(const Tensor& dy, const Tensor& w, Tensor dx, bool accumulate, Workspace ws) override {
    call([=, this] { cpu_.dense_backward_data(dy, w, dx, accumulate, ws); });
  }
  void dense_backward_weights(const Tensor& x, const Tensor& dy, Tensor dw, Tensor dbias, Workspace ws) override {
    call([=, this] { cpu_.dense_backward_weights(x, dy, dw, dbias, ws); });
  }

  void relu_forward(const Tensor& x, Tensor y) override {
    call([=, this] { cpu_.relu_forward(x, y); });
  }
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor dx, bool accumulate) override {
    call([=, this] { cpu_.relu_backward(y, dy, dx, accumulate); });
  }
  void pool2d_forward(const Pool2dDesc& d, const Tensor& x, Tensor y) override {
    call([=, this] { cpu_.pool2d_forward(d, x, y); });
  }
  void pool2d_backward(const Pool2dDesc& d, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor dx,
                       bool accumulate) override {
    call([=, this] { cpu_.pool2d_backward(d, x, y, dy, dx, accumulate); });
  }

  void batchnorm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                  Tensor running_mean, Tensor running_var, float momentum, float epsilon,
                                  Tensor saved_mean, Tensor saved_inv_std) override {
    call([=, this] {
      cpu_.batchnorm_forward_training(x, gamma, beta, y, running_mean, running_var, momentum, epsilon, saved_mean,
                                      saved_inv_std);
    });
  }
  void batchnorm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   const Tensor& running_mean, const Tensor& running_var, float epsilon,
                                   Tensor y) override {
    call([=, this] { cpu_.batchnorm_forward_inference(x, gamma, beta, running_mean, running_var, epsilon, y); });
  }
  void batchnorm_forward_saved(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& saved_mean,
                               const Tensor& saved_inv_std, Tensor y) override {
    call([=, this] { cpu_.batchnorm_forward_saved(x, gamma, beta, saved_mean, saved_inv_std, y); });
  }
  void batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& saved_mean,
                          const Tensor& saved_inv_std, float epsilon, Tensor dx, Tensor dgamma, Tensor dbeta,
                          bool accumulate) override {
    call([=, this] {
      cpu_.batchnorm_backward(x, dy, gamma, saved_mean, saved_inv_std, epsilon, dx, dgamma, dbeta, accumulate);
    });
  }
  void batchnorm_channel_sums(const Tensor& x, Tensor sums) override {
    call([=, this] { cpu_.batchnorm_channel_sums(x, sums); });
  }
  void batchnorm_centered_squares(const Tensor& x, const Tensor& sums, double count, Tensor out) override {
    call([=, this] { cpu_.batchnorm_centered_squares(x, sums, count, out); });
  }
  void batchnorm_forward_from_sums(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                   Tensor running_mean, Tensor running_var, float momentum, float epsilon,
                                   double count, Tensor saved_mean, Tensor saved_inv_std) override {
    call([=, this] {
      cpu_.batchnorm_forward_from_sums(x, gamma, beta, y, running_mean, running_var, momentum, epsilon, count,
                                       saved_mean, saved_inv_std);
    });
  }
  void batchnorm_backward_sums(const Tensor& x, const Tensor& dy, const Tensor& saved_mean,
                               const Tensor& saved_inv_std, Tensor sums) override {
    call([=, this] { cpu_.batchnorm_backward_sums(x, dy, saved_mean, saved_inv_std, sums); });
  }
  void batchnorm_backward_from_sums(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                    const Tensor& saved_mean, const Tensor& saved_inv_std, const Tensor& sums,
                                    double count, Tensor dx, bool accumulate) override {
    call([=, this] {
      cpu_.batchnorm_backward_from_sums(x, dy, gamma, saved_mean, saved_inv_std, sums, count, dx, accumulate);
    });
  }

  void dropout_forward(const Tensor& x, Tensor y, Tensor mask, float p, const StepScalars* step,
                       std::uint64_t layer) override {
    call([=, this] { cpu_.dropout_forward(x, y, mask, p, step, layer); });
  }
  void dropout_backward(const Tensor& dy, const Tensor& mask, Tensor dx, bool accumulate) override {
    call([=, this] { cpu_.dropout_backward(dy, mask, dx, accumulate); });
  }
  void add(const Tensor& a, const Tensor& b, Tensor y) override {
    call([=, this] { cpu_.add(a, b, y); });
  }
  void copy_or_add(const Tensor& src, Tensor dst, bool accumulate) override {
    call([=, this] { cpu_.copy_or_add(src, dst, accumulate); });
  }
  void softmax_cross_entropy(const Tensor& logits, const IntTensor& labels, Tensor dlogits, const StepScalars* step,
                             Tensor loss_sum, Tensor correct) override {
    call([=, this] { cpu_.softmax_cross_entropy(logits, labels, dlogits, step, loss_sum, correct); });
  }
  void sgd_update(Tensor params, const Tensor& grads, Tensor velocity, const SgdConfig& config,
                  float learning_rate, const float* guard) override {
    call([=, this] { cpu_.sgd_update(params, grads, velocity, config, learning_rate, guard); });
  }
  void adamw_update(Tensor params, const Tensor& grads, Tensor m, Tensor v, const AdamWConfig& config,
                    float learning_rate, long step, const float* guard) override {
    call([=, this] { cpu_.adamw_update(params, grads, m, v, config, learning_rate, step, guard); });
  }

  std::string capture_support() const override { return {}; }
  void begin_capture() override {
    if (recording_) throw std::logic_error("begin_capture while capturing");
    recording_ = std::make_unique<Calls>();
  }
  std::unique_ptr<CapturedCalls> end_capture() override {
    if (!recording_) throw std::logic_error("end_capture without begin_capture");
    return std::make_unique<Recording>(*this, std::move(*std::exchange(recording_, nullptr)));
  }
  void abort_capture() noexcept override { recording_.reset(); }

 private:
  using Calls = std::vector<std::function<void()>>;
  class Recording final : public CapturedCalls {
   public:
    Recording(RecordingBackend& backend, Calls calls) : backend_(backend), calls_(std::move(calls)) {}
    void replay() override {
      backend_.refuse("a replay");
      for (auto& c : calls_) c();
    }

   private:
    RecordingBackend& backend_;
    Calls calls_;
  };

  template <class F>
  void call(F f) {
    if (!recording_) return f();
    if (fail_at_ > 0 && static_cast<int>(recording_->size()) + 1 == fail_at_) {
      fail_at_ = 0;
      throw std::runtime_error("this call cannot be captured (injected)");
    }
    recording_->emplace_back(std::move(f));
  }
  void refuse(const char* what) const {
    if (recording_) throw std::logic_error(std::string(what) + " while capturing");
  }

  CpuBackend cpu_;
  std::unique_ptr<Calls> recording_;
  int fail_at_ = 0;
};

}  // namespace cnn::testing
