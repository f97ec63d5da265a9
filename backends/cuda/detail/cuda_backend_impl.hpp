#pragma once
// The CUDA backend's class. Internal: includes CUDA headers; the public face is
// backends/device/cuda_api.hpp. Its calls are defined by job: cuda_backend.cpp (setup, copies,
// synchronisation), conv.cpp, dense.cpp, value_storage.cu (16-bit conversions), batchnorm.cpp,
// batchnorm_kernels.cu (its own kernels: batchnorm_forward_saved, 16-bit values),
// batchnorm_sync.cu (synchronised BatchNorm), pooling.cu, elementwise.cu, activation.cu, join.cu,
// channel_bias.cu, upsample.cu, pad.cu, group_norm.cu, loss.cu, task_loss.cu, optimizers.cu.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backends/cuda/detail/conv_algorithms.hpp"
#include "backends/cuda/detail/copy_tracker.hpp"
#include "backends/cuda/detail/cuda_resources.hpp"
#include "backends/device/cuda_api.hpp"
#include "backends/device/detail/algorithm_cache_file.hpp"
#include <cnnengine/engine/core/backend.hpp>

namespace cnn::cuda {

struct ConvCopies;  // conv.cpp

// Written by the loss kernels when a label or a mask value is out of range; lives in mapped pinned
// host memory so that checking it after a synchronisation costs no copy.
struct LabelError {
  int raised;
  int row;  // the sample
  int label;
  int classes;
  int pixel_row, pixel_column;  // a mask value's pixel; -1 for a class label
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaOptions& options);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  DeviceKind kind() const override { return DeviceKind::cuda; }
  std::string description() const override;
  Precision precision() const override { return options_.precision; }
  bool takes_packed_values() const override { return products16(); }
  // In bf16 and fp16, on its own kernels; in fp32 and tf32 cuDNN's BatchNorm has no ReLU to run.
  bool fuses_batchnorm_relu() const override { return products16(); }
  bool fuses_batchnorm_add_relu() const override { return products16(); }
  bool takes_channels_last() const override { return products16() && options_.channels_last; }
  memory::MemoryResource& device_memory() override { return device_memory_; }
  memory::MemoryResource& staging_memory() override { return pinned_memory_; }
  memory::MemoryResource* set_query_memory(memory::MemoryResource* memory) override {
    return std::exchange(query_memory_, memory);
  }
  std::size_t library_reserved_bytes() const override {
    return cublas_workspace_bytes_ + loss_scratch_bytes() + channel_partials_bytes() + library_resident_bytes_ +
           kKernelsLoadedLater;
  }
  // What the kernels loaded as a run first calls them take (Note [The libraries' own device memory]).
  static constexpr std::size_t kKernelsLoadedLater = std::size_t{32} << 20;
  std::size_t available_memory() const override;
  std::size_t largest_tensor_elements() const override { return INT32_MAX; }
  // An H100's order of magnitude: fp32 convolutions at about half of its peak, its memory
  // bandwidth, a kernel launch with the library's own setup.
  ComputeRates compute_rates() const override { return {30e12, 2.5e12, 6e-6}; }
  std::string determinism_report() const override;

  void copy_to_device(const void* host, void* device, std::size_t bytes) override;
  void copy_to_host(const void* device, void* host, std::size_t bytes) override;
  void synchronize() override;
  bool copies_overlap_compute() const override { return true; }
  // To the device on the copy stream (which waits only for compute work that touched the
  // destination: copy_tracker.hpp), to the host on the compute stream; each fence an event.
  Fence copy_to_device_async(const void* host, void* device, std::size_t bytes) override;
  Fence copy_to_host_async(const void* device, void* host, std::size_t bytes) override;
  bool reached(Fence fence) override;
  void wait(Fence fence) override;

  // CUDA graphs (graph.cpp): the compute stream is captured; a replay is one cudaGraphLaunch,
  // which counts as touching every range the captured calls touched.
  std::string capture_support() const override { return {}; }
  void begin_capture() override;
  std::unique_ptr<CapturedCalls> end_capture() override;
  void abort_capture() noexcept override;
  void launch_graph(cudaGraphExec_t graph, const std::vector<DeviceRange>& touched);

  // For the NCCL communicator: the stream every call enqueues on, and this device made current.
  cudaStream_t compute_stream() const { return compute_; }
  void make_current() const { activate(); }

 private:
  // Every call of CNN_BACKEND_CALLS (backend.hpp), each reached through its front. cuBLAS works
  // in its own workspace (library_reserved_bytes); in bf16 and fp16 a dense layer's workspace
  // holds the operands' 16-bit copies (Note [16-bit products on CUDA], conv.cpp), and is empty
  // otherwise. group_norm_backward and the task losses need no workspace: the losses sum in
  // loss_scratch_, allocated with the backend.
  CNN_BACKEND_OVERRIDES
  void do_conv2d_backward(const Conv2dDesc& desc, const Tensor& x, const Tensor& dy, const Tensor& w, Tensor dw,
                          Tensor dbias, Tensor dx, bool accumulate, Workspace ws) override;
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

  void release() noexcept;
  // Makes this backend's device current for the calling thread.
  void activate() const;
  // Throws what the device found since the last check (a label out of range).
  void raise_device_errors();
  // Copies and synchronisation cannot be part of a graph.
  void refuse_while_capturing(const char* call) const;
  // A fence after the work enqueued so far on `stream`: an event of a ring of kFenceEvents, so a
  // fence that old has been recorded again (reached and wait then ask both streams instead).
  Fence record_fence(cudaStream_t stream);
  static constexpr std::size_t kFenceEvents = 32;
  bool fence_expired(Fence fence) const { return fence.id + kFenceEvents <= fences_; }
  // The device memory the task losses sum their blocks' partial sums in (task_loss.cu): allocated
  // with the backend, so that the kernels of a captured step keep pointing at it.
  static std::size_t loss_scratch_bytes();
  // The device memory channels-last BatchNorm sums its blocks' partial sums in (Note [BatchNorm
  // over channels-last images], batchnorm_channels_last.cu), allocated with the backend where it
  // takes channels-last images; none elsewhere.
  std::size_t channel_partials_bytes() const;
  // Sets the counters at the front of channel_partials_ to zero (once, as it is allocated).
  void zero_channel_partials_counters();
  // Grid size for an element-wise kernel over n elements with 256 threads a block.
  unsigned blocks_for(std::size_t n) const;

  // Every call reports the device memory it touched, after enqueueing its work, so that
  // copy_to_device can wait for exactly that work (copy_tracker.hpp).
  static DeviceRange range_of(const Tensor& t) { return {t.data, t.bytes()}; }
  static DeviceRange packed_range(const Tensor& t) { return {t.packed16, t.packed16 ? t.elements() * 2 : 0}; }
  static DeviceRange range_of(const IntTensor& t) { return {t.data, t.size * sizeof(std::int32_t)}; }
  static DeviceRange range_of(const Workspace& w) { return {w.data, w.bytes}; }
  static DeviceRange range_of(const DeviceRange& r) { return r; }
  static DeviceRange scalars_range(const StepScalars* step) { return {step, step ? sizeof(StepScalars) : 0}; }
  // While capturing, events recorded on the stream would belong to the graph: the ranges are
  // kept with the graph, and each replay marks them touched (launch_graph).
  template <class... Views>
  void touched(const Views&... views) {
    const DeviceRange ranges[] = {range_of(views)...};
    if (capturing_) {
      for (const DeviceRange& r : ranges)
        if (r.data && r.bytes) captured_ranges_.push_back(r);
      return;
    }
    tracker_.touched(compute_, ranges, sizeof...(Views));
  }

  // Note [16-bit products on CUDA] (conv.cpp): whether the convolutions and dense layers multiply
  // 16-bit copies of their operands, and in which format.
  bool products16() const { return value_format(options_.precision) != ValueFormat::fp32; }
  ValueFormat product_format() const { return value_format(options_.precision); }
  // Rounds n floats into 16 bits (to nearest even), and widens n 16-bit values into floats, added
  // to what `x` holds where `accumulate` (value_storage.cu). Enqueued only: the caller reports
  // what it touched.
  void narrow16(const float* x, void* packed, std::size_t n, ValueFormat format);
  void widen16(const void* packed, float* x, std::size_t n, ValueFormat format, bool accumulate);
  // The same, reordering [outer, c, plane] values into [outer, plane, c] 16-bit ones, and back:
  // a filter's copy for a channels-last convolution (Note [Filters in channels-last order],
  // value_storage.cu). narrow16_to_channels_last reads x's 16-bit values where it has them.
  void narrow16_to_channels_last(const Tensor& x, void* packed, std::size_t c, std::size_t plane, ValueFormat format);
  void widen16_from_channels_last(const void* packed, float* x, std::size_t n, std::size_t c, std::size_t plane,
                                  ValueFormat format, bool accumulate);
  // A product's 16-bit operand: the tensor's own 16-bit values (Tensor::packed16) where they are
  // aligned as the copies are, else those values or the rounding of its floats in `copy` (Note
  // [16-bit products on CUDA], conv.cpp).
  const void* operand16(const Tensor& t, void* copy);
  // A convolution's filter as its 16-bit operand: operand16's for NCHW, rounded into `copy` in
  // cuDNN's NHWC filter order for a channels-last plan.
  const void* filter16(const ConvPlan& plan, const Tensor& w, void* copy);
  // A convolution's input as its 16-bit operand: operand16's, or reordered into `copy` where the
  // plan is channels last and x is NCHW (a network's input, Backend::takes_channels_last).
  const void* operand16_in_order(const ConvPlan& plan, const Tensor& x, void* copy);
  // Whether any of `values` comes in 16 bits (Tensor::packed16), after checking that each holds its
  // values somewhere, that 16-bit ones reach a backend in bf16 or fp16, and that those from
  // `floats_from` on (gradients) are floats: throws ConfigError naming `call` otherwise.
  bool require_values(const char* call, std::initializer_list<Tensor> values,
                      std::size_t floats_from = static_cast<std::size_t>(-1));
  // BatchNorm where a value is in 16 bits, and from given statistics (batchnorm_kernels.cu, Note
  // [One block a channel]): enqueued only. normalise: y = (x - mean) * scale + beta with scale
  // gamma / sqrt(spread + epsilon) where spread_is_variance, else gamma * spread.
  // With `relu`, y = max(BatchNorm(x), 0), or with a `residual` (not empty) max(BatchNorm(x) +
  // residual, 0); with `relu_y` (not empty), dy comes through a ReLU whose output that is, and
  // with `dresidual` (not empty) that ReLU's input gradient is written there too (Notes
  // [BatchNorm and ReLU in one pass] and [BatchNorm, add and ReLU in one pass], step_plan.cpp).
  void batchnorm_training16(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y, Tensor running_mean,
                            Tensor running_var, float momentum, float epsilon, Tensor saved_mean, Tensor saved_inv_std,
                            bool relu = false, const Tensor& residual = Tensor{});
  void batchnorm_backward16(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& saved_mean,
                            const Tensor& saved_inv_std, Tensor dx, Tensor dgamma, Tensor dbeta, bool accumulate,
                            const Tensor& relu_y = Tensor{}, Tensor dresidual = Tensor{},
                            bool accumulate_residual = false);
  void batchnorm_normalise(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                           const Tensor& spread, bool spread_is_variance, float epsilon, Tensor y);
  // batchnorm_training16 and batchnorm_backward16 on channels-last images (Note [BatchNorm over
  // channels-last images], batchnorm_channels_last.cu), their values floats or 16 bits.
  void batchnorm_training_channels_last(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                        Tensor running_mean, Tensor running_var, float momentum, float epsilon,
                                        Tensor saved_mean, Tensor saved_inv_std, bool relu, const Tensor& residual);
  void batchnorm_backward_channels_last(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                        const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor dx,
                                        Tensor dgamma, Tensor dbeta, bool accumulate, const Tensor& relu_y,
                                        Tensor dresidual, bool accumulate_residual);
  // Throws, naming `call`, what batchnorm_forward_saved refuses: x without channels, a statistic or
  // parameter not one value a channel, an output of another size, values where require_values
  // finds none.
  void check_saved_statistics_call(const char* call, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   const Tensor& saved_mean, const Tensor& saved_inv_std, const Tensor& y);
  // ReLU and add on values of which some are in 16 bits (packed_elementwise.cu): enqueued only.
  void relu_forward16(const Tensor& x, Tensor y);
  void relu_backward16(const Tensor& y, const Tensor& dy, Tensor dx, bool accumulate);
  void add16(const Tensor& a, const Tensor& b, Tensor y);
  // C = op(A) op(B) + beta C as cuBLAS sees them (column-major), C float: on the floats in fp32 and
  // tf32, in bf16 and fp16 on A's and B's 16-bit values (operand16, the copies taken from the
  // front of `ws`) (dense.cpp).
  void dense_product(cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k, const Tensor& a, int lda,
                     const Tensor& b, int ldb, float beta, Tensor c, int ldc, Workspace ws, const char* call);
  // The bytes of a convolution's 16-bit copies (x, y and w, the same in every pass); 0 in fp32 and tf32.
  std::size_t conv_copies_bytes(const ConvShape& shape) const;

  ConvPlan& conv_plan(const Conv2dDesc& desc, const Shape& x, const Shape& y);
  std::optional<AlgoChoice> conv_choice(ConvPlan& plan, ConvAlgoPass pass, std::size_t workspace_bytes);
  // A pass's 16-bit copies (none in fp32 and tf32) and its algorithm within the workspace they
  // leave; none where either does not fit, and the caller halves the batch. A single sample
  // without room for its copies is a DeviceError naming `call`.
  std::optional<AlgoChoice> conv_pass_choice(ConvPlan& plan, ConvAlgoPass pass, Workspace ws, int samples,
                                             const char* call, ConvCopies& copies);
  // The two backward passes (conv.cpp). In bf16 and fp16 the weight pass returns where it left
  // dy's 16-bit values (nullptr where it did not: in fp32 and tf32, or in halves), and the data
  // pass takes them from there where `dy16` is given: a layer's backward rounds dy once.
  const void* conv_backward_filter_pass(const Conv2dDesc& desc, const Tensor& x, const Tensor& dy, Tensor dw,
                                        Tensor dbias, Workspace ws);
  void conv_backward_data_pass(const Conv2dDesc& desc, const Tensor& dy, const void* dy16, const Tensor& w, Tensor dx,
                               bool accumulate, Workspace ws);
  // The algorithm cache file (CudaOptions::algorithm_cache): read when the backend starts;
  // written when measurements were made since the last write, at most every few seconds while
  // planning (`now` or not), and when the backend goes. Never throws: a file that cannot be
  // kept is noted in the description.
  void open_algorithm_cache();
  void keep_measurements(bool now) noexcept;

  CudaOptions options_;
  std::string device_name_;
  int compute_major_ = 0, compute_minor_ = 0, multiprocessors_ = 1;
  std::size_t total_memory_ = 0;
  memory::CudaDeviceResource device_memory_;
  memory::CudaPinnedResource pinned_memory_;
  memory::MemoryResource* query_memory_ = nullptr;  // set_query_memory's; null: device_memory_
  cudaStream_t compute_ = nullptr;
  cudaStream_t copy_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* cublas_workspace_ = nullptr;
  std::size_t cublas_workspace_bytes_ = 0;
  std::size_t library_resident_bytes_ = 0;  // the driver's count of the handles' creation
  LabelError* label_error_ = nullptr;         // host view
  LabelError* label_error_device_ = nullptr;  // the same memory, as kernels see it
  void* loss_scratch_ = nullptr;              // loss_scratch_bytes() of device memory
  void* channel_partials_ = nullptr;          // channel_partials_bytes() of device memory, or null
  CopyTracker tracker_;
  std::array<cudaEvent_t, kFenceEvents> fence_events_{};
  std::uint64_t fences_ = 0;  // fences issued; fence n is fence_events_[n % kFenceEvents]
  bool capturing_ = false;
  std::vector<DeviceRange> captured_ranges_;  // what the calls being captured touch
  std::unordered_map<ConvShape, std::unique_ptr<ConvPlan>, ConvShapeHash> conv_plans_;
  std::unique_ptr<AlgorithmCacheFile> algorithm_cache_;
  std::string algorithm_cache_note_;  // what was read, or why the file is not used
  std::uint64_t measurements_kept_ = 0;
  std::chrono::steady_clock::time_point last_kept_{};
};

}  // namespace cnn::cuda
