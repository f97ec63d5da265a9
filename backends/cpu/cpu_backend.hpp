#pragma once
// The reference backend: Eigen matrix products and plain loops, parallel over the batch on a
// work pool that the calling thread shares with its workers (backends/cpu/detail/work_pool.hpp),
// with subnormals flushed to zero (detail/subnormals.hpp). Deterministic for a given thread count:
// the work is cut into the same ranges whichever threads run them, and every reduction adds in a
// fixed order.
#include <cstdint>
#include <memory>

#include <cnnengine/engine/core/backend.hpp>

namespace cnn {

class CpuBackend : public Backend {
 public:
  // threads <= 0: all the cores OpenMP sees. precision: fp32, or bf16 or fp16 (convolutions and
  // dense layers multiply 16-bit operands, backends/cpu/detail/gemm16.hpp: bf16 faster where the
  // CPU has AVX512-BF16, fp16 slower than fp32, for its memory and a GPU's rounding); tf32 is
  // fp32 here.
  explicit CpuBackend(int threads = 0, Precision precision = Precision::fp32);
  int threads() const { return threads_; }
  // The vector instructions the library's element-wise code (Eigen) was compiled for: "generic"
  // (the x86-64 baseline, the default build), or "avx512" or "avx2" (with FMA) where CNN_NATIVE
  // compiled it for its host. The kernels choose theirs when they run (cpu::isa(),
  // backends/cpu/detail/cpu_isa.hpp); description() names both. Results repeat to the bit within
  // one build and one cpu::isa().
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

  // BatchNorm + ReLU, and BatchNorm + add + ReLU, in one pass each way (cpu_pool_norm.cpp), with
  // the unfused bits.
  bool fuses_batchnorm_relu() const override { return true; }
  bool fuses_batchnorm_add_relu() const override { return true; }
  // A convolution and its ReLU in one pass forward (cpu_conv.cpp), with the unfused bits.
  bool fuses_conv_relu() const override { return true; }

  void copy_to_device(const void* host, void* device, std::size_t bytes) override;
  void copy_to_host(const void* device, void* host, std::size_t bytes) override;
  void synchronize() override {}

 protected:
  // Every call of CNN_BACKEND_CALLS (backend.hpp), each reached through its front. By job:
  // cpu_backend.cpp (fill, copies on the device, ReLU, dropout, add, the classification loss, the
  // optimizers), cpu_conv.cpp (with the depthwise and grouped ones), cpu_dense.cpp,
  // cpu_pool_norm.cpp (pooling, BatchNorm), cpu_batchnorm_sync.cpp (synchronised BatchNorm),
  // cpu_value_storage.cpp (16-bit values), cpu_activation.cpp, cpu_join.cpp,
  // cpu_channel_bias.cpp, cpu_upsample.cpp, cpu_pad.cpp, cpu_group_norm.cpp, cpu_task_loss.cpp (the losses
  // beyond classification; their workspace holds the sums of their work items).
  CNN_BACKEND_OVERRIDES
  void do_conv2d_relu_forward(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,
                              Workspace ws) override;
  void do_batchnorm_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                          Tensor running_mean, Tensor running_var, float momentum, float epsilon,
                                          Tensor saved_mean, Tensor saved_inv_std) override;
  void do_batchnorm_relu_backward(const Tensor& x, const Tensor& y, Tensor dy, const Tensor& gamma,
                                  const Tensor& saved_mean, const Tensor& saved_inv_std, float epsilon, Tensor dx,
                                  Tensor dgamma, Tensor dbeta, bool accumulate) override;
  void do_batchnorm_add_relu_forward_training(const Tensor& x, const Tensor& residual, const Tensor& gamma,
                                              const Tensor& beta, Tensor y, Tensor running_mean, Tensor running_var,
                                              float momentum, float epsilon, Tensor saved_mean,
                                              Tensor saved_inv_std) override;
  void do_batchnorm_add_relu_backward(const Tensor& x, const Tensor& y, Tensor dy, const Tensor& gamma,
                                      const Tensor& saved_mean, const Tensor& saved_inv_std, float epsilon, Tensor dx,
                                      Tensor dgamma, Tensor dbeta, bool accumulate, Tensor dresidual,
                                      bool accumulate_residual) override;

 private:
  // BatchNorm's training passes, with or without the ReLU after it (relu_output: its output), and
  // with or without a residual added before that ReLU (residual, and its gradient: nullptr where
  // there is none, or where it wants no gradient).
  void batchnorm_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y, Tensor running_mean,
                          Tensor running_var, float momentum, float epsilon, Tensor saved_mean, Tensor saved_inv_std,
                          bool relu, const Tensor* residual = nullptr);
  void batchnorm_gradient(const Tensor& x, const Tensor& dy, const Tensor* relu_output, const Tensor& gamma,
                          const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor dx, Tensor dgamma, Tensor dbeta,
                          bool accumulate, Tensor* residual_gradient = nullptr, bool accumulate_residual = false);

  // What a call at exactly these shapes needs; the public queries answer for every smaller
  // micro-batch too (detail/every_micro_batch.hpp, Note [A workspace for every smaller micro-batch]).
  std::size_t conv2d_workspace_at(const Conv2dDesc& desc, const Shape& x, const Shape& y, ConvPass pass) const;
  // conv2d_forward, and with `relu` (never with accumulate) max(that, 0) as relu_forward gives it:
  // in the pass that writes y where the path has one, else a pass of its own.
  void conv_forward(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,
                    bool accumulate, bool relu, Workspace ws);
  std::size_t dense_workspace_at(const Shape& x, int out, ConvPass pass) const;
  std::size_t group_norm_workspace_at(const GroupNormDesc& desc, const Shape& x) const;
  std::size_t loss_workspace_at(Task task, const Shape& output) const;

  int threads_;
  Precision precision_;
};

}  // namespace cnn
