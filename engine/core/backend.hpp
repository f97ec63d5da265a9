#pragma once
// The kernels a layer may call. The CPU backend (Eigen) is the reference; the CUDA backend
// (cuDNN, cuBLAS, own kernels) implements the same calls. Layers hold no backend-specific code. At
// the end, the counter-based random numbers that define dropout's mask on every backend.
//
// Conventions for every call:
// - Tensors are views into memory of this backend's device (see device_memory()).
// - Images are NCHW float32. Convolution weights are [out, in, kh, kw]; dense weights [out, in].
// - `accumulate` on an input gradient: false writes dx, true adds to what dx holds (an
//   activation used by two layers gets both contributions).
// - Parameter gradients (dw, dbias, dgamma, dbeta) always accumulate: the trainer zeroes them
//   once per optimizer step, so micro-batches add up to the full batch.
// - Calls are ordered: a call sees the results of every call made before it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <cnnengine/base/error.hpp>
#include <cnnengine/base/task.hpp>
#include <cnnengine/engine/core/backend_types.hpp>
#include <cnnengine/engine/core/tensor.hpp>
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn {

// Throws ConfigError naming `call` for fp32, which is no 16-bit format (Backend::to_16bit, from_16bit).
void require_16bit(const char* call, ValueFormat format);

// A 2-D convolution, PyTorch's Conv2d: `groups` splits the channels into that many independent
// convolutions (both channel counts divisible by it; groups = in = out is depthwise), so weights are
// [out, in / groups, kh, kw]; `dilation` spaces the kernel's taps that many pixels apart.
struct Conv2dDesc {
  int in_channels = 0, out_channels = 0;
  int kernel_h = 1, kernel_w = 1;
  int stride = 1, padding = 0;
  int dilation = 1;
  int groups = 1;
};

struct ActivationDesc {
  Activation kind = Activation::leaky_relu;
  float slope = 0.01f;  // leaky_relu's, for x < 0
};

// Whether an activation's derivative is a function of its output alone, so that backward needs
// only y and forward may write y over x (in place): true for leaky_relu with a positive slope,
// relu6, sigmoid, tanh and hardsigmoid; silu, gelu and hardswish need x.
inline bool derivative_from_output(const ActivationDesc& d) {
  switch (d.kind) {
    case Activation::leaky_relu: return d.slope > 0;
    case Activation::relu6:
    case Activation::sigmoid:
    case Activation::tanh:
    case Activation::hardsigmoid: return true;
    default: return false;
  }
}

struct UpsampleDesc {
  int factor = 2;
  UpsampleMode mode = UpsampleMode::nearest;
};

// Constant padding of H and W, each side its own (PyTorch's nn.ConstantPad2d((left, right, top,
// bottom), value); ONNX's Pad in constant mode): y [N, C, top + H + bottom, left + W + right]
// holds x at (top, left) and `value` around it. value may be -infinity (the padding a max
// pooling ignores), never NaN.
struct PadDesc {
  int top = 0, bottom = 0, left = 0, right = 0;
  float value = 0.0f;
};

// Group normalisation, PyTorch's GroupNorm (and LayerNorm over C, H, W: one group, an affine
// per element): each sample's channels in `groups` groups, each group normalised over its
// channels, H and W with the biased variance; then y = xhat * gamma + beta, gamma and beta per
// channel [C] or, per_element_affine, per element [C, H, W].
struct GroupNormDesc {
  int groups = 1;
  float epsilon = 1e-5f;
  bool per_element_affine = false;
};

enum class PoolMode { max, average };  // average excludes padding from the count

struct Pool2dDesc {
  PoolMode mode = PoolMode::max;
  int window_h = 2, window_w = 2;
  int stride_h = 2, stride_w = 2;
  int pad_h = 0, pad_w = 0;
};

struct SgdConfig {
  float momentum = 0.9f;
  bool nesterov = false;
  float weight_decay = 0.0f;
};

struct AdamWConfig {
  float beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-8f;
  float weight_decay = 0.01f;
};

// Values that change from one micro-batch to the next. Kernels read them from device memory,
// not from their arguments, so that a captured step (see Backend::begin_capture) replays with the
// values of the micro-batch at hand.
struct StepScalars {
  std::uint64_t seed = 0;          // the optimizer step's; dropout layer l draws from splitmix64(seed ^ l)
  std::uint64_t first_sample = 0;  // the micro-batch's first sample in the optimizer step's batch
  float grad_scale = 0.0f;         // the loss gradient's factor: 1 / samples in the optimizer step
};

// How fast a backend is, roughly: the planner's cost model prices a call as its fixed cost plus
// the larger of its arithmetic and its memory traffic at these rates. Round figures that rank
// plans, not measurements.
struct ComputeRates {
  double flops_per_second = 0;
  double bytes_per_second = 0;
  double seconds_per_call = 0;  // a launch, a parallel region: what a call costs however small
};

// Backend calls recorded once and run again on demand (a CUDA graph).
class CapturedCalls {
 public:
  virtual ~CapturedCalls() = default;
  // Runs the recorded calls, ordered after every call made before it.
  virtual void replay() = 0;
};

// Note [One front per backend call]
// The calls that compute, or size a workspace, are Backend's non-virtual public functions, each
// a front (engine/core/backend_calls.cpp) that checks what every backend requires of its
// arguments (shapes that agree, sizes, pointers: O(1) checks, never a scan of the data) and then
// hands the call to the protected virtual do_<name>, which a backend implements. What only one
// backend refuses (what cuDNN alone cannot do) stays in that backend's do_<name>.
// CNN_BACKEND_CALLS lists these calls once. Each entry is CALL(name, (parameters), (arguments),
// (the tensors it writes)), or QUERY(name, (parameters), (arguments)) for a std::size_t answer
// that computes nothing. From it come the do_<name> declarations in Backend, in the CPU and CUDA
// backends (CNN_BACKEND_OVERRIDES) and ForwardingBackend's overrides. Adding a kernel:
// 1. backend.hpp: its documented declaration in class Backend, and its entry below;
// 2. engine/core/backend_calls.cpp: its front, the checks and then do_<name>(arguments);
// 3. its do_<name> in the CPU backend (backends/cpu/) and in the CUDA backend (backends/cuda/).
// Nothing else changes: the forwarding backend and its wrappers pass the new call on by
// themselves. A call made of listed ones (conv2d_backward) is not listed: Backend makes it of
// them by default, and a backend overrides its do_<name> where one call does better. The
// properties, the host transfers, fences and capture stay virtual public calls: they have no
// arguments to check, and a backend overrides them one by one.
#define CNN_BACKEND_CALLS(CALL, QUERY)                                                                               \
  CALL(fill, (Tensor t, float value), (t, value), (t))                                                               \
  CALL(copy_on_device, (const void* src, void* dst, std::size_t bytes), (src, dst, bytes), ())                       \
  CALL(to_16bit, (const Tensor& x, void* packed, ValueFormat format), (x, packed, format), ())                       \
  CALL(from_16bit, (const void* packed, Tensor x, ValueFormat format), (packed, x, format), (x))                     \
  QUERY(conv2d_workspace_bytes, (const Conv2dDesc& desc, const Shape& x, const Shape& y, ConvPass pass,              \
       std::size_t limit),                                                                                           \
      (desc, x, y, pass, limit))                                                                                     \
  CALL(conv2d_forward, (const Conv2dDesc& desc, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,      \
       bool accumulate, Workspace ws),                                                                               \
      (desc, x, w, bias, y, accumulate, ws), (y))                                                                    \
  CALL(conv2d_backward_data, (const Conv2dDesc& desc, const Tensor& dy, const Tensor& w, Tensor dx, bool accumulate, \
       Workspace ws),                                                                                                \
      (desc, dy, w, dx, accumulate, ws), (dx))                                                                       \
  CALL(conv2d_backward_filter, (const Conv2dDesc& desc, const Tensor& x, const Tensor& dy, Tensor dw, Tensor dbias,  \
       Workspace ws),                                                                                                \
      (desc, x, dy, dw, dbias, ws), (dw, dbias))                                                                     \
  QUERY(dense_workspace_bytes, (const Shape& x, int out, ConvPass pass), (x, out, pass))                             \
  CALL(dense_forward, (const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y, Workspace ws),                \
      (x, w, bias, y, ws), (y))                                                                                      \
  CALL(dense_backward_data, (const Tensor& dy, const Tensor& w, Tensor dx, bool accumulate, Workspace ws),           \
      (dy, w, dx, accumulate, ws), (dx))                                                                             \
  CALL(dense_backward_weights, (const Tensor& x, const Tensor& dy, Tensor dw, Tensor dbias, Workspace ws),           \
      (x, dy, dw, dbias, ws), (dw, dbias))                                                                           \
  CALL(relu_forward, (const Tensor& x, Tensor y), (x, y), (y))                                                       \
  CALL(relu_backward, (const Tensor& y, const Tensor& dy, Tensor dx, bool accumulate),                               \
      (y, dy, dx, accumulate), (dx))                                                                                 \
  CALL(activation_forward, (const ActivationDesc& desc, const Tensor& x, Tensor y), (desc, x, y), (y))               \
  CALL(activation_backward, (const ActivationDesc& desc, const Tensor& x, const Tensor& y, const Tensor& dy,         \
       Tensor dx, bool accumulate),                                                                                  \
      (desc, x, y, dy, dx, accumulate), (dx))                                                                        \
  CALL(pool2d_forward, (const Pool2dDesc& desc, const Tensor& x, Tensor y), (desc, x, y), (y))                       \
  CALL(pool2d_backward, (const Pool2dDesc& desc, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor dx,      \
       bool accumulate),                                                                                             \
      (desc, x, y, dy, dx, accumulate), (dx))                                                                        \
  CALL(batchnorm_forward_training, (const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,              \
       Tensor running_mean, Tensor running_var, float momentum, float epsilon, Tensor saved_mean,                    \
       Tensor saved_inv_std),                                                                                        \
      (x, gamma, beta, y, running_mean, running_var, momentum, epsilon, saved_mean, saved_inv_std),                  \
      (y, running_mean, running_var, saved_mean, saved_inv_std))                                                     \
  CALL(batchnorm_forward_inference, (const Tensor& x, const Tensor& gamma, const Tensor& beta,                       \
       const Tensor& running_mean, const Tensor& running_var, float epsilon, Tensor y),                              \
      (x, gamma, beta, running_mean, running_var, epsilon, y), (y))                                                  \
  CALL(batchnorm_forward_saved, (const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& saved_mean, \
       const Tensor& saved_inv_std, Tensor y),                                                                       \
      (x, gamma, beta, saved_mean, saved_inv_std, y), (y))                                                           \
  CALL(batchnorm_backward, (const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& saved_mean,        \
       const Tensor& saved_inv_std, float epsilon, Tensor dx, Tensor dgamma, Tensor dbeta, bool accumulate),         \
      (x, dy, gamma, saved_mean, saved_inv_std, epsilon, dx, dgamma, dbeta, accumulate), (dx, dgamma, dbeta))        \
  CALL(batchnorm_channel_sums, (const Tensor& x, Tensor sums), (x, sums), (sums))                                    \
  CALL(batchnorm_centered_squares, (const Tensor& x, const Tensor& sums, double count, Tensor out),                  \
      (x, sums, count, out), (out))                                                                                  \
  CALL(batchnorm_forward_from_sums, (const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,             \
       Tensor running_mean, Tensor running_var, float momentum, float epsilon, double count, Tensor saved_mean,      \
       Tensor saved_inv_std),                                                                                        \
      (x, gamma, beta, y, running_mean, running_var, momentum, epsilon, count, saved_mean, saved_inv_std),           \
      (y, running_mean, running_var, saved_mean, saved_inv_std))                                                     \
  CALL(batchnorm_backward_sums, (const Tensor& x, const Tensor& dy, const Tensor& saved_mean,                        \
       const Tensor& saved_inv_std, Tensor sums),                                                                    \
      (x, dy, saved_mean, saved_inv_std, sums), (sums))                                                              \
  CALL(batchnorm_backward_from_sums, (const Tensor& x, const Tensor& dy, const Tensor& gamma,                        \
       const Tensor& saved_mean, const Tensor& saved_inv_std, const Tensor& sums, double count, Tensor dx,           \
       bool accumulate),                                                                                             \
      (x, dy, gamma, saved_mean, saved_inv_std, sums, count, dx, accumulate), (dx))                                  \
  CALL(dropout_forward, (const Tensor& x, Tensor y, Tensor mask, float p, const StepScalars* step,                   \
       std::uint64_t layer),                                                                                         \
      (x, y, mask, p, step, layer), (y, mask))                                                                       \
  CALL(dropout_backward, (const Tensor& dy, const Tensor& mask, Tensor dx, bool accumulate),                         \
      (dy, mask, dx, accumulate), (dx))                                                                              \
  CALL(add, (const Tensor& a, const Tensor& b, Tensor y), (a, b, y), (y))                                            \
  CALL(copy_or_add, (const Tensor& src, Tensor dst, bool accumulate), (src, dst, accumulate), (dst))                 \
  CALL(copy_channels, (const Tensor& from, int from_channel, Tensor to, int to_channel, int channels,                \
       bool accumulate),                                                                                             \
      (from, from_channel, to, to_channel, channels, accumulate), (to))                                              \
  CALL(multiply, (const Tensor& a, const Tensor& b, Tensor y), (a, b, y), (y))                                       \
  CALL(multiply_backward, (const Tensor& a, const Tensor& b, const Tensor& dy, Tensor da, bool accumulate_a,         \
       Tensor db, bool accumulate_b),                                                                                \
      (a, b, dy, da, accumulate_a, db, accumulate_b), (da, db))                                                      \
  CALL(add_channel_bias, (const Tensor& bias, Tensor y), (bias, y), (y))                                             \
  CALL(channel_bias_backward, (const Tensor& dy, Tensor dbias), (dy, dbias), (dbias))                                \
  CALL(upsample_forward, (const UpsampleDesc& desc, const Tensor& x, Tensor y), (desc, x, y), (y))                   \
  CALL(upsample_backward, (const UpsampleDesc& desc, const Tensor& dy, Tensor dx, bool accumulate),                  \
      (desc, dy, dx, accumulate), (dx))                                                                              \
  CALL(pad_forward, (const PadDesc& desc, const Tensor& x, Tensor y), (desc, x, y), (y))                             \
  CALL(pad_backward, (const PadDesc& desc, const Tensor& dy, Tensor dx, bool accumulate), (desc, dy, dx, accumulate), \
      (dx))                                                                                                          \
  CALL(group_norm_forward, (const GroupNormDesc& desc, const Tensor& x, const Tensor& gamma, const Tensor& beta,     \
       Tensor y, Tensor saved_mean, Tensor saved_inv_std),                                                           \
      (desc, x, gamma, beta, y, saved_mean, saved_inv_std), (y, saved_mean, saved_inv_std))                          \
  CALL(group_norm_backward, (const GroupNormDesc& desc, const Tensor& x, const Tensor& dy, const Tensor& gamma,      \
       const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor dx, bool accumulate, Tensor dgamma,             \
       Tensor dbeta, Workspace ws),                                                                                  \
      (desc, x, dy, gamma, saved_mean, saved_inv_std, dx, accumulate, dgamma, dbeta, ws), (dx, dgamma, dbeta))       \
  QUERY(group_norm_workspace_bytes, (const GroupNormDesc& desc, const Shape& x), (desc, x))                          \
  CALL(softmax_cross_entropy, (const Tensor& logits, const IntTensor& labels, float label_smoothing, Tensor dlogits, \
       const StepScalars* step, Tensor loss_sum, Tensor correct),                                                    \
      (logits, labels, label_smoothing, dlogits, step, loss_sum, correct), (dlogits, loss_sum, correct))             \
  CALL(pixel_cross_entropy, (const Tensor& logits, const ByteTensor& masks, const Tensor& class_weights,             \
       Tensor dlogits, const StepScalars* step, Tensor loss_sum, Tensor correct, Tensor counted, Workspace ws),      \
      (logits, masks, class_weights, dlogits, step, loss_sum, correct, counted, ws),                                 \
      (dlogits, loss_sum, correct, counted))                                                                         \
  CALL(sigmoid_cross_entropy, (const Tensor& logits, const Tensor& targets, const Tensor& positive_weights,          \
       float threshold_logit, Tensor dlogits, const StepScalars* step, Tensor loss_sum, Tensor correct,              \
       Tensor counted, Workspace ws),                                                                                \
      (logits, targets, positive_weights, threshold_logit, dlogits, step, loss_sum, correct, counted, ws),           \
      (dlogits, loss_sum, correct, counted))                                                                         \
  CALL(regression_loss, (RegressionLoss kind, float delta, const Tensor& outputs, const Tensor& targets,             \
       Tensor doutputs, const StepScalars* step, Tensor loss_sum, Tensor correct, Tensor counted, Workspace ws),     \
      (kind, delta, outputs, targets, doutputs, step, loss_sum, correct, counted, ws),                               \
      (doutputs, loss_sum, correct, counted))                                                                        \
  QUERY(loss_workspace_bytes, (Task task, const Shape& output), (task, output))                                      \
  CALL(sgd_update, (Tensor params, const Tensor& grads, Tensor velocity, const SgdConfig& config,                    \
       float learning_rate, const float* guard),                                                                     \
      (params, grads, velocity, config, learning_rate, guard), (params, velocity))                                   \
  CALL(adamw_update, (Tensor params, const Tensor& grads, Tensor m, Tensor v, const AdamWConfig& config,             \
       float learning_rate, long step, const float* guard),                                                          \
      (params, grads, m, v, config, learning_rate, step, guard), (params, m, v))                                     \
  CALL(unscale_gradients, (Tensor grads, float inverse_scale, Tensor found),                                         \
      (grads, inverse_scale, found), (grads, found))

// A backend that implements every call writes CNN_BACKEND_OVERRIDES in its class.
#define CNN_BACKEND_PURE_CALL(name, params, args, outputs) virtual void do_##name params = 0;
#define CNN_BACKEND_PURE_QUERY(name, params, args) virtual std::size_t do_##name params = 0;
#define CNN_BACKEND_OVERRIDE_CALL(name, params, args, outputs) void do_##name params override;
#define CNN_BACKEND_OVERRIDE_QUERY(name, params, args) std::size_t do_##name params override;
#define CNN_BACKEND_OVERRIDES CNN_BACKEND_CALLS(CNN_BACKEND_OVERRIDE_CALL, CNN_BACKEND_OVERRIDE_QUERY)

class Backend {
 public:
  virtual ~Backend() = default;

  virtual DeviceKind kind() const = 0;
  virtual std::string description() const = 0;  // e.g. "cpu: Eigen 3.4.0, 2 threads"
  // How this backend's convolutions and dense layers multiply.
  virtual Precision precision() const { return Precision::fp32; }
  // Note [Values as they are stored]
  // True where the calls below that say so (the convolutions, ReLU, add, pooling, BatchNorm) take
  // a value in this backend's 16-bit format (value_format(precision())) as its 16-bit bits alone
  // (Tensor::packed16, its floats `data` null) and round an output into its packed16 themselves,
  // and the products (convolutions, dense) take the bits beside a value's floats as their
  // 16-bit operand: the CUDA backend in bf16 and fp16. A step on a plan that stores values in that
  // format then hands a layer that reads and writes its values only through such calls
  // (Layer::packed_values) the values as they are stored, with no float copies in between; other
  // layers get float copies, with their 16-bit bits beside them for the products. A backend that
  // says false is never handed packed16.
  virtual bool takes_packed_values() const { return false; }
  // True where batchnorm_relu_forward_training and batchnorm_relu_backward run in one pass over
  // the values each (Note [BatchNorm and ReLU in one pass], step_plan.cpp): a step then has its
  // BatchNorm layers run the ReLU after them in their own calls. Elsewhere those calls are the
  // two they are made of, and no step makes them.
  virtual bool fuses_batchnorm_relu() const { return false; }
  // The same for batchnorm_add_relu_forward_training and batchnorm_add_relu_backward, where
  // fuses_batchnorm_relu holds too (Note [BatchNorm, add and ReLU in one pass], step_plan.cpp):
  // the CPU, CUDA in bf16 and fp16. The plan that fuses them keeps the ReLU's output a little
  // longer, so a backend that would only make the calls they are made of says false.
  virtual bool fuses_batchnorm_add_relu() const { return false; }
  // True where conv2d_relu_forward runs in one pass over the output (Note [A convolution and its
  // ReLU in one pass], step_plan.cpp): the CPU. A step then has the convolutions whose output only
  // a ReLU reads run that ReLU's forward in their own call.
  virtual bool fuses_conv_relu() const { return false; }
  // True where the convolutions, BatchNorm's calls (but synchronised BatchNorm's), pooling and the
  // channel biases take channels-last images (Note [Channels-last images], tensor.hpp), all of a
  // call's images in that order, weights [out, in, kh, kw] as always; a convolution's x may also
  // be NCHW under a channels-last y (a network's input). CUDA in bf16 and fp16 where asked
  // (CudaOptions::channels_last), whose tensor-core convolutions read that order without a
  // transpose. Element-wise calls take either order on every backend; every other call, and every
  // call on a backend that says false, refuses them.
  virtual bool takes_channels_last() const { return false; }

  // Where tensors of this backend live, and host memory the loader fills for copy_to_device
  // (pinned on CUDA). Both are upstreams: the engine makes a handful of large requests.
  virtual memory::MemoryResource& device_memory() = 0;
  virtual memory::MemoryResource& staging_memory() = 0;
  // Where the workspace queries take the scratch they may need to answer (CUDA: cuDNN's
  // algorithms measured on scratch tensors and a workspace), until set again; null:
  // device_memory(). A planner points it at its budget's memory while it plans, so that the
  // budget counts that scratch and caps it. Returns what it replaces.
  virtual memory::MemoryResource* set_query_memory(memory::MemoryResource*) { return nullptr; }
  // Bytes the backend's libraries hold for themselves (cuBLAS workspace, ...): counted in the
  // budget under workspace.
  virtual std::size_t library_reserved_bytes() const { return 0; }
  // Bytes device_memory() could still give this process now (the host's available memory, within
  // its control group; the GPU's free memory); 0 when unknown. A run given no budget is bounded
  // by it.
  virtual std::size_t available_memory() const { return 0; }
  // The most values one tensor may hold (cuDNN's descriptors count them in an int): the planners
  // keep every micro-batch's tensors under it.
  virtual std::size_t largest_tensor_elements() const { return SIZE_MAX; }
  virtual ComputeRates compute_rates() const = 0;
  // Whether the same seed gives the same bits on this backend, and what that costs, in words,
  // once planning has chosen the methods (CUDA: the deterministic convolution algorithms' measured
  // time against the fastest's). Empty: nothing known.
  virtual std::string determinism_report() const { return {}; }

  // host -> device and device -> host. copy_to_device returns once `host` may be reused;
  // later calls see the data.
  virtual void copy_to_device(const void* host, void* device, std::size_t bytes) = 0;
  virtual void copy_to_host(const void* device, void* host, std::size_t bytes) = 0;
  void fill(Tensor t, float value);
  virtual void synchronize() = 0;

  // Whether copies between host and device run beside the compute calls (CUDA's copy stream):
  // the trainer then copies a micro-batch's input while the one before it computes, and reads a
  // step's loss one step late (the trainer's input stager, Trainer::submit_step).
  virtual bool copies_overlap_compute() const { return false; }
  // Copies that return at once. Until the fence is reached, `host` must stay as it is (to the
  // device) or be left unread (to the host). Later calls see the data. Here: copied at once.
  virtual Fence copy_to_device_async(const void* host, void* device, std::size_t bytes) {
    copy_to_device(host, device, bytes);
    return {};
  }
  virtual Fence copy_to_host_async(const void* device, void* host, std::size_t bytes) {
    copy_to_host(device, host, bytes);
    return {};
  }
  virtual bool reached(Fence) { return true; }
  // Blocks until the fence is reached; throws what the device found meanwhile, as synchronize().
  virtual void wait(Fence) {}
  // dst = src over `bytes` of this backend's memory, ordered as a compute call (and recorded by
  // a capture).
  void copy_on_device(const void* src, void* dst, std::size_t bytes);
  // 16-bit values (format bf16 or fp16; fp32 is a ConfigError): `packed` holds x.elements() of
  // them. to_16bit rounds to nearest, ties to even (fp16: beyond its range, infinity of the sign;
  // bf16: a subnormal flushed to a zero of its sign, as the CPU computes); a NaN stays a NaN.
  // from_16bit is exact.
  void to_16bit(const Tensor& x, void* packed, ValueFormat format);
  void from_16bit(const void* packed, Tensor x, ValueFormat format);

  // Every *_workspace_bytes query answers for a batch of x[0] samples and for every smaller one of
  // the same sample shape: a step runs an epoch's short last batch, accumulation's last
  // micro-batch and a replay after an out-of-memory failure in the workspace planned for the
  // longer one (CUDA: Note [Convolutions in halves]; CPU: Note [A workspace for every smaller
  // micro-batch]). A call given less than its query says is a bug in the caller.
  //
  // Convolution. The workspace a pass needs for the fastest method whose workspace is at most
  // `limit` bytes; the backend remembers that choice for the calls below.
  std::size_t conv2d_workspace_bytes(const Conv2dDesc& desc, const Shape& x, const Shape& y,
                                     ConvPass pass, std::size_t limit);
  // bias may be empty (no bias). accumulate: y += conv(x) (+ bias) instead of y = ... (a
  // transposed convolution's backward-data adds its input gradient this way, with no buffer).
  // Note [Values as they are stored]: x may come as 16 bits alone, and where y.packed16 is set
  // the output is rounded into it (y.data is then scratch, its values left unspecified).
  void conv2d_forward(const Conv2dDesc& desc, const Tensor& x, const Tensor& w,
                      const Tensor& bias, Tensor y, bool accumulate, Workspace ws);
  // dy may come as 16 bits alone (a transposed convolution's input).
  void conv2d_backward_data(const Conv2dDesc& desc, const Tensor& dy, const Tensor& w,
                            Tensor dx, bool accumulate, Workspace ws);
  // dbias may be empty (no bias). x, or dy as a transposed convolution passes its input, may come
  // as 16 bits alone.
  void conv2d_backward_filter(const Conv2dDesc& desc, const Tensor& x, const Tensor& dy,
                              Tensor dw, Tensor dbias, Workspace ws);
  // Both passes of a layer's backward in one call, so that a backend may read dy once (CUDA
  // rounds it to 16 bits once in bf16 and fp16): conv2d_backward_filter(x, dy, dw, dbias), then,
  // where dx is not empty, conv2d_backward_data(dy, w, dx, accumulate), with one workspace for
  // both (conv2d_workspace_bytes' backward answer). By default those two calls.
  void conv2d_backward(const Conv2dDesc& desc, const Tensor& x, const Tensor& dy, const Tensor& w, Tensor dw,
                       Tensor dbias, Tensor dx, bool accumulate, Workspace ws);
  // A convolution and then a ReLU over its output in one call: y = max(conv(x) + bias, 0)
  // (conv2d_forward with the same workspace, then relu_forward in place). By default those calls;
  // fuses_conv_relu says where not.
  void conv2d_relu_forward(const Conv2dDesc& desc, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,
                           Workspace ws);

  // Dense: y[N,out] = x[N,in] * w^T + bias. x may have any shape with N first. The workspace a
  // pass needs for input x (batched) and `out` units; none where the library keeps its own.
  std::size_t dense_workspace_bytes(const Shape& x, int out, ConvPass pass);
  void dense_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y, Workspace ws);
  void dense_backward_data(const Tensor& dy, const Tensor& w, Tensor dx, bool accumulate, Workspace ws);
  void dense_backward_weights(const Tensor& x, const Tensor& dy, Tensor dw, Tensor dbias, Workspace ws);

  // Note [Values as they are stored]: x and y, and y in backward, may be 16 bits alone.
  void relu_forward(const Tensor& x, Tensor y);
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor dx, bool accumulate);

  // Activations other than ReLU (ActivationDesc). y may be x (in place). Backward reads y where
  // derivative_from_output(desc) (x may then be empty), x otherwise (y may be empty).
  void activation_forward(const ActivationDesc& desc, const Tensor& x, Tensor y);
  void activation_backward(const ActivationDesc& desc, const Tensor& x, const Tensor& y, const Tensor& dy,
                           Tensor dx, bool accumulate);

  // The output's size sets the windows: pooling with ceil_mode has one more window at the
  // bottom and right, clipped to the input (and, averaging, divided by what is inside). Note
  // [Values as they are stored]: x and y may be 16 bits alone; dy and dx are floats.
  void pool2d_forward(const Pool2dDesc& desc, const Tensor& x, Tensor y);
  // Max pooling routes each gradient to the window's first maximum, as forward chose it from x.
  // CUDA finds it from x alone, so that an x recomputed with other rounding than the forward that
  // made y (BatchNorm) still gives each gradient to one input.
  void pool2d_backward(const Pool2dDesc& desc, const Tensor& x, const Tensor& y,
                       const Tensor& dy, Tensor dx, bool accumulate);

  // Batch normalisation over N, H and W per channel. Running statistics move by `momentum`
  // towards the batch's (variance unbiased, as PyTorch and cuDNN do); saved_mean and
  // saved_inv_std keep what backward needs. Note [Values as they are stored]: x, and y in every
  // call here and in synchronised BatchNorm's below, may be 16 bits alone; dy and dx are floats.
  void batchnorm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  Tensor y, Tensor running_mean, Tensor running_var,
                                  float momentum, float epsilon, Tensor saved_mean,
                                  Tensor saved_inv_std);
  void batchnorm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   const Tensor& running_mean, const Tensor& running_var,
                                   float epsilon, Tensor y);
  // y from x with the batch statistics batchnorm_forward_training saved (a recomputation during
  // backward): y = (x - saved_mean) * saved_inv_std * gamma + beta, computed as that call computes
  // y, so that on the CPU both give the same bits. No running statistic moves.
  void batchnorm_forward_saved(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                               const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor y);
  // epsilon: forward's (cuDNN wants the same value in both passes).
  void batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                          const Tensor& saved_mean, const Tensor& saved_inv_std, float epsilon,
                          Tensor dx, Tensor dgamma, Tensor dbeta, bool accumulate);
  // BatchNorm and then a ReLU over its output, in one call each way: y = max(batchnorm(x), 0)
  // (batchnorm_forward_training, then relu_forward in place), and backward from the ReLU's
  // output y and output gradient dy (relu_backward, then batchnorm_backward). The second may write
  // the ReLU's input gradient over dy. By default those calls; fuses_batchnorm_relu says where not.
  void batchnorm_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                       Tensor running_mean, Tensor running_var, float momentum, float epsilon,
                                       Tensor saved_mean, Tensor saved_inv_std);
  void batchnorm_relu_backward(const Tensor& x, const Tensor& y, Tensor dy, const Tensor& gamma,
                               const Tensor& saved_mean, const Tensor& saved_inv_std, float epsilon, Tensor dx,
                               Tensor dgamma, Tensor dbeta, bool accumulate);
  // The same with a residual added before the ReLU, as a ResNet block ends: y = max(batchnorm(x) +
  // residual, 0) (batchnorm_forward_training into y, add(y, residual, y), relu_forward in place),
  // and backward (relu_backward, copy_or_add of its result into dresidual, which
  // accumulate_residual says, then batchnorm_backward); the second may write the ReLU's input
  // gradient over dy. residual and dresidual are x's shape; dresidual may be empty (the residual
  // wants no gradient). By default those calls.
  void batchnorm_add_relu_forward_training(const Tensor& x, const Tensor& residual, const Tensor& gamma,
                                           const Tensor& beta, Tensor y, Tensor running_mean, Tensor running_var,
                                           float momentum, float epsilon, Tensor saved_mean, Tensor saved_inv_std);
  void batchnorm_add_relu_backward(const Tensor& x, const Tensor& y, Tensor dy, const Tensor& gamma,
                                   const Tensor& saved_mean, const Tensor& saved_inv_std, float epsilon, Tensor dx,
                                   Tensor dgamma, Tensor dbeta, bool accumulate, Tensor dresidual,
                                   bool accumulate_residual);

  // Synchronised BatchNorm (data-parallel): the batch statistics over every rank's micro-batch,
  // from per-channel sums that the ranks add up between these calls. `count` is the values per
  // channel over every rank (N x H x W each). Forward:
  //   channel_sums:          sums[c] = sum of x over N, H, W
  //   centered_squares:      out[c] = sum of (x - sums[c] / count)^2          (sums: every rank's)
  //   forward_from_sums:     from saved_mean = every rank's sums and saved_inv_std = every rank's
  //                          centered squares, both replaced by the mean and 1 / sqrt(var + eps);
  //                          y, and the running statistics, as batchnorm_forward_training
  // Backward (dgamma and dbeta are the rank's own sums[C + c] and sums[c]: the trainer adds them
  // up over the ranks with the other gradients):
  //   backward_sums:         sums[c] = sum of dy, sums[C + c] = sum of dy * xhat
  //   backward_from_sums:    dx from every rank's sums, as batchnorm_backward computes it
  void batchnorm_channel_sums(const Tensor& x, Tensor sums);
  void batchnorm_centered_squares(const Tensor& x, const Tensor& sums, double count, Tensor out);
  void batchnorm_forward_from_sums(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                   Tensor running_mean, Tensor running_var, float momentum, float epsilon,
                                   double count, Tensor saved_mean, Tensor saved_inv_std);
  void batchnorm_backward_sums(const Tensor& x, const Tensor& dy, const Tensor& saved_mean,
                               const Tensor& saved_inv_std, Tensor sums);
  void batchnorm_backward_from_sums(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                    const Tensor& saved_mean, const Tensor& saved_inv_std,
                                    const Tensor& sums, double count, Tensor dx, bool accumulate);

  // mask[i] = 0 or 1/(1-p), drawn from dropout_keep(splitmix64(step->seed ^ layer),
  // step->first_sample * x.sample_elements() + i) (dropout_keep: at the end of this file), so
  // every backend draws the same mask for the same seed, and a sample's mask depends on its place
  // in the optimizer step's batch, not on how that batch was split into micro-batches. `step` is
  // in this backend's device memory.
  void dropout_forward(const Tensor& x, Tensor y, Tensor mask, float p, const StepScalars* step,
                       std::uint64_t layer);
  void dropout_backward(const Tensor& dy, const Tensor& mask, Tensor dx, bool accumulate);

  // Note [Values as they are stored]: a, b and y may be 16 bits alone.
  void add(const Tensor& a, const Tensor& b, Tensor y);
  // dst = src (accumulate false; nothing to do where dst is src) or dst += src.
  void copy_or_add(const Tensor& src, Tensor dst, bool accumulate);

  // Channels [from_channel, from_channel + channels) of `from` to channels [to_channel, ...) of
  // `to` (written, or added with accumulate): two [N, C, H, W] tensors of one N, H and W, or two
  // [N, C]. Concatenation's forward and backward.
  void copy_channels(const Tensor& from, int from_channel, Tensor to, int to_channel, int channels,
                     bool accumulate);
  // y = a * b element-wise, where b has a's shape or [N, C, 1, 1] (one factor per sample and
  // channel, over H and W: the squeeze-and-excitation gate). Backward: da = dy * b, db = dy * a
  // (summed over H and W where b is per channel); either may be empty (not wanted).
  void multiply(const Tensor& a, const Tensor& b, Tensor y);
  void multiply_backward(const Tensor& a, const Tensor& b, const Tensor& dy, Tensor da, bool accumulate_a,
                         Tensor db, bool accumulate_b);
  // y[n, c, h, w] += bias[c]; dbias[c] += the sum of dy[., c, ., .] (a transposed convolution's
  // bias, which the convolution calls it is made of do not add). Note [Values as they are
  // stored]: y may be 16 bits alone, the sum then rounded into them.
  void add_channel_bias(const Tensor& bias, Tensor y);
  void channel_bias_backward(const Tensor& dy, Tensor dbias);

  // Upsampling (UpsampleDesc): y is x's size times the factor.
  void upsample_forward(const UpsampleDesc& desc, const Tensor& x, Tensor y);
  void upsample_backward(const UpsampleDesc& desc, const Tensor& dy, Tensor dx, bool accumulate);

  // Padding (PadDesc): y is x with the pads around each plane; backward takes dy's inner window.
  void pad_forward(const PadDesc& desc, const Tensor& x, Tensor y);
  void pad_backward(const PadDesc& desc, const Tensor& dy, Tensor dx, bool accumulate);

  // Group normalisation (GroupNormDesc) of x [N, C, H, W] (or [N, C]): saved_mean and
  // saved_inv_std hold each sample's groups' mean and 1 / sqrt(var + eps), [N x groups], and may be
  // empty (inference keeps nothing). Backward writes (or adds to) dx and adds to dgamma and dbeta;
  // each may be empty (not wanted). Its workspace `ws` holds at least
  // group_norm_workspace_bytes(desc, x.shape) bytes, whatever is wanted (forward needs none).
  void group_norm_forward(const GroupNormDesc& desc, const Tensor& x, const Tensor& gamma,
                          const Tensor& beta, Tensor y, Tensor saved_mean, Tensor saved_inv_std);
  void group_norm_backward(const GroupNormDesc& desc, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                           const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor dx, bool accumulate,
                           Tensor dgamma, Tensor dbeta, Workspace ws);
  // The bytes group_norm_backward needs for input x [N, C, H, W] or [N, C] (batched).
  std::size_t group_norm_workspace_bytes(const GroupNormDesc& desc, const Shape& x);

  // Softmax cross-entropy over logits [N, classes] and int32 labels [N], with PyTorch's label
  // smoothing e (0 <= e < 1): a sample's loss is (1 - e) (-log p_label) + e mean_k (-log p_k).
  // Adds the sum of the N losses to loss_sum[0] and the number of correct argmax predictions to
  // correct[0]. When dlogits is not empty, writes dlogits = (p - (1 - e) onehot - e / classes) *
  // step->grad_scale (`step` in device memory; unused, and may be null, without dlogits). With
  // e = 0 the results are those of the plain loss to the bit. A label outside [0, classes) is an
  // error the backend reports by throwing DataError.
  void softmax_cross_entropy(const Tensor& logits, const IntTensor& labels, float label_smoothing,
                             Tensor dlogits, const StepScalars* step, Tensor loss_sum, Tensor correct);

  // The other tasks' losses (base/task.hpp, which gives PyTorch's definitions). Each sample's
  // loss is the mean over its elements; each call adds the sum over its N samples of their losses
  // to loss_sum[0], what the task's accuracy counts right to correct[0] and what it counts over
  // to counted[0]. When the gradient (dlogits, doutputs) is not empty it is written, not added:
  // d(the sum of the N losses)/d(output) * step->grad_scale (`step` in device memory; unused, and
  // may be null, without a gradient). Weights are floats in this backend's memory, one a class,
  // or empty for all 1. A target out of range is a DataError, thrown as softmax_cross_entropy's.
  // `ws` holds loss_workspace_bytes(task, output's shape) bytes (the step plan's, at the loss):
  // a step allocates nothing.
  //
  // Segmentation: logits [N, K, H, W], masks N x H x W bytes, each a class in [0, K) or
  // kIgnoreMask. A sample's loss is sum_p w[y_p] (-log softmax(logits_p)[y_p]) / sum_p w[y_p]
  // over its pixels p not ignored, 0 where that sum of weights is 0. correct: the pixels not
  // ignored whose largest logit (the first of equal ones) is their class; counted: the pixels not
  // ignored.
  void pixel_cross_entropy(const Tensor& logits, const ByteTensor& masks, const Tensor& class_weights,
                           Tensor dlogits, const StepScalars* step, Tensor loss_sum, Tensor correct,
                           Tensor counted, Workspace ws);
  // Multi-label: logits x [N, K], targets y [N, K] floats in [0, 1]. A sample's loss is the mean
  // over k of -(p_k y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))), computed without overflow
  // for any finite x. correct: the labels where (x > threshold_logit) equals (y > 0.5); counted:
  // N x K.
  void sigmoid_cross_entropy(const Tensor& logits, const Tensor& targets, const Tensor& positive_weights,
                             float threshold_logit, Tensor dlogits, const StepScalars* step,
                             Tensor loss_sum, Tensor correct, Tensor counted, Workspace ws);
  // Regression: outputs [N, T], targets [N, T] floats. A sample's loss is the mean over t of
  // (y - t)^2 (mse), or of 0.5 (y - t)^2 where |y - t| < delta and delta (|y - t| - 0.5 delta)
  // elsewhere (huber). correct: the sum of |y - t| (the mean absolute error's numerator);
  // counted: N x T.
  void regression_loss(RegressionLoss kind, float delta, const Tensor& outputs, const Tensor& targets,
                       Tensor doutputs, const StepScalars* step, Tensor loss_sum, Tensor correct,
                       Tensor counted, Workspace ws);
  // The bytes of scratch the loss of `task` needs over an output of `output` ([N, ...]).
  std::size_t loss_workspace_bytes(Task task, const Shape& output);

  // Fused optimizer updates over one flat block of parameters. `guard`, where not null, is a
  // float in this backend's memory (the step's loss sum): when it is not finite the update
  // changes nothing, so that a step can be applied before its loss is read back.
  void sgd_update(Tensor params, const Tensor& grads, Tensor velocity, const SgdConfig& config,
                  float learning_rate, const float* guard);
  void adamw_update(Tensor params, const Tensor& grads, Tensor m, Tensor v,
                    const AdamWConfig& config, float learning_rate, long step, const float* guard);
  // Dynamic loss scaling (engine/train/loss_scale.hpp): grads *= inverse_scale, and `found` (one
  // float in this backend's memory) set to 1 where any gradient was NaN or infinite, left as it
  // was otherwise (PyTorch's _amp_foreach_non_finite_check_and_unscale_).
  void unscale_gradients(Tensor grads, float inverse_scale, Tensor found);

  // Capture: between begin_capture() and end_capture() the compute calls above are recorded
  // instead of run (no copies, no synchronize). Tensors are recorded by address and every other
  // argument by value, so what changes between replays must come from device memory
  // (StepScalars). end_capture() returns the recording or throws what made the capture fail;
  // abort_capture() ends a capture after a call threw. Either way capturing has ended. A backend
  // that cannot capture says why in capture_support() (empty: it can).
  virtual std::string capture_support() const { return "this backend cannot capture calls"; }
  virtual void begin_capture() { throw ConfigError(capture_support()); }
  virtual std::unique_ptr<CapturedCalls> end_capture() { throw ConfigError(capture_support()); }
  virtual void abort_capture() noexcept {}

 protected:
  // The backend's own implementations of the calls above, each reached through its front: Note
  // [One front per backend call].
  CNN_BACKEND_CALLS(CNN_BACKEND_PURE_CALL, CNN_BACKEND_PURE_QUERY)
  // The calls made of others: by default the calls they are made of (through their fronts, so a
  // wrapper sees each); a backend overrides one where it does better in one call.
  virtual void do_conv2d_backward(const Conv2dDesc& desc, const Tensor& x, const Tensor& dy, const Tensor& w,
                                  Tensor dw, Tensor dbias, Tensor dx, bool accumulate, Workspace ws);
  virtual void do_conv2d_relu_forward(const Conv2dDesc& desc, const Tensor& x, const Tensor& w, const Tensor& bias,
                                      Tensor y, Workspace ws);
  virtual void do_batchnorm_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                                  Tensor running_mean, Tensor running_var, float momentum,
                                                  float epsilon, Tensor saved_mean, Tensor saved_inv_std);
  virtual void do_batchnorm_relu_backward(const Tensor& x, const Tensor& y, Tensor dy, const Tensor& gamma,
                                          const Tensor& saved_mean, const Tensor& saved_inv_std, float epsilon,
                                          Tensor dx, Tensor dgamma, Tensor dbeta, bool accumulate);
  virtual void do_batchnorm_add_relu_forward_training(const Tensor& x, const Tensor& residual, const Tensor& gamma,
                                                      const Tensor& beta, Tensor y, Tensor running_mean,
                                                      Tensor running_var, float momentum, float epsilon,
                                                      Tensor saved_mean, Tensor saved_inv_std);
  virtual void do_batchnorm_add_relu_backward(const Tensor& x, const Tensor& y, Tensor dy, const Tensor& gamma,
                                              const Tensor& saved_mean, const Tensor& saved_inv_std, float epsilon,
                                              Tensor dx, Tensor dgamma, Tensor dbeta, bool accumulate,
                                              Tensor dresidual, bool accumulate_residual);
};

}  // namespace cnn

// ---- Counter-based random numbers: the value for (seed, index) needs no state, so every
// thread, every backend and every replay of a step draws the same numbers. Part of the contract:
// a backend draws dropout's mask with dropout_keep (Backend::dropout_forward).
#if defined(__CUDACC__)
#define CNN_HOST_DEVICE __host__ __device__
#else
#define CNN_HOST_DEVICE
#endif

namespace cnn {

CNN_HOST_DEVICE inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) with 24 bits, exact in float.
CNN_HOST_DEVICE inline float uniform01(std::uint64_t seed, std::uint64_t index) {
  return static_cast<float>(splitmix64(seed ^ splitmix64(index)) >> 40) * (1.0f / 16777216.0f);
}

CNN_HOST_DEVICE inline bool dropout_keep(std::uint64_t seed, std::uint64_t index, float p) {
  return uniform01(seed, index) >= p;
}

}  // namespace cnn
