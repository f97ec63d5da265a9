#pragma once
// The reference backend: Eigen matrix products and plain loops, parallel over the batch on a
// work pool that the calling thread shares with its workers (backends/cpu/detail/work_pool.hpp),
// with subnormals flushed to zero (detail/subnormals.hpp). Deterministic for a given thread count:
// the work is cut into the same ranges whichever threads run them, and every reduction adds in a
// fixed order.
#include <cstdint>
#include <memory>

#include "engine/core/backend.hpp"

namespace cnn {

class CpuBackend : public Backend {
 public:
  // threads <= 0: all the cores OpenMP sees. precision: fp32, or bf16 or fp16 (convolutions and
  // dense layers multiply 16-bit operands, backends/cpu/detail/gemm16.hpp: bf16 faster where the
  // CPU has AVX512-BF16, fp16 slower than fp32, for its memory and a GPU's rounding); tf32 is
  // fp32 here.
  explicit CpuBackend(int threads = 0, Precision precision = Precision::fp32);
  int threads() const { return threads_; }
  // The vector instructions the kernels were compiled for: "avx512", "avx2" (with FMA) or
  // "generic". Results are reproducible to the bit within one of them (see gemm.cpp).
  static std::string instruction_set();

  DeviceKind kind() const override { return DeviceKind::cpu; }
  std::string description() const override;
  Precision precision() const override { return precision_; }
  memory::MemoryResource& device_memory() override;
  memory::MemoryResource& staging_memory() override;
  std::size_t available_memory() const override;
  ComputeRates compute_rates() const override;
  std::string determinism_report() const override {
    return "deterministic: the same seed, thread count and instruction set give the same bits";
  }
  // bf16 and fp16: convolutions and dense layers multiply 16-bit operands of this format
  // (backends/cpu/detail/gemm16.hpp).
  bool products16() const { return precision_ == Precision::bf16 || precision_ == Precision::fp16; }
  ValueFormat product_format() const { return value_format(precision_); }

  void copy_to_device(const void* host, void* device, std::size_t bytes) override;
  void copy_to_host(const void* device, void* host, std::size_t bytes) override;
  void fill(Tensor t, float value) override;
  void synchronize() override {}
  void copy_on_device(const void* src, void* dst, std::size_t bytes) override;
  void to_16bit(const Tensor& x, void* packed, ValueFormat format) override;
  void from_16bit(const void* packed, Tensor x, ValueFormat format) override;

  std::size_t conv2d_workspace_bytes(const Conv2dDesc& desc, const Shape& x, const Shape& y,
                                     ConvPass pass, std::size_t limit) override;
  void conv2d_forward(const Conv2dDesc& desc, const Tensor& x, const Tensor& w, const Tensor& bias,
                      Tensor y, bool accumulate, Workspace ws) override;
  void conv2d_backward_data(const Conv2dDesc& desc, const Tensor& dy, const Tensor& w, Tensor dx,
                            bool accumulate, Workspace ws) override;
  void conv2d_backward_filter(const Conv2dDesc& desc, const Tensor& x, const Tensor& dy, Tensor dw,
                              Tensor dbias, Workspace ws) override;

  std::size_t dense_workspace_bytes(const Shape& x, int out, ConvPass pass) override;
  void dense_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y, Workspace ws) override;
  void dense_backward_data(const Tensor& dy, const Tensor& w, Tensor dx, bool accumulate, Workspace ws) override;
  void dense_backward_weights(const Tensor& x, const Tensor& dy, Tensor dw, Tensor dbias, Workspace ws) override;

  void relu_forward(const Tensor& x, Tensor y) override;
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor dx, bool accumulate) override;

  void pool2d_forward(const Pool2dDesc& desc, const Tensor& x, Tensor y) override;
  void pool2d_backward(const Pool2dDesc& desc, const Tensor& x, const Tensor& y, const Tensor& dy,
                       Tensor dx, bool accumulate) override;

  void batchnorm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                  Tensor running_mean, Tensor running_var, float momentum,
                                  float epsilon, Tensor saved_mean, Tensor saved_inv_std) override;
  void batchnorm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   const Tensor& running_mean, const Tensor& running_var,
                                   float epsilon, Tensor y) override;
  void batchnorm_forward_saved(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                               const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor y) override;
  void batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                          const Tensor& saved_mean, const Tensor& saved_inv_std, float epsilon, Tensor dx,
                          Tensor dgamma, Tensor dbeta, bool accumulate) override;
  // Synchronised BatchNorm: cpu_batchnorm_sync.cpp.
  void batchnorm_channel_sums(const Tensor& x, Tensor sums) override;
  void batchnorm_centered_squares(const Tensor& x, const Tensor& sums, double count, Tensor out) override;
  void batchnorm_forward_from_sums(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                   Tensor running_mean, Tensor running_var, float momentum, float epsilon,
                                   double count, Tensor saved_mean, Tensor saved_inv_std) override;
  void batchnorm_backward_sums(const Tensor& x, const Tensor& dy, const Tensor& saved_mean,
                               const Tensor& saved_inv_std, Tensor sums) override;
  void batchnorm_backward_from_sums(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                    const Tensor& saved_mean, const Tensor& saved_inv_std, const Tensor& sums,
                                    double count, Tensor dx, bool accumulate) override;

  void dropout_forward(const Tensor& x, Tensor y, Tensor mask, float p, const StepScalars* step,
                       std::uint64_t layer) override;
  void dropout_backward(const Tensor& dy, const Tensor& mask, Tensor dx, bool accumulate) override;

  void add(const Tensor& a, const Tensor& b, Tensor y) override;
  void copy_or_add(const Tensor& src, Tensor dst, bool accumulate) override;

  void activation_forward(const ActivationDesc& desc, const Tensor& x, Tensor y) override;
  void activation_backward(const ActivationDesc& desc, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor dx,
                           bool accumulate) override;

  void copy_channels(const Tensor& from, int from_channel, Tensor to, int to_channel, int channels,
                     bool accumulate) override;
  void multiply(const Tensor& a, const Tensor& b, Tensor y) override;
  void multiply_backward(const Tensor& a, const Tensor& b, const Tensor& dy, Tensor da, bool accumulate_a, Tensor db,
                         bool accumulate_b) override;
  void add_channel_bias(const Tensor& bias, Tensor y) override;
  void channel_bias_backward(const Tensor& dy, Tensor dbias) override;
  void upsample_forward(const UpsampleDesc& desc, const Tensor& x, Tensor y) override;
  void upsample_backward(const UpsampleDesc& desc, const Tensor& dy, Tensor dx, bool accumulate) override;
  void group_norm_forward(const GroupNormDesc& desc, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                          Tensor y, Tensor saved_mean, Tensor saved_inv_std) override;
  void group_norm_backward(const GroupNormDesc& desc, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                           const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor dx, bool accumulate,
                           Tensor dgamma, Tensor dbeta, Workspace ws) override;
  std::size_t group_norm_workspace_bytes(const GroupNormDesc& desc, const Shape& x) override;

  void softmax_cross_entropy(const Tensor& logits, const IntTensor& labels, float label_smoothing, Tensor dlogits,
                             const StepScalars* step, Tensor loss_sum, Tensor correct) override;
  void pixel_cross_entropy(const Tensor& logits, const ByteTensor& masks, const Tensor& class_weights, Tensor dlogits,
                           const StepScalars* step, Tensor loss_sum, Tensor correct, Tensor counted,
                           Workspace ws) override;
  void sigmoid_cross_entropy(const Tensor& logits, const Tensor& targets, const Tensor& positive_weights,
                             float threshold_logit, Tensor dlogits, const StepScalars* step, Tensor loss_sum,
                             Tensor correct, Tensor counted, Workspace ws) override;
  void regression_loss(RegressionLoss kind, float delta, const Tensor& outputs, const Tensor& targets,
                       Tensor doutputs, const StepScalars* step, Tensor loss_sum, Tensor correct, Tensor counted,
                       Workspace ws) override;
  // The task losses' sums of their work items (cpu_task_loss.cpp); classification needs none.
  std::size_t loss_workspace_bytes(Task task, const Shape& output) override;

  void sgd_update(Tensor params, const Tensor& grads, Tensor velocity, const SgdConfig& config,
                  float learning_rate, const float* guard) override;
  void adamw_update(Tensor params, const Tensor& grads, Tensor m, Tensor v, const AdamWConfig& config,
                    float learning_rate, long step, const float* guard) override;
  void unscale_gradients(Tensor grads, float inverse_scale, Tensor found) override;

 private:
  // What a call at exactly these shapes needs; the public queries answer for every smaller
  // micro-batch too (detail/every_micro_batch.hpp, Note [A workspace for every smaller micro-batch]).
  std::size_t conv2d_workspace_at(const Conv2dDesc& desc, const Shape& x, const Shape& y, ConvPass pass) const;
  std::size_t dense_workspace_at(const Shape& x, int out, ConvPass pass) const;
  std::size_t group_norm_workspace_at(const GroupNormDesc& desc, const Shape& x) const;
  std::size_t loss_workspace_at(Task task, const Shape& output) const;

  int threads_;
  Precision precision_;
};

}  // namespace cnn
