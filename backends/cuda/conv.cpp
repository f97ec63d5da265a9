// Convolution on cuDNN's legacy API: NCHW or channels-last NHWC, cross-correlation, grouped (cuDNN's group count,
// filters [out, in / groups, kh, kw]) and dilated, one algorithm per pass chosen by
// conv2d_workspace_bytes (conv_algorithms.cpp) and remembered in the shape's plan. Float tensors,
// or in bf16 and fp16 16-bit copies of them (Note [16-bit products on CUDA]).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include "backends/cuda/detail/operand_copies.hpp"
#include <cnnengine/base/error.hpp>

namespace cnn::cuda {

// The 16-bit copies of a convolution's three tensors, taken from the front of its workspace, and
// cuDNN's workspace after them. `fits` is false where the workspace cannot hold the copies.
struct ConvCopies {
  void* x = nullptr;
  void* y = nullptr;
  void* w = nullptr;
  Workspace rest;
  bool fits = true;
};

namespace {

constexpr float kOne = 1.0f, kZero = 0.0f;

std::string describe(const Conv2dDesc& d, const Shape& x, const Shape& y) {
  return "conv2d " + std::to_string(d.in_channels) + "->" + std::to_string(d.out_channels) + " " +
         std::to_string(d.kernel_h) + "x" + std::to_string(d.kernel_w) + " stride " +
         std::to_string(d.stride) + " padding " + std::to_string(d.padding) + " dilation " +
         std::to_string(d.dilation) + " groups " + std::to_string(d.groups) + " with input " + x.str() +
         " and output " + y.str();
}

void check_weights(const Conv2dDesc& d, const Tensor& w, const char* what) {
  const std::size_t expected = static_cast<std::size_t>(d.out_channels) *
                               static_cast<std::size_t>(d.in_channels / std::max(d.groups, 1)) *
                               static_cast<std::size_t>(d.kernel_h) * static_cast<std::size_t>(d.kernel_w);
  if (w.elements() != expected) {
    throw ShapeError(std::string(what) + ": weights " + w.shape.str() + " hold " +
                     std::to_string(w.elements()) + " values, the convolution needs " +
                     std::to_string(expected));
  }
}

// Samples [first, first + count) of a batched tensor, and of its 16-bit copy where it has one.
Tensor samples_of(const Tensor& t, int first, int count) {
  Tensor part = t;
  const std::size_t skipped = static_cast<std::size_t>(first) * t.sample_elements();
  if (t.data) part.data = t.data + skipped;
  if (t.packed16) part.packed16 = static_cast<std::uint16_t*>(t.packed16) + skipped;
  part.shape[0] = count;
  return part;
}

// A tensor's 16-bit copy as a cuDNN operand or result: aligned as the workspace's copies are, which
// the step's buffers are, but a later half's samples may not be.
bool usable16(const void* packed) {
  return packed && reinterpret_cast<std::uintptr_t>(packed) % kCopyAlignment == 0;
}

std::size_t input_elements(const ConvShape& s) {
  return static_cast<std::size_t>(s[0]) * static_cast<std::size_t>(s[1]) * static_cast<std::size_t>(s[2]) *
         static_cast<std::size_t>(s[3]);
}
std::size_t output_elements(const ConvShape& s) {
  return static_cast<std::size_t>(s[0]) * static_cast<std::size_t>(s[4]) * static_cast<std::size_t>(s[5]) *
         static_cast<std::size_t>(s[6]);
}
std::size_t weight_elements(const ConvShape& s) {
  return static_cast<std::size_t>(s[4]) * static_cast<std::size_t>(s[1] / s[12]) * static_cast<std::size_t>(s[7]) *
         static_cast<std::size_t>(s[8]);
}

ConvCopies take_copies(const ConvShape& s, Workspace ws) {
  OperandCopies copies(ws);
  ConvCopies c;
  c.x = copies.take(input_elements(s));
  c.y = c.x ? copies.take(output_elements(s)) : nullptr;
  c.w = c.y ? copies.take(weight_elements(s)) : nullptr;
  c.fits = c.w != nullptr;
  c.rest = copies.rest();
  return c;
}

}  // namespace

// Note [16-bit products on CUDA]
// In bf16 and fp16 the layers hand the backend float tensors, as in fp32 (docs/design.md, "16-bit
// values"). A convolution rounds the operands of its pass (x and w forward, dy and w
// backward-data, x and dy backward-filter) into 16-bit copies at the front of its workspace, to
// nearest even as the values' storage does, and cuDNN runs on the copies with float accumulation
// (its PSEUDO_BFLOAT16 and PSEUDO_HALF configurations) under tensor-op math. cuDNN's legacy API
// takes one data type for x, w and y, so its result is 16 bits too: it is widened into the float
// output, added where the call accumulates. What CUDA computes is then the CPU's 16-bit product
// (operands rounded, exact products summed in float) with its result rounded once more, as PyTorch's
// autocast convolution returns it; a weight gradient is rounded to 16 bits before it is added to
// the float gradient, as PyTorch's is before its cast back to float. The bias is added, and its
// gradient taken, in float. A dense layer multiplies 16-bit copies of its operands on cuBLAS into a
// float result (cublasGemmEx, dense.cpp), so only its operands are rounded. The copies are part
// of the workspace each layer asks for (conv2d_workspace_bytes, dense_workspace_bytes), so the
// plan counts them. A value the step stores in 16 bits reaches a convolution as those bits (Note
// [Values as they are stored], backend.hpp): rounding its widened floats again would give the
// same bits, so they are cuDNN's operand as they are (copied to the front of the workspace first
// where a later half's samples start off the copies' alignment), and a forward result goes from
// cuDNN straight into the output's 16-bit values (through the front of the workspace where they
// are off that alignment), its bias then added there, widened and rounded again; only a sum into
// 16-bit values goes through the output's floats. The one difference from rounding the widened
// floats: a bf16 subnormal cuDNN writes stays, where to_16bit flushes it to zero. A convolution
// run in halves (Note [Convolutions in halves]) makes each half's copies itself, from the same
// workspace. Depthwise and grouped convolutions multiply in 16 bits here too, where the CPU's own
// kernels for them stay fp32.
std::size_t CudaBackend::conv_copies_bytes(const ConvShape& shape) const {
  if (!products16()) return 0;
  return copies_bytes({input_elements(shape), output_elements(shape), weight_elements(shape)});
}

// Note [Convolutions in halves]
// A convolution at a micro-batch smaller than planned (a batch's last micro-batch, a replay
// after an out-of-memory failure) runs within the workspace planned for the larger one. cuDNN's
// workspace need not shrink with the batch: on an H100 with cuDNN 9.14, deterministic
// backward-filter of a 1x1 convolution needed none at 12 samples and some at 8, 4, 2 and 1. Where no
// algorithm at the call's shape fits its workspace, the call runs as two calls on the two
// halves of its samples, recursively (forward and backward-data write disjoint samples;
// backward-filter adds into dw, and the bias gradient is taken once, over all the samples). The
// plan's workspace holds what a single sample's leanest algorithm needs (conv2d_workspace_bytes),
// so the halving always ends. The halves are the same for the same shape, so the sums are the
// same on every run.
ConvPlan& CudaBackend::conv_plan(const Conv2dDesc& d, const Shape& x, const Shape& y) {
  if (x.rank != 4 || y.rank != 4 || x[1] != d.in_channels || y[1] != d.out_channels || x[0] != y[0]) {
    throw ShapeError(describe(d, x, y) + ": the shapes do not match the convolution");
  }
  if (d.groups <= 0 || d.dilation <= 0 || d.in_channels % d.groups != 0 || d.out_channels % d.groups != 0)
    throw ShapeError(describe(d, x, y) + ": the groups must divide both channel counts, the dilation be positive");
  // y's order is the plan's: an NCHW x under a channels-last y (a network's input) reaches cuDNN
  // as a reordered copy (operand16_in_order).
  const bool channels_last = y.channels_last;
  if (channels_last && !products16())  // the filter's NHWC copy is its 16-bit one
    throw ConfigError(describe(d, x, y) + ": channels-last images in " + to_string(options_.precision) +
                      " (CUDA takes them in bf16 and fp16)");
  const ConvShape key{x[0],       x[1],      x[2],       x[3],      y[1],     y[2],          y[3],
                      d.kernel_h, d.kernel_w, d.stride,  d.padding, d.dilation, d.groups, channels_last};
  auto found = conv_plans_.find(key);
  if (found != conv_plans_.end()) return *found->second;

  auto plan = std::make_unique<ConvPlan>();
  plan->shape = key;
  const cudnnDataType_t type = conv_data_type(options_.precision);
  set_image(plan->x, x[0], x[1], x[2], x[3], channels_last, type);
  set_image(plan->y, y[0], y[1], y[2], y[3], channels_last, type);
  set_image(plan->y_float, y[0], y[1], y[2], y[3], channels_last);
  set_image(plan->bias, 1, y[1], 1, 1, channels_last);
  // The filter's dimensions are [out, in / groups, kh, kw] in either format; NHWC lays its copy
  // out as [out, kh, kw, in / groups] (filter_copy16, filter_from16).
  CNN_CHECK(cudnnSetFilter4dDescriptor(plan->w, type, channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                       d.out_channels, d.in_channels / d.groups, d.kernel_h, d.kernel_w));
  CNN_CHECK(cudnnSetConvolution2dDescriptor(plan->conv, d.padding, d.padding, d.stride, d.stride, d.dilation,
                                            d.dilation, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CNN_CHECK(cudnnSetConvolutionGroupCount(plan->conv, d.groups));
  int n = 0, c = 0, h = 0, w = 0;
  CNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan->conv, plan->x, plan->w, &n, &c, &h, &w));
  if (n != y[0] || c != y[1] || h != y[2] || w != y[3]) {
    throw ShapeError(describe(d, x, y) + ": the output should be [" + std::to_string(n) + "x" +
                     std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w) + "]");
  }
  return *conv_plans_.emplace(key, std::move(plan)).first->second;
}

// The plan's algorithm when its workspace fits what the caller passed, else the fastest that
// fits, without measuring: a call inside a step must not allocate. A smaller workspace in one
// call does not replace the plan's choice. The plan is per shape, not per layer: layers of the
// same convolution shapes (a transposed convolution's adjoint is one: it calls backward-data in
// its forward pass and forward in its backward pass, and asks for those passes' workspaces, so
// each call it makes has a choice here) share the last choice conv2d_workspace_bytes made for a
// pass. Whatever that choice, a call never uses more workspace than it is given: a choice that
// wants more gives way to the fastest that fits, from the same measurements. None where nothing
// fits: the call then runs in halves (Note [Convolutions in halves]).
std::optional<AlgoChoice> CudaBackend::conv_choice(ConvPlan& plan, ConvAlgoPass pass, std::size_t workspace_bytes) {
  AlgoChoice choice = plan.choice[static_cast<std::size_t>(pass)];
  if (!choice.valid() || choice.workspace > workspace_bytes) {
    AlgoSearch search{cudnn_, options_.device, options_.precision, false, &device_memory_, options_.deterministic,
                      false};
    // A single sample has no halves: say what does not fit.
    if (plan.shape[0] == 1) choice = choose_algorithm(search, plan, pass, workspace_bytes);
    else if (std::optional<AlgoChoice> found = find_algorithm(search, plan, pass, workspace_bytes)) choice = *found;
    else return std::nullopt;
    if (!plan.choice[static_cast<std::size_t>(pass)].valid()) plan.choice[static_cast<std::size_t>(pass)] = choice;
  }
  CNN_CHECK(cudnnSetConvolutionMathType(plan.conv, choice.math));
  return choice;
}

std::size_t CudaBackend::do_conv2d_workspace_bytes(const Conv2dDesc& desc, const Shape& x, const Shape& y,
                                                   ConvPass pass, std::size_t limit) {
  activate();
  ConvPlan& plan = conv_plan(desc, x, y);
  // In bf16 and fp16 the operands' copies come first; cuDNN's algorithm gets the rest of the limit.
  const std::size_t copies = conv_copies_bytes(plan.shape);
  const std::size_t cudnn_limit = limit > copies ? limit - copies : 0;
  memory::MemoryResource& scratch = query_memory_ ? *query_memory_ : device_memory_;
  AlgoSearch search{
      cudnn_, options_.device, options_.precision, !options_.fast_start, &scratch, options_.deterministic, true};
  auto choose = [&](ConvAlgoPass p) {
    AlgoChoice& choice = plan.choice[static_cast<std::size_t>(p)];
    choice = choose_algorithm(search, plan, p, cudnn_limit);
    return choice.workspace;
  };
  std::size_t bytes = 0;
  if (pass == ConvPass::forward) bytes = choose(ConvAlgoPass::forward);
  // Backward-data and backward-filter run one after the other on the same workspace.
  else bytes = std::max(choose(ConvAlgoPass::backward_data), choose(ConvAlgoPass::backward_filter));
  bytes += copies;
  keep_measurements(false);
  // Note [Convolutions in halves]: what a single sample's leanest algorithm needs, so that a
  // smaller micro-batch always runs, if need be one sample at a time.
  if (x[0] > 1) {
    Shape x1 = x, y1 = y;
    x1[0] = y1[0] = 1;
    ConvPlan& single = conv_plan(desc, x1, y1);
    AlgoSearch lean{cudnn_, options_.device, options_.precision, false, &device_memory_, options_.deterministic, true};
    auto leanest = [&](ConvAlgoPass p) { return choose_algorithm(lean, single, p, 0).workspace; };
    const std::size_t single_copies = conv_copies_bytes(single.shape);
    if (pass == ConvPass::forward)
      bytes = std::max(bytes, single_copies + leanest(ConvAlgoPass::forward));
    else
      bytes = std::max({bytes, single_copies + leanest(ConvAlgoPass::backward_data),
                        single_copies + leanest(ConvAlgoPass::backward_filter)});
  }
  return bytes;
}

std::optional<AlgoChoice> CudaBackend::conv_pass_choice(ConvPlan& plan, ConvAlgoPass pass, Workspace ws, int samples,
                                                        const char* call, ConvCopies& copies) {
  copies = products16() ? take_copies(plan.shape, ws) : ConvCopies{.rest = ws};
  if (copies.fits) return conv_choice(plan, pass, copies.rest.bytes);
  if (samples > 1) return std::nullopt;
  const std::size_t needed = conv_copies_bytes(plan.shape);
  throw DeviceError(std::string(call) + ": a workspace of " + std::to_string(ws.bytes) +
                    " bytes cannot hold one sample's " + to_string(options_.precision) + " copies of its operands (" +
                    std::to_string(needed) + " bytes): conv2d_workspace_bytes says what it needs");
}

const void* CudaBackend::operand16(const Tensor& t, void* copy) {
  if (usable16(t.packed16)) return t.packed16;
  if (t.packed16)
    CNN_CHECK(cudaMemcpyAsync(copy, t.packed16, t.elements() * 2, cudaMemcpyDeviceToDevice, compute_));
  else
    narrow16(t.data, copy, t.elements(), product_format());
  return copy;
}

namespace {
std::size_t filter_in_channels(const ConvShape& s) { return static_cast<std::size_t>(s[1] / s[12]); }
std::size_t filter_plane(const ConvShape& s) { return static_cast<std::size_t>(s[7]) * static_cast<std::size_t>(s[8]); }
}  // namespace

const void* CudaBackend::filter16(const ConvPlan& plan, const Tensor& w, void* copy) {
  if (!plan.shape[13]) return operand16(w, copy);
  narrow16_to_channels_last(w, copy, filter_in_channels(plan.shape), filter_plane(plan.shape), product_format());
  return copy;
}

const void* CudaBackend::operand16_in_order(const ConvPlan& plan, const Tensor& x, void* copy) {
  if (!plan.shape[13] || x.shape.channels_last) return operand16(x, copy);
  narrow16_to_channels_last(x, copy, static_cast<std::size_t>(x.c()),
                            static_cast<std::size_t>(x.h()) * static_cast<std::size_t>(x.w()), product_format());
  return copy;
}

void CudaBackend::do_conv2d_forward(const Conv2dDesc& desc, const Tensor& x, const Tensor& w,
                                    const Tensor& bias, Tensor y, bool accumulate, Workspace ws) {
  activate();
  check_weights(desc, w, "conv2d_forward");
  require_values("conv2d_forward", {x, y});
  // A sum into 16-bit values is made in floats (no layer asks for one: a transposed convolution
  // adds into a float gradient).
  const bool into_stored = y.packed16 && !accumulate;
  if (!y.data && !into_stored && y.elements() > 0)
    throw ConfigError("conv2d_forward: adding into a 16-bit output needs its floats to work in");
  ConvPlan& plan = conv_plan(desc, x.shape, y.shape);
  ConvCopies copies;
  const std::optional<AlgoChoice> choice =
      conv_pass_choice(plan, ConvAlgoPass::forward, ws, x.n(), "conv2d_forward", copies);
  if (choice && products16()) {
    const void* x16 = operand16_in_order(plan, x, copies.x);
    const void* w16 = filter16(plan, w, copies.w);
    const bool direct = into_stored && usable16(y.packed16);  // cuDNN writes the output's own 16-bit values
    void* y16 = direct ? y.packed16 : copies.y;
    CNN_CHECK(cudnnConvolutionForward(cudnn_, &kOne, plan.x, x16, plan.w, w16, plan.conv,
                                      static_cast<cudnnConvolutionFwdAlgo_t>(choice->algo), copies.rest.data,
                                      choice->workspace, &kZero, plan.y, y16));
    if (into_stored) {
      if (!direct)
        CNN_CHECK(cudaMemcpyAsync(y.packed16, copies.y, y.elements() * 2, cudaMemcpyDeviceToDevice, compute_));
      if (!bias.empty()) add_channel_bias(bias, y);  // widened, added, rounded
    } else {
      if (y.packed16) widen16(y.packed16, y.data, y.elements(), product_format(), false);  // the sum
      widen16(copies.y, y.data, y.elements(), product_format(), accumulate);
    }
  } else if (choice) {
    CNN_CHECK(cudnnConvolutionForward(cudnn_, &kOne, plan.x, x.data, plan.w, w.data, plan.conv,
                                      static_cast<cudnnConvolutionFwdAlgo_t>(choice->algo), ws.data,
                                      choice->workspace, accumulate ? &kOne : &kZero, plan.y, y.data));
  }
  if (choice && !into_stored) {
    if (!bias.empty()) CNN_CHECK(cudnnAddTensor(cudnn_, &kOne, plan.bias, bias.data, &kOne, plan.y_float, y.data));
    if (y.packed16) narrow16(y.data, y.packed16, y.elements(), product_format());
  } else if (!choice) {  // each half leaves its own samples in y.packed16
    const int first = (x.n() + 1) / 2, rest = x.n() - first;
    conv2d_forward(desc, samples_of(x, 0, first), w, bias, samples_of(y, 0, first), accumulate, ws);
    conv2d_forward(desc, samples_of(x, first, rest), w, bias, samples_of(y, first, rest), accumulate, ws);
  }
  touched(x, packed_range(x), w, bias, y, packed_range(y), ws);
}

void CudaBackend::do_conv2d_backward_data(const Conv2dDesc& desc, const Tensor& dy, const Tensor& w,
                                          Tensor dx, bool accumulate, Workspace ws) {
  activate();
  conv_backward_data_pass(desc, dy, nullptr, w, dx, accumulate, ws);
  touched(dy, packed_range(dy), w, dx, ws);
}

void CudaBackend::do_conv2d_backward_filter(const Conv2dDesc& desc, const Tensor& x, const Tensor& dy,
                                            Tensor dw, Tensor dbias, Workspace ws) {
  activate();
  conv_backward_filter_pass(desc, x, dy, dw, dbias, ws);
  touched(x, packed_range(x), dy, packed_range(dy), dw, dbias, ws);
}

// Both passes share one workspace and so one layout of the copies (take_copies on the same
// shape): the data pass writes the x and w copies and leaves the y copy, where the weight pass
// left dy's 16-bit values, as it found it.
void CudaBackend::do_conv2d_backward(const Conv2dDesc& desc, const Tensor& x, const Tensor& dy, const Tensor& w,
                                     Tensor dw, Tensor dbias, Tensor dx, bool accumulate, Workspace ws) {
  activate();
  const void* dy16 = conv_backward_filter_pass(desc, x, dy, dw, dbias, ws);
  if (!dx.empty()) conv_backward_data_pass(desc, dy, dy16, w, dx, accumulate, ws);
  touched(x, packed_range(x), dy, packed_range(dy), w, dw, dbias, dx, ws);
}

void CudaBackend::conv_backward_data_pass(const Conv2dDesc& desc, const Tensor& dy, const void* dy16, const Tensor& w,
                                          Tensor dx, bool accumulate, Workspace ws) {
  check_weights(desc, w, "conv2d_backward_data");
  require_values("conv2d_backward_data", {dy, dx}, 1);
  ConvPlan& plan = conv_plan(desc, dx.shape, dy.shape);
  ConvCopies copies;
  const std::optional<AlgoChoice> choice =
      conv_pass_choice(plan, ConvAlgoPass::backward_data, ws, dx.n(), "conv2d_backward_data", copies);
  if (choice && products16()) {
    if (!dy16) dy16 = operand16(dy, copies.y);
    const void* w16 = filter16(plan, w, copies.w);
    CNN_CHECK(cudnnConvolutionBackwardData(cudnn_, &kOne, plan.w, w16, plan.y, dy16, plan.conv,
                                           static_cast<cudnnConvolutionBwdDataAlgo_t>(choice->algo), copies.rest.data,
                                           choice->workspace, &kZero, plan.x, copies.x));
    widen16(copies.x, dx.data, dx.elements(), product_format(), accumulate);
  } else if (choice) {
    const float beta = accumulate ? 1.0f : 0.0f;
    CNN_CHECK(cudnnConvolutionBackwardData(cudnn_, &kOne, plan.w, w.data, plan.y, dy.data, plan.conv,
                                           static_cast<cudnnConvolutionBwdDataAlgo_t>(choice->algo), ws.data,
                                           choice->workspace, &beta, plan.x, dx.data));
  } else {  // in halves, each rounding its own samples of dy
    const int first = (dx.n() + 1) / 2, rest = dx.n() - first;
    conv_backward_data_pass(desc, samples_of(dy, 0, first), nullptr, w, samples_of(dx, 0, first), accumulate, ws);
    conv_backward_data_pass(desc, samples_of(dy, first, rest), nullptr, w, samples_of(dx, first, rest), accumulate,
                            ws);
  }
}

const void* CudaBackend::conv_backward_filter_pass(const Conv2dDesc& desc, const Tensor& x, const Tensor& dy,
                                                   Tensor dw, Tensor dbias, Workspace ws) {
  check_weights(desc, dw, "conv2d_backward_filter");
  require_values("conv2d_backward_filter", {x, dy});
  if (!dbias.empty() && !dy.data)  // cuDNN's bias gradient sums dy's floats
    throw ConfigError("conv2d_backward_filter: a bias gradient from dy " + dy.shape.str() +
                      " in 16 bits alone (it needs dy's floats)");
  ConvPlan& plan = conv_plan(desc, x.shape, dy.shape);
  ConvCopies copies;
  const std::optional<AlgoChoice> choice =
      conv_pass_choice(plan, ConvAlgoPass::backward_filter, ws, x.n(), "conv2d_backward_filter", copies);
  const void* dy16 = nullptr;
  if (choice && products16()) {
    const void* x16 = operand16_in_order(plan, x, copies.x);
    dy16 = operand16(dy, copies.y);
    CNN_CHECK(cudnnConvolutionBackwardFilter(cudnn_, &kOne, plan.x, x16, plan.y, dy16, plan.conv,
                                             static_cast<cudnnConvolutionBwdFilterAlgo_t>(choice->algo),
                                             copies.rest.data, choice->workspace, &kZero, plan.w, copies.w));
    if (plan.shape[13])
      widen16_from_channels_last(copies.w, dw.data, dw.elements(), filter_in_channels(plan.shape),
                                 filter_plane(plan.shape), product_format(), true);
    else
      widen16(copies.w, dw.data, dw.elements(), product_format(), true);
  } else if (choice) {
    CNN_CHECK(cudnnConvolutionBackwardFilter(cudnn_, &kOne, plan.x, x.data, plan.y, dy.data, plan.conv,
                                             static_cast<cudnnConvolutionBwdFilterAlgo_t>(choice->algo),
                                             ws.data, choice->workspace, &kOne, plan.w, dw.data));
  } else {  // dw accumulates: the halves add up
    const int first = (x.n() + 1) / 2, rest = x.n() - first;
    conv_backward_filter_pass(desc, samples_of(x, 0, first), samples_of(dy, 0, first), dw, Tensor{}, ws);
    conv_backward_filter_pass(desc, samples_of(x, first, rest), samples_of(dy, first, rest), dw, Tensor{}, ws);
  }
  if (!dbias.empty()) {
    CNN_CHECK(cudnnConvolutionBackwardBias(cudnn_, &kOne, plan.y_float, dy.data, &kOne, plan.bias, dbias.data));
  }
  return dy16;
}

}  // namespace cnn::cuda
