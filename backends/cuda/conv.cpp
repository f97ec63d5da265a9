// Convolution on cuDNN's legacy API: NCHW float, cross-correlation, grouped (cuDNN's group count,
// filters [out, in / groups, kh, kw]) and dilated, one algorithm per pass chosen by
// conv2d_workspace_bytes (conv_algorithms.cpp) and remembered in the shape's plan.
#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>

#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include "base/error.hpp"

namespace cnn::cuda {
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

// Samples [first, first + count) of a batched tensor.
Tensor samples_of(const Tensor& t, int first, int count) {
  Tensor part = t;
  part.data = t.data + static_cast<std::size_t>(first) * t.sample_elements();
  part.shape[0] = count;
  return part;
}

}  // namespace

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
  const ConvShape key{x[0], x[1], x[2], x[3], y[1], y[2], y[3], d.kernel_h, d.kernel_w, d.stride, d.padding,
                      d.dilation, d.groups};
  auto found = conv_plans_.find(key);
  if (found != conv_plans_.end()) return *found->second;

  auto plan = std::make_unique<ConvPlan>();
  plan->shape = key;
  set_nchw(plan->x, x[0], x[1], x[2], x[3]);
  set_nchw(plan->y, y[0], y[1], y[2], y[3]);
  set_nchw(plan->bias, 1, y[1], 1, 1);
  CNN_CHECK(cudnnSetFilter4dDescriptor(plan->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, d.out_channels,
                                       d.in_channels / d.groups, d.kernel_h, d.kernel_w));
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
    AlgoSearch search{cudnn_, options_.device, options_.tf32, false, &device_memory_, options_.deterministic, false};
    // A single sample has no halves: say what does not fit.
    if (plan.shape[0] == 1) choice = choose_algorithm(search, plan, pass, workspace_bytes);
    else if (std::optional<AlgoChoice> found = find_algorithm(search, plan, pass, workspace_bytes)) choice = *found;
    else return std::nullopt;
    if (!plan.choice[static_cast<std::size_t>(pass)].valid()) plan.choice[static_cast<std::size_t>(pass)] = choice;
  }
  CNN_CHECK(cudnnSetConvolutionMathType(plan.conv, choice.math));
  return choice;
}

std::size_t CudaBackend::conv2d_workspace_bytes(const Conv2dDesc& desc, const Shape& x, const Shape& y,
                                                ConvPass pass, std::size_t limit) {
  activate();
  ConvPlan& plan = conv_plan(desc, x, y);
  AlgoSearch search{cudnn_, options_.device, options_.tf32, !options_.fast_start, &device_memory_,
                    options_.deterministic, true};
  auto choose = [&](ConvAlgoPass p) {
    AlgoChoice& choice = plan.choice[static_cast<std::size_t>(p)];
    choice = choose_algorithm(search, plan, p, limit);
    return choice.workspace;
  };
  std::size_t bytes = 0;
  if (pass == ConvPass::forward) bytes = choose(ConvAlgoPass::forward);
  // Backward-data and backward-filter run one after the other on the same workspace.
  else bytes = std::max(choose(ConvAlgoPass::backward_data), choose(ConvAlgoPass::backward_filter));
  keep_measurements(false);
  // Note [Convolutions in halves]: what a single sample's leanest algorithm needs, so that a
  // smaller micro-batch always runs, if need be one sample at a time.
  if (x[0] > 1) {
    Shape x1 = x, y1 = y;
    x1[0] = y1[0] = 1;
    ConvPlan& single = conv_plan(desc, x1, y1);
    AlgoSearch lean{cudnn_, options_.device, options_.tf32, false, &device_memory_, options_.deterministic, true};
    auto leanest = [&](ConvAlgoPass p) { return choose_algorithm(lean, single, p, 0).workspace; };
    if (pass == ConvPass::forward) bytes = std::max(bytes, leanest(ConvAlgoPass::forward));
    else bytes = std::max({bytes, leanest(ConvAlgoPass::backward_data), leanest(ConvAlgoPass::backward_filter)});
  }
  return bytes;
}

void CudaBackend::conv2d_forward(const Conv2dDesc& desc, const Tensor& x, const Tensor& w,
                                 const Tensor& bias, Tensor y, bool accumulate, Workspace ws) {
  activate();
  check_weights(desc, w, "conv2d_forward");
  ConvPlan& plan = conv_plan(desc, x.shape, y.shape);
  if (const std::optional<AlgoChoice> choice = conv_choice(plan, ConvAlgoPass::forward, ws.bytes)) {
    CNN_CHECK(cudnnConvolutionForward(cudnn_, &kOne, plan.x, x.data, plan.w, w.data, plan.conv,
                                      static_cast<cudnnConvolutionFwdAlgo_t>(choice->algo), ws.data,
                                      choice->workspace, accumulate ? &kOne : &kZero, plan.y, y.data));
    if (!bias.empty()) CNN_CHECK(cudnnAddTensor(cudnn_, &kOne, plan.bias, bias.data, &kOne, plan.y, y.data));
  } else {
    const int first = (x.n() + 1) / 2, rest = x.n() - first;
    conv2d_forward(desc, samples_of(x, 0, first), w, bias, samples_of(y, 0, first), accumulate, ws);
    conv2d_forward(desc, samples_of(x, first, rest), w, bias, samples_of(y, first, rest), accumulate, ws);
  }
  touched(x, w, bias, y, ws);
}

void CudaBackend::conv2d_backward_data(const Conv2dDesc& desc, const Tensor& dy, const Tensor& w,
                                       Tensor dx, bool accumulate, Workspace ws) {
  activate();
  check_weights(desc, w, "conv2d_backward_data");
  ConvPlan& plan = conv_plan(desc, dx.shape, dy.shape);
  if (const std::optional<AlgoChoice> choice = conv_choice(plan, ConvAlgoPass::backward_data, ws.bytes)) {
    const float beta = accumulate ? 1.0f : 0.0f;
    CNN_CHECK(cudnnConvolutionBackwardData(cudnn_, &kOne, plan.w, w.data, plan.y, dy.data, plan.conv,
                                           static_cast<cudnnConvolutionBwdDataAlgo_t>(choice->algo), ws.data,
                                           choice->workspace, &beta, plan.x, dx.data));
  } else {
    const int first = (dx.n() + 1) / 2, rest = dx.n() - first;
    conv2d_backward_data(desc, samples_of(dy, 0, first), w, samples_of(dx, 0, first), accumulate, ws);
    conv2d_backward_data(desc, samples_of(dy, first, rest), w, samples_of(dx, first, rest), accumulate, ws);
  }
  touched(dy, w, dx, ws);
}

void CudaBackend::conv2d_backward_filter(const Conv2dDesc& desc, const Tensor& x, const Tensor& dy,
                                         Tensor dw, Tensor dbias, Workspace ws) {
  activate();
  check_weights(desc, dw, "conv2d_backward_filter");
  ConvPlan& plan = conv_plan(desc, x.shape, dy.shape);
  if (const std::optional<AlgoChoice> choice = conv_choice(plan, ConvAlgoPass::backward_filter, ws.bytes)) {
    CNN_CHECK(cudnnConvolutionBackwardFilter(cudnn_, &kOne, plan.x, x.data, plan.y, dy.data, plan.conv,
                                             static_cast<cudnnConvolutionBwdFilterAlgo_t>(choice->algo),
                                             ws.data, choice->workspace, &kOne, plan.w, dw.data));
  } else {  // dw accumulates: the halves add up
    const int first = (x.n() + 1) / 2, rest = x.n() - first;
    conv2d_backward_filter(desc, samples_of(x, 0, first), samples_of(dy, 0, first), dw, Tensor{}, ws);
    conv2d_backward_filter(desc, samples_of(x, first, rest), samples_of(dy, first, rest), dw, Tensor{}, ws);
  }
  if (!dbias.empty()) {
    CNN_CHECK(cudnnConvolutionBackwardBias(cudnn_, &kOne, plan.y, dy.data, &kOne, plan.bias, dbias.data));
  }
  touched(x, dy, dw, dbias, ws);
}

}  // namespace cnn::cuda
