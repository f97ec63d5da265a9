#pragma once
// A Backend that forwards every call to another one and adds up, per kind of kernel, the calls,
// the wall time and (for convolutions and dense layers) the floating-point operations; a call it
// does not know (a backend method added since) counts under "other". When
// `count_subnormals` is set it also counts the subnormal floats each kernel wrote (its output
// tensors), to see where they arise.
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "engine/core/forwarding_backend.hpp"

namespace cnn::bench {

enum class Kernel {
  conv_forward, conv_backward_data, conv_backward_filter, dense_forward, dense_backward_data,
  dense_backward_weights, relu_forward, relu_backward, pool_forward, pool_backward, batchnorm, dropout, add_copy, loss,
  sgd, adamw, fill_copy, other, count
};
constexpr std::size_t kKernels = static_cast<std::size_t>(Kernel::count);
inline const char* kernel_name(std::size_t k) {
  static const char* names[kKernels] = {"conv_forward", "conv_backward_data", "conv_backward_filter", "dense_forward",
                                        "dense_backward_data", "dense_backward_weights", "relu_forward", "relu_backward",
                                        "pool_forward", "pool_backward", "batchnorm",
                                        "dropout", "add_copy", "loss", "sgd_update", "adamw_update", "fill_copy",
                                        "other"};
  return names[k];
}
inline bool is_conv(std::size_t k) { return k <= static_cast<std::size_t>(Kernel::conv_backward_filter); }

struct KernelTotals {
  long calls = 0;
  double seconds = 0, flops = 0;
  std::size_t written = 0, subnormal = 0;  // floats written and how many were subnormal (counted calls only)
};
using Totals = std::array<KernelTotals, kKernels>;

inline std::size_t count_subnormal(const float* p, std::size_t n) {
  std::size_t c = 0;
  for (std::size_t i = 0; i < n; ++i) c += std::fpclassify(p[i]) == FP_SUBNORMAL;
  return c;
}

class TimingBackend final : public ForwardingBackend {
 public:
  explicit TimingBackend(Backend& inner) : ForwardingBackend(inner) {}
  Totals totals{};
  bool count_subnormals = false;
  // The fastest call of each convolution pass and size (kernel, floating-point operations): a
  // busy machine slows most calls, the best of hundreds shows what the kernel can do.
  std::map<std::pair<std::size_t, double>, std::pair<double, long>> best_conv;  // -> (seconds, calls)

 protected:
  // The calls whose floating-point operations are counted: they note them for run().
  void do_conv2d_forward(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& b, Tensor y, bool acc,
                         Workspace ws) override {
    flops_ = conv_flops(d, y);
    ForwardingBackend::do_conv2d_forward(d, x, w, b, y, acc, ws);
  }
  void do_conv2d_backward_data(const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor dx, bool acc,
                               Workspace ws) override {
    flops_ = conv_flops(d, dy);
    ForwardingBackend::do_conv2d_backward_data(d, dy, w, dx, acc, ws);
  }
  void do_conv2d_backward_filter(const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor dw, Tensor db,
                                 Workspace ws) override {
    flops_ = conv_flops(d, dy);
    ForwardingBackend::do_conv2d_backward_filter(d, x, dy, dw, db, ws);
  }
  void do_dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor y, Workspace ws) override {
    flops_ = 2.0 * static_cast<double>(x.elements()) * y.sample_elements();
    ForwardingBackend::do_dense_forward(x, w, b, y, ws);
  }
  void do_dense_backward_data(const Tensor& dy, const Tensor& w, Tensor dx, bool acc, Workspace ws) override {
    flops_ = 2.0 * static_cast<double>(dx.elements()) * dy.sample_elements();
    ForwardingBackend::do_dense_backward_data(dy, w, dx, acc, ws);
  }
  void do_dense_backward_weights(const Tensor& x, const Tensor& dy, Tensor dw, Tensor db, Workspace ws) override {
    flops_ = 2.0 * static_cast<double>(x.elements()) * dy.sample_elements();
    ForwardingBackend::do_dense_backward_weights(x, dy, dw, db, ws);
  }

 private:
  // Every call that computes or copies, timed under its kernel.
  void run(const BackendCall& call, const std::function<void()>& work) override {
    const Kernel kernel = kernel_of(call.name);
    Timer t(*this, kernel, std::exchange(flops_, 0.0), call.outputs);
    work();
  }

  static Kernel kernel_of(std::string_view call) {
    static const std::map<std::string_view, Kernel> kernels = {
        {"conv2d_forward", Kernel::conv_forward},
        {"conv2d_backward_data", Kernel::conv_backward_data},
        {"conv2d_backward_filter", Kernel::conv_backward_filter},
        {"dense_forward", Kernel::dense_forward},
        {"dense_backward_data", Kernel::dense_backward_data},
        {"dense_backward_weights", Kernel::dense_backward_weights},
        {"relu_forward", Kernel::relu_forward},
        {"relu_backward", Kernel::relu_backward},
        {"pool2d_forward", Kernel::pool_forward},
        {"pool2d_backward", Kernel::pool_backward},
        {"dropout_forward", Kernel::dropout},
        {"dropout_backward", Kernel::dropout},
        {"add", Kernel::add_copy},
        {"copy_or_add", Kernel::add_copy},
        {"softmax_cross_entropy", Kernel::loss},
        {"sgd_update", Kernel::sgd},
        {"adamw_update", Kernel::adamw},
        {"fill", Kernel::fill_copy},
        {"copy_on_device", Kernel::fill_copy},
        {"copy_to_device", Kernel::fill_copy},
        {"copy_to_host", Kernel::fill_copy},
        {"copy_to_device_async", Kernel::fill_copy},
        {"copy_to_host_async", Kernel::fill_copy},
    };
    if (call.starts_with("batchnorm_")) return Kernel::batchnorm;
    const auto it = kernels.find(call);
    return it == kernels.end() ? Kernel::other : it->second;
  }
  static double conv_flops(const Conv2dDesc& d, const Tensor& y) {
    return 2.0 * static_cast<double>(y.elements()) * d.in_channels * d.kernel_h * d.kernel_w;
  }
  // Times one call; on destruction adds it up and, when counting, scans the outputs.
  class Timer {
   public:
    Timer(TimingBackend& b, Kernel k, double flops, std::span<const Tensor> outputs)
        : b_(b), k_(static_cast<std::size_t>(k)), flops_(flops), out_(outputs),
          start_(std::chrono::steady_clock::now()) {}
    ~Timer() {
      KernelTotals& s = b_.totals[k_];
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      s.seconds += seconds;
      if (is_conv(k_)) {
        auto [it, fresh] = b_.best_conv.try_emplace({k_, flops_}, seconds, 0);
        it->second.first = std::min(it->second.first, seconds);
        ++it->second.second;
      }
      s.flops += flops_;
      ++s.calls;
      if (!b_.count_subnormals) return;
      for (const Tensor& t : out_)
        if (!t.empty()) {
          s.written += t.elements();
          s.subnormal += count_subnormal(t.data, t.elements());
        }
    }

   private:
    TimingBackend& b_;
    std::size_t k_;
    double flops_;
    std::span<const Tensor> out_;
    std::chrono::steady_clock::time_point start_;
  };
  double flops_ = 0;  // the next call's, noted by the overrides above
};

}  // namespace cnn::bench
