#pragma once
// A Backend that forwards every call to another one and adds up, per kind of kernel, the calls,
// the wall time and (for convolutions and dense layers) the floating-point operations. When
// `count_subnormals` is set it also counts the subnormal floats each kernel wrote (its output
// tensors), to see where they arise.
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <map>
#include <string>
#include <utility>

#include "engine/core/backend.hpp"

namespace cnn::bench {

enum class Kernel {
  conv_forward, conv_backward_data, conv_backward_filter, dense_forward, dense_backward_data,
  dense_backward_weights, relu_forward, relu_backward, pool_forward, pool_backward, batchnorm, dropout, add_copy, loss, sgd, adamw, fill_copy, count
};
constexpr std::size_t kKernels = static_cast<std::size_t>(Kernel::count);
inline const char* kernel_name(std::size_t k) {
  static const char* names[kKernels] = {"conv_forward", "conv_backward_data", "conv_backward_filter", "dense_forward",
                                        "dense_backward_data", "dense_backward_weights", "relu_forward", "relu_backward",
                                        "pool_forward", "pool_backward", "batchnorm",
                                        "dropout", "add_copy", "loss", "sgd_update", "adamw_update", "fill_copy"};
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

class TimingBackend final : public Backend {
 public:
  explicit TimingBackend(Backend& inner) : in_(inner) {}
  Totals totals{};
  bool count_subnormals = false;
  // The fastest call of each convolution pass and size (kernel, floating-point operations): a
  // busy machine slows most calls, the best of hundreds shows what the kernel can do.
  std::map<std::pair<std::size_t, double>, std::pair<double, long>> best_conv;  // -> (seconds, calls)

  DeviceKind kind() const override { return in_.kind(); }
  std::string description() const override { return in_.description(); }
  memory::MemoryResource& device_memory() override { return in_.device_memory(); }
  memory::MemoryResource& staging_memory() override { return in_.staging_memory(); }
  std::size_t library_reserved_bytes() const override { return in_.library_reserved_bytes(); }
  ComputeRates compute_rates() const override { return in_.compute_rates(); }
  void copy_to_device(const void* h, void* d, std::size_t b) override {
    Timer t(*this, Kernel::fill_copy);
    in_.copy_to_device(h, d, b);
  }
  void copy_to_host(const void* d, void* h, std::size_t b) override {
    Timer t(*this, Kernel::fill_copy);
    in_.copy_to_host(d, h, b);
  }
  void fill(Tensor x, float v) override {
    Timer t(*this, Kernel::fill_copy);
    in_.fill(x, v);
  }
  void synchronize() override { in_.synchronize(); }
  void copy_on_device(const void* src, void* dst, std::size_t b) override {
    Timer t(*this, Kernel::fill_copy);
    in_.copy_on_device(src, dst, b);
  }

  std::size_t conv2d_workspace_bytes(const Conv2dDesc& d, const Shape& x, const Shape& y, ConvPass p,
                                     std::size_t limit) override {
    return in_.conv2d_workspace_bytes(d, x, y, p, limit);
  }
  void conv2d_forward(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& b, Tensor y,
                      Workspace ws) override {
    Timer t(*this, Kernel::conv_forward, conv_flops(d, y), {y});
    in_.conv2d_forward(d, x, w, b, y, ws);
  }
  void conv2d_backward_data(const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor dx, bool acc,
                            Workspace ws) override {
    Timer t(*this, Kernel::conv_backward_data, conv_flops(d, dy), {dx});
    in_.conv2d_backward_data(d, dy, w, dx, acc, ws);
  }
  void conv2d_backward_filter(const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor dw, Tensor db,
                              Workspace ws) override {
    Timer t(*this, Kernel::conv_backward_filter, conv_flops(d, dy), {dw, db});
    in_.conv2d_backward_filter(d, x, dy, dw, db, ws);
  }

  std::size_t dense_workspace_bytes(const Shape& x, int out, ConvPass p) override {
    return in_.dense_workspace_bytes(x, out, p);
  }
  void dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor y, Workspace ws) override {
    Timer t(*this, Kernel::dense_forward, 2.0 * static_cast<double>(x.elements()) * y.sample_elements(), {y});
    in_.dense_forward(x, w, b, y, ws);
  }
  void dense_backward_data(const Tensor& dy, const Tensor& w, Tensor dx, bool acc, Workspace ws) override {
    Timer t(*this, Kernel::dense_backward_data, 2.0 * static_cast<double>(dx.elements()) * dy.sample_elements(), {dx});
    in_.dense_backward_data(dy, w, dx, acc, ws);
  }
  void dense_backward_weights(const Tensor& x, const Tensor& dy, Tensor dw, Tensor db, Workspace ws) override {
    Timer t(*this, Kernel::dense_backward_weights, 2.0 * static_cast<double>(x.elements()) * dy.sample_elements(),
            {dw, db});
    in_.dense_backward_weights(x, dy, dw, db, ws);
  }

  void relu_forward(const Tensor& x, Tensor y) override {
    Timer t(*this, Kernel::relu_forward, 0, {y});
    in_.relu_forward(x, y);
  }
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor dx, bool acc) override {
    Timer t(*this, Kernel::relu_backward, 0, {dx});
    in_.relu_backward(y, dy, dx, acc);
  }
  void pool2d_forward(const Pool2dDesc& d, const Tensor& x, Tensor y) override {
    Timer t(*this, Kernel::pool_forward, 0, {y});
    in_.pool2d_forward(d, x, y);
  }
  void pool2d_backward(const Pool2dDesc& d, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor dx,
                       bool acc) override {
    Timer t(*this, Kernel::pool_backward, 0, {dx});
    in_.pool2d_backward(d, x, y, dy, dx, acc);
  }
  void batchnorm_forward_training(const Tensor& x, const Tensor& g, const Tensor& b, Tensor y, Tensor rm, Tensor rv,
                                  float momentum, float eps, Tensor sm, Tensor si) override {
    Timer t(*this, Kernel::batchnorm, 0, {y});
    in_.batchnorm_forward_training(x, g, b, y, rm, rv, momentum, eps, sm, si);
  }
  void batchnorm_forward_inference(const Tensor& x, const Tensor& g, const Tensor& b, const Tensor& rm,
                                   const Tensor& rv, float eps, Tensor y) override {
    Timer t(*this, Kernel::batchnorm, 0, {y});
    in_.batchnorm_forward_inference(x, g, b, rm, rv, eps, y);
  }
  void batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& g, const Tensor& sm, const Tensor& si,
                          float eps, Tensor dx, Tensor dg, Tensor db, bool acc) override {
    Timer t(*this, Kernel::batchnorm, 0, {dx, dg, db});
    in_.batchnorm_backward(x, dy, g, sm, si, eps, dx, dg, db, acc);
  }
  void batchnorm_forward_saved(const Tensor& x, const Tensor& g, const Tensor& b, const Tensor& sm, const Tensor& si,
                               Tensor y) override {
    Timer t(*this, Kernel::batchnorm, 0, {y});
    in_.batchnorm_forward_saved(x, g, b, sm, si, y);
  }
  void batchnorm_channel_sums(const Tensor& x, Tensor sums) override {
    Timer t(*this, Kernel::batchnorm, 0, {sums});
    in_.batchnorm_channel_sums(x, sums);
  }
  void batchnorm_centered_squares(const Tensor& x, const Tensor& sums, double count, Tensor out) override {
    Timer t(*this, Kernel::batchnorm, 0, {out});
    in_.batchnorm_centered_squares(x, sums, count, out);
  }
  void batchnorm_forward_from_sums(const Tensor& x, const Tensor& g, const Tensor& b, Tensor y, Tensor rm, Tensor rv,
                                   float momentum, float eps, double count, Tensor sm, Tensor si) override {
    Timer t(*this, Kernel::batchnorm, 0, {y, rm, rv, sm, si});
    in_.batchnorm_forward_from_sums(x, g, b, y, rm, rv, momentum, eps, count, sm, si);
  }
  void batchnorm_backward_sums(const Tensor& x, const Tensor& dy, const Tensor& sm, const Tensor& si,
                               Tensor sums) override {
    Timer t(*this, Kernel::batchnorm, 0, {sums});
    in_.batchnorm_backward_sums(x, dy, sm, si, sums);
  }
  void batchnorm_backward_from_sums(const Tensor& x, const Tensor& dy, const Tensor& g, const Tensor& sm,
                                    const Tensor& si, const Tensor& sums, double count, Tensor dx, bool acc) override {
    Timer t(*this, Kernel::batchnorm, 0, {dx});
    in_.batchnorm_backward_from_sums(x, dy, g, sm, si, sums, count, dx, acc);
  }
  void dropout_forward(const Tensor& x, Tensor y, Tensor mask, float p, const StepScalars* s,
                       std::uint64_t layer) override {
    Timer t(*this, Kernel::dropout, 0, {y});
    in_.dropout_forward(x, y, mask, p, s, layer);
  }
  void dropout_backward(const Tensor& dy, const Tensor& mask, Tensor dx, bool acc) override {
    Timer t(*this, Kernel::dropout, 0, {dx});
    in_.dropout_backward(dy, mask, dx, acc);
  }
  void add(const Tensor& a, const Tensor& b, Tensor y) override {
    Timer t(*this, Kernel::add_copy, 0, {y});
    in_.add(a, b, y);
  }
  void copy_or_add(const Tensor& src, Tensor dst, bool acc) override {
    Timer t(*this, Kernel::add_copy, 0, {dst});
    in_.copy_or_add(src, dst, acc);
  }
  void softmax_cross_entropy(const Tensor& logits, const IntTensor& labels, Tensor dlogits, const StepScalars* s,
                             Tensor loss_sum, Tensor correct) override {
    Timer t(*this, Kernel::loss, 0, {dlogits});
    in_.softmax_cross_entropy(logits, labels, dlogits, s, loss_sum, correct);
  }
  void sgd_update(Tensor p, const Tensor& g, Tensor v, const SgdConfig& c, float lr, const float* guard) override {
    Timer t(*this, Kernel::sgd, 0, {p, v});
    in_.sgd_update(p, g, v, c, lr, guard);
  }
  void adamw_update(Tensor p, const Tensor& g, Tensor m, Tensor v, const AdamWConfig& c, float lr, long step,
                    const float* guard) override {
    Timer t(*this, Kernel::adamw, 0, {p, m, v});
    in_.adamw_update(p, g, m, v, c, lr, step, guard);
  }

 private:
  static double conv_flops(const Conv2dDesc& d, const Tensor& y) {
    return 2.0 * static_cast<double>(y.elements()) * d.in_channels * d.kernel_h * d.kernel_w;
  }
  // Times one call; on destruction adds it up and, when counting, scans the outputs.
  class Timer {
   public:
    Timer(TimingBackend& b, Kernel k, double flops = 0, std::initializer_list<Tensor> outputs = {})
        : b_(b), k_(static_cast<std::size_t>(k)), flops_(flops), start_(std::chrono::steady_clock::now()) {
      std::size_t i = 0;
      for (const Tensor& t : outputs)
        if (i < out_.size()) out_[i++] = t;
    }
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
    std::chrono::steady_clock::time_point start_;
    std::array<Tensor, 3> out_{};
  };
  Backend& in_;
};

}  // namespace cnn::bench
