// Backend's public calls (Note [One front per backend call], backend.hpp): each checks what
// every backend requires of its arguments, in O(1), and hands the call to the backend's
// do_<name>. A check that one backend alone needs stays in that backend.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>

#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/backend.hpp>

namespace cnn {
namespace {

bool absent(const Tensor& t) { return t.data == nullptr || t.elements() == 0; }

// The checks the task losses share: the gradient's size, the step scalars it needs, the
// one-element sums.
void check_loss_outputs(const char* call, const Tensor& output, const Tensor& gradient, const StepScalars* step,
                        const Tensor& loss_sum, const Tensor& correct, const Tensor& counted) {
  if (!gradient.empty() && gradient.elements() != output.elements())
    throw ShapeError(std::string(call) + ": the gradient " + gradient.shape.str() + " is not the size of the output " +
                     output.shape.str());
  if (absent(loss_sum) || absent(correct) || absent(counted))
    throw ShapeError(std::string(call) + ": the loss, accuracy and count sums need a float each");
  if (!gradient.empty() && !step) throw ConfigError(std::string(call) + ": a gradient needs the step scalars");
}

// Weights one a class, or empty for all 1.
void check_class_weights(const char* call, const char* what, const Tensor& weights, std::size_t classes) {
  if (!absent(weights) && weights.elements() != classes)
    throw ConfigError(std::string(call) + ": " + std::to_string(weights.elements()) + " " + what + " for " +
                      std::to_string(classes) + " classes");
}

// a and b hold as many values.
void same_size(const char* call, const Tensor& a, const Tensor& b) {
  if (a.elements() != b.elements())
    throw ShapeError(std::string(call) + ": " + a.shape.str() + " and " + b.shape.str() + " differ in size");
}

// y is x [N, C, H, W] upsampled by the factor.
void check_upsample(const char* call, const UpsampleDesc& d, const Tensor& x, const Tensor& y) {
  if (d.factor < 1) throw ConfigError(std::string(call) + ": factor " + std::to_string(d.factor) + " is below 1");
  if (x.shape.rank != 4 || y.shape.rank != 4 || x.n() != y.n() || x.c() != y.c() ||
      static_cast<long long>(y.h()) != static_cast<long long>(x.h()) * d.factor ||
      static_cast<long long>(y.w()) != static_cast<long long>(x.w()) * d.factor)
    throw ShapeError(std::string(call) + ": " + y.shape.str() + " is not " + x.shape.str() + " upsampled by " +
                     std::to_string(d.factor));
}

// y is x [N, C, H, W] padded as d says.
void check_pad(const char* call, const PadDesc& d, const Tensor& x, const Tensor& y) {
  if (d.top < 0 || d.bottom < 0 || d.left < 0 || d.right < 0 || std::isnan(d.value))
    throw ConfigError(std::string(call) + ": pads " + std::to_string(d.left) + ", " + std::to_string(d.right) + ", " +
                      std::to_string(d.top) + ", " + std::to_string(d.bottom) +
                      " (left, right, top, bottom) must be 0 or more, and the value a number");
  if (x.shape.rank != 4 || y.shape.rank != 4 || x.n() != y.n() || x.c() != y.c() ||
      static_cast<long long>(y.h()) != static_cast<long long>(x.h()) + d.top + d.bottom ||
      static_cast<long long>(y.w()) != static_cast<long long>(x.w()) + d.left + d.right)
    throw ShapeError(std::string(call) + ": " + y.shape.str() + " is not " + x.shape.str() + " padded by " +
                     std::to_string(d.left) + ", " + std::to_string(d.right) + ", " + std::to_string(d.top) + ", " +
                     std::to_string(d.bottom) + " (left, right, top, bottom)");
}

// How many windows `reach` long fit along `in` padded by `pad` on both sides at this stride (floor
// mode, the layers' sliding_output without its errors); 0 where none does. Stride at least 1.
long long windows_along(long long in, long long reach, int stride, int pad) {
  const long long room = in + 2LL * pad - reach;
  return room < 0 ? 0 : room / stride + 1;
}

// A dense layer's arguments: x [N, in...] and y [N, out...] (backward-data's dx and dy), the
// weights out x in values, a bias (or its gradient) of out values or none.
void check_dense(const char* call, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y) {
  if (x.shape.rank < 1 || y.shape.rank < 1 || x.n() != y.n())
    throw ShapeError(std::string(call) + ": the input " + x.shape.str() + " and output " + y.shape.str() +
                     " hold different numbers of samples");
  const std::size_t in = x.sample_elements(), out = y.sample_elements();
  if (w.elements() != in * out)
    throw ShapeError(std::string(call) + ": the weights " + w.shape.str() + " are not " + std::to_string(out) + " x " +
                     std::to_string(in) + " values (out x in)");
  if (!absent(bias) && bias.elements() != out)
    throw ShapeError(std::string(call) + ": the bias " + bias.shape.str() + " is not one value for each of " +
                     std::to_string(out) + " outputs");
}

// BatchNorm's per-channel tensors (scale, shift, statistics and their gradients): one value for
// each of x's channels.
void check_channels(const char* call, const Tensor& x, std::initializer_list<const Tensor*> per_channel) {
  if (x.shape.rank < 2)
    throw ShapeError(std::string(call) + ": " + x.shape.str() + " has no channels (BatchNorm takes [N, C, ...])");
  for (const Tensor* t : per_channel)
    if (t->elements() != static_cast<std::size_t>(x.c()))
      throw ShapeError(std::string(call) + ": " + t->shape.str() + " is not one value for each of " + x.shape.str() +
                       "'s " + std::to_string(x.c()) + " channels");
}

// Synchronised BatchNorm's sums: `per_channel` values for each of x's channels (the statistics'
// sums one, backward's sums of dy and of dy * xhat two), and a count of values per channel over
// every rank that it can divide by.
void check_sums(const char* call, const Tensor& x, const Tensor& sums, std::size_t per_channel) {
  check_channels(call, x, {});
  if (sums.elements() != per_channel * static_cast<std::size_t>(x.c()))
    throw ShapeError(std::string(call) + ": the sums " + sums.shape.str() + " are not " +
                     (per_channel == 1 ? "one value" : std::to_string(per_channel) + " values") + " for each of " +
                     x.shape.str() + "'s " + std::to_string(x.c()) + " channels");
}

void check_count(const char* call, double count) {
  if (!(count >= 1) || !std::isfinite(count)) {
    char shown[32];
    std::snprintf(shown, sizeof shown, "%g", count);
    throw ConfigError(std::string(call) + ": a count of " + shown +
                      " values a channel (every rank's N x H x W: 1 or more)");
  }
}

// A convolution's arguments: x [N, C, H, W] and y [N, out, Ho, Wo] as d slides its kernel (y's
// sides as sliding_output gives them), w [out][C / groups][kh][kw], and a bias (or its gradient)
// of one value an output channel or none. Backward-data's x and y are dx and dy.
void check_conv(const char* call, const Conv2dDesc& d, const Shape& x, const Tensor& w, const Tensor& bias,
                const Shape& y) {
  const int groups = std::max(d.groups, 1), dilation = std::max(d.dilation, 1);
  if (d.kernel_h < 1 || d.kernel_w < 1 || d.stride < 1 || d.padding < 0 || d.groups < 0 || d.dilation < 0 ||
      d.out_channels < 1 || d.out_channels % groups != 0)
    throw ConfigError(std::string(call) + ": a " + std::to_string(d.kernel_h) + "x" + std::to_string(d.kernel_w) +
                      " kernel at stride " + std::to_string(d.stride) + ", padding " + std::to_string(d.padding) +
                      ", dilation " + std::to_string(d.dilation) + ", " + std::to_string(d.groups) + " groups and " +
                      std::to_string(d.out_channels) +
                      " output channels: kernels, strides and output channels must be 1 or more, padding 0 or more, "
                      "and the output channels a multiple of the groups");
  const auto slides = [&](int in, int out, int kernel) {
    return out >= 1 && out == windows_along(in, static_cast<long long>(dilation) * (kernel - 1) + 1, d.stride,
                                            d.padding);
  };
  if (x.rank != 4 || y.rank != 4 || x[0] != y[0] || x[1] % groups != 0 ||
      (d.in_channels > 0 && x[1] != d.in_channels) || y[1] != d.out_channels || !slides(x[2], y[2], d.kernel_h) ||
      !slides(x[3], y[3], d.kernel_w))
    throw ShapeError(std::string(call) + ": " + y.str() + " is not " + x.str() + " convolved into " +
                     std::to_string(d.out_channels) + " channels by a " + std::to_string(d.kernel_h) + "x" +
                     std::to_string(d.kernel_w) + " kernel at stride " + std::to_string(d.stride) + ", padding " +
                     std::to_string(d.padding) + ", dilation " + std::to_string(dilation) + ", " +
                     std::to_string(groups) + " groups");
  const std::size_t weights = static_cast<std::size_t>(d.out_channels) * static_cast<std::size_t>(x[1] / groups) *
                              static_cast<std::size_t>(d.kernel_h) * static_cast<std::size_t>(d.kernel_w);
  if (w.elements() != weights)
    throw ShapeError(std::string(call) + ": the weights " + w.shape.str() + " are not " + std::to_string(weights) +
                     " values (out x in / groups x kernel)");
  if (!absent(bias) && bias.elements() != static_cast<std::size_t>(d.out_channels))
    throw ShapeError(std::string(call) + ": the bias " + bias.shape.str() + " is not one value for each of " +
                     std::to_string(d.out_channels) + " output channels");
}

// y is x [N, C, H, W] pooled as d says: windows inside their padding, as many along each side as
// floor mode gives or one more (ceil mode).
void check_pool(const char* call, const Pool2dDesc& d, const Tensor& x, const Tensor& y) {
  const auto side_fits = [](int window, int stride, int pad) {
    return window >= 1 && stride >= 1 && pad >= 0 && pad < window;
  };
  if (!side_fits(d.window_h, d.stride_h, d.pad_h) || !side_fits(d.window_w, d.stride_w, d.pad_w))
    throw ConfigError(std::string(call) + ": windows " + std::to_string(d.window_h) + "x" + std::to_string(d.window_w) +
                      " at stride " + std::to_string(d.stride_h) + "x" + std::to_string(d.stride_w) + ", padded by " +
                      std::to_string(d.pad_h) + "x" + std::to_string(d.pad_w) +
                      ": windows and strides must be 1 or more, padding 0 or more and smaller than the window");
  const auto pooled = [](int in, int out, int window, int stride, int pad) {
    const long long floor_mode = windows_along(in, window, stride, pad);
    return floor_mode > 0 && (out == floor_mode || out == floor_mode + 1);
  };
  if (x.shape.rank != 4 || y.shape.rank != 4 || x.n() != y.n() || x.c() != y.c() ||
      !pooled(x.h(), y.h(), d.window_h, d.stride_h, d.pad_h) || !pooled(x.w(), y.w(), d.window_w, d.stride_w, d.pad_w))
    throw ShapeError(std::string(call) + ": " + y.shape.str() + " is not " + x.shape.str() + " pooled by " +
                     std::to_string(d.window_h) + "x" + std::to_string(d.window_w) + " windows at stride " +
                     std::to_string(d.stride_h) + "x" + std::to_string(d.stride_w) + ", padded by " +
                     std::to_string(d.pad_h) + "x" + std::to_string(d.pad_w));
}

// b is a's shape, or [N, C, 1, 1] under an [N, C, H, W] a (Backend::multiply).
void check_gate(const char* call, const Tensor& a, const Tensor& b) {
  if (b.elements() == a.elements()) return;
  if (a.shape.rank == 4 && b.shape.rank == 4 && b.n() == a.n() && b.c() == a.c() && b.h() == 1 && b.w() == 1)
    return;
  throw ShapeError(std::string(call) + ": " + b.shape.str() + " is neither the shape of " + a.shape.str() +
                   " nor one value per sample and channel");
}

// The order a shape's values lie in (Note [Channels-last images], tensor.hpp): `either` where both
// give the same, as for [N, C, 1, 1] and [N, 1, H, W].
enum class Order { either, nchw, channels_last };
Order order_of(const Shape& s) {
  if (s.rank != 4 || one_order(Shape{s[1], s[2], s[3]})) return Order::either;
  return s.channels_last ? Order::channels_last : Order::nchw;
}

// True where a shape's values lie in another order than NCHW.
bool reordered(const Shape& s) { return order_of(s) == Order::channels_last; }

// A call that reads images as [N, C, H, W] in that order: it refuses channels-last ones.
void nchw_only(const char* call, std::initializer_list<const Shape*> shapes) {
  for (const Shape* s : shapes)
    if (reordered(*s))
      throw ShapeError(std::string(call) + ": " + s->str() + " is channels last; this call takes images in NCHW order");
}

// An element-wise call: its tensors in any order, as long as it is the same for all of them.
void same_order(const char* call, std::initializer_list<const Shape*> shapes) {
  const Shape* first = nullptr;
  for (const Shape* s : shapes) {
    if (order_of(*s) == Order::either) continue;
    if (first && order_of(*s) != order_of(*first))
      throw ShapeError(std::string(call) + ": " + first->str() + " and " + s->str() + " lie in different orders");
    if (!first) first = s;
  }
}

// A call that takes channels-last images where the backend does (Backend::takes_channels_last):
// x and y (dx and dy) in the same order, or where `x_may_be_nchw` an NCHW x under a channels-last
// y (a convolution reading a network's input), weights and biases [out, ...] as always.
void check_order(const char* call, const Backend& backend, const Shape& x, const Shape& y,
                 std::initializer_list<const Shape*> parameters = {}, bool x_may_be_nchw = false) {
  for (const Shape* p : parameters)
    if (p->channels_last)
      throw ShapeError(std::string(call) + ": the parameters " + p->str() +
                       " cannot be channels last (weights are [out, in, kh, kw] in every layout)");
  const bool nchw_input = x_may_be_nchw && !x.channels_last;
  if (x.rank != 0 && y.rank != 0 && x.channels_last != y.channels_last && !nchw_input)
    throw ShapeError(std::string(call) + ": " + x.str() + " and " + y.str() + " lie in different orders");
  if ((reordered(x) || reordered(y)) && !backend.takes_channels_last())
    throw ConfigError(std::string(call) + ": " + (reordered(x) ? x : y).str() + " is channels last, and " +
                      backend.description() + " takes images in NCHW order only");
}

// A call whose images may all be channels last where the backend takes them (BatchNorm, pooling):
// the same order for all of them.
void takes_order(const char* call, const Backend& backend, std::initializer_list<const Shape*> images) {
  same_order(call, images);
  for (const Shape* s : images)
    if (reordered(*s) && !backend.takes_channels_last())
      throw ConfigError(std::string(call) + ": " + s->str() + " is channels last, and " + backend.description() +
                        " takes images in NCHW order only");
}

// Elements per (sample, channel): H x W of an image, 1 of a flat tensor.
std::size_t plane_of(const Tensor& t) { return t.shape.rank >= 4 ? static_cast<std::size_t>(t.h()) * t.w() : 1; }

}  // namespace

void Backend::fill(Tensor t, float value) { do_fill(t, value); }

void Backend::copy_on_device(const void* src, void* dst, std::size_t bytes) { do_copy_on_device(src, dst, bytes); }

void Backend::to_16bit(const Tensor& x, void* packed, ValueFormat format) {
  require_16bit("to_16bit", format);
  do_to_16bit(x, packed, format);
}

void Backend::from_16bit(const void* packed, Tensor x, ValueFormat format) {
  require_16bit("from_16bit", format);
  do_from_16bit(packed, x, format);
}

std::size_t Backend::conv2d_workspace_bytes(const Conv2dDesc& desc, const Shape& x, const Shape& y, ConvPass pass,
                                            std::size_t limit) {
  check_order("conv2d_workspace_bytes", *this, x, y, {}, true);
  return do_conv2d_workspace_bytes(desc, x, y, pass, limit);
}

void Backend::conv2d_forward(const Conv2dDesc& desc, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,
                             bool accumulate, Workspace ws) {
  check_conv("conv2d_forward", desc, x.shape, w, bias, y.shape);
  check_order("conv2d_forward", *this, x.shape, y.shape, {&w.shape, &bias.shape}, true);
  do_conv2d_forward(desc, x, w, bias, y, accumulate, ws);
}

void Backend::conv2d_backward_data(const Conv2dDesc& desc, const Tensor& dy, const Tensor& w, Tensor dx,
                                   bool accumulate, Workspace ws) {
  check_conv("conv2d_backward_data", desc, dx.shape, w, Tensor{}, dy.shape);
  check_order("conv2d_backward_data", *this, dx.shape, dy.shape, {&w.shape});
  do_conv2d_backward_data(desc, dy, w, dx, accumulate, ws);
}

void Backend::conv2d_backward_filter(const Conv2dDesc& desc, const Tensor& x, const Tensor& dy, Tensor dw,
                                     Tensor dbias, Workspace ws) {
  check_conv("conv2d_backward_filter", desc, x.shape, dw, dbias, dy.shape);
  check_order("conv2d_backward_filter", *this, x.shape, dy.shape, {&dw.shape, &dbias.shape}, true);
  do_conv2d_backward_filter(desc, x, dy, dw, dbias, ws);
}

void Backend::conv2d_backward(const Conv2dDesc& desc, const Tensor& x, const Tensor& dy, const Tensor& w, Tensor dw,
                              Tensor dbias, Tensor dx, bool accumulate, Workspace ws) {
  check_conv("conv2d_backward", desc, x.shape, dw, dbias, dy.shape);
  check_order("conv2d_backward", *this, x.shape, dy.shape, {&w.shape, &dw.shape, &dbias.shape}, dx.empty());
  if (!dx.empty()) {
    check_conv("conv2d_backward", desc, dx.shape, w, Tensor{}, dy.shape);
    check_order("conv2d_backward", *this, dx.shape, dy.shape);
  }
  do_conv2d_backward(desc, x, dy, w, dw, dbias, dx, accumulate, ws);
}

void Backend::do_conv2d_backward(const Conv2dDesc& desc, const Tensor& x, const Tensor& dy, const Tensor& w,
                                 Tensor dw, Tensor dbias, Tensor dx, bool accumulate, Workspace ws) {
  conv2d_backward_filter(desc, x, dy, dw, dbias, ws);
  if (!dx.empty()) conv2d_backward_data(desc, dy, w, dx, accumulate, ws);
}

void Backend::conv2d_relu_forward(const Conv2dDesc& desc, const Tensor& x, const Tensor& w, const Tensor& bias,
                                  Tensor y, Workspace ws) {
  check_conv("conv2d_relu_forward", desc, x.shape, w, bias, y.shape);
  check_order("conv2d_relu_forward", *this, x.shape, y.shape, {&w.shape, &bias.shape}, true);
  do_conv2d_relu_forward(desc, x, w, bias, y, ws);
}

void Backend::do_conv2d_relu_forward(const Conv2dDesc& desc, const Tensor& x, const Tensor& w, const Tensor& bias,
                                     Tensor y, Workspace ws) {
  conv2d_forward(desc, x, w, bias, y, false, ws);
  relu_forward(y, y);
}

void Backend::batchnorm_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                              Tensor running_mean, Tensor running_var, float momentum, float epsilon,
                                              Tensor saved_mean, Tensor saved_inv_std) {
  same_size("batchnorm_relu_forward_training", x, y);
  check_channels("batchnorm_relu_forward_training", x,
                 {&gamma, &beta, &running_mean, &running_var, &saved_mean, &saved_inv_std});
  takes_order("batchnorm_relu_forward_training", *this, {&x.shape, &y.shape});
  do_batchnorm_relu_forward_training(x, gamma, beta, y, running_mean, running_var, momentum, epsilon, saved_mean,
                                     saved_inv_std);
}

void Backend::do_batchnorm_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                                 Tensor running_mean, Tensor running_var, float momentum,
                                                 float epsilon, Tensor saved_mean, Tensor saved_inv_std) {
  batchnorm_forward_training(x, gamma, beta, y, running_mean, running_var, momentum, epsilon, saved_mean,
                             saved_inv_std);
  relu_forward(y, y);
}

void Backend::batchnorm_relu_backward(const Tensor& x, const Tensor& y, Tensor dy, const Tensor& gamma,
                                      const Tensor& saved_mean, const Tensor& saved_inv_std, float epsilon, Tensor dx,
                                      Tensor dgamma, Tensor dbeta, bool accumulate) {
  same_size("batchnorm_relu_backward", x, y);
  same_size("batchnorm_relu_backward", x, dy);
  same_size("batchnorm_relu_backward", x, dx);
  check_channels("batchnorm_relu_backward", x, {&gamma, &saved_mean, &saved_inv_std, &dgamma, &dbeta});
  takes_order("batchnorm_relu_backward", *this, {&x.shape, &y.shape, &dy.shape, &dx.shape});
  do_batchnorm_relu_backward(x, y, dy, gamma, saved_mean, saved_inv_std, epsilon, dx, dgamma, dbeta, accumulate);
}

void Backend::do_batchnorm_relu_backward(const Tensor& x, const Tensor& y, Tensor dy, const Tensor& gamma,
                                         const Tensor& saved_mean, const Tensor& saved_inv_std, float epsilon,
                                         Tensor dx, Tensor dgamma, Tensor dbeta, bool accumulate) {
  relu_backward(y, dy, dy, false);
  batchnorm_backward(x, dy, gamma, saved_mean, saved_inv_std, epsilon, dx, dgamma, dbeta, accumulate);
}

void Backend::batchnorm_add_relu_forward_training(const Tensor& x, const Tensor& residual, const Tensor& gamma,
                                                  const Tensor& beta, Tensor y, Tensor running_mean,
                                                  Tensor running_var, float momentum, float epsilon,
                                                  Tensor saved_mean, Tensor saved_inv_std) {
  same_size("batchnorm_add_relu_forward_training", x, residual);
  same_size("batchnorm_add_relu_forward_training", x, y);
  check_channels("batchnorm_add_relu_forward_training", x,
                 {&gamma, &beta, &running_mean, &running_var, &saved_mean, &saved_inv_std});
  takes_order("batchnorm_add_relu_forward_training", *this, {&x.shape, &residual.shape, &y.shape});
  do_batchnorm_add_relu_forward_training(x, residual, gamma, beta, y, running_mean, running_var, momentum, epsilon,
                                         saved_mean, saved_inv_std);
}

void Backend::do_batchnorm_add_relu_forward_training(const Tensor& x, const Tensor& residual, const Tensor& gamma,
                                                     const Tensor& beta, Tensor y, Tensor running_mean,
                                                     Tensor running_var, float momentum, float epsilon,
                                                     Tensor saved_mean, Tensor saved_inv_std) {
  batchnorm_forward_training(x, gamma, beta, y, running_mean, running_var, momentum, epsilon, saved_mean,
                             saved_inv_std);
  add(y, residual, y);
  relu_forward(y, y);
}

void Backend::batchnorm_add_relu_backward(const Tensor& x, const Tensor& y, Tensor dy, const Tensor& gamma,
                                          const Tensor& saved_mean, const Tensor& saved_inv_std, float epsilon,
                                          Tensor dx, Tensor dgamma, Tensor dbeta, bool accumulate, Tensor dresidual,
                                          bool accumulate_residual) {
  same_size("batchnorm_add_relu_backward", x, y);
  same_size("batchnorm_add_relu_backward", x, dy);
  same_size("batchnorm_add_relu_backward", x, dx);
  if (!dresidual.empty()) same_size("batchnorm_add_relu_backward", x, dresidual);
  check_channels("batchnorm_add_relu_backward", x, {&gamma, &saved_mean, &saved_inv_std, &dgamma, &dbeta});
  takes_order("batchnorm_add_relu_backward", *this, {&x.shape, &y.shape, &dy.shape, &dx.shape, &dresidual.shape});
  do_batchnorm_add_relu_backward(x, y, dy, gamma, saved_mean, saved_inv_std, epsilon, dx, dgamma, dbeta, accumulate,
                                 dresidual, accumulate_residual);
}

void Backend::do_batchnorm_add_relu_backward(const Tensor& x, const Tensor& y, Tensor dy, const Tensor& gamma,
                                             const Tensor& saved_mean, const Tensor& saved_inv_std, float epsilon,
                                             Tensor dx, Tensor dgamma, Tensor dbeta, bool accumulate,
                                             Tensor dresidual, bool accumulate_residual) {
  relu_backward(y, dy, dy, false);
  if (!dresidual.empty()) copy_or_add(dy, dresidual, accumulate_residual);
  batchnorm_backward(x, dy, gamma, saved_mean, saved_inv_std, epsilon, dx, dgamma, dbeta, accumulate);
}

std::size_t Backend::dense_workspace_bytes(const Shape& x, int out, ConvPass pass) {
  return do_dense_workspace_bytes(x, out, pass);
}

void Backend::dense_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y, Workspace ws) {
  check_dense("dense_forward", x, w, bias, y);
  nchw_only("dense_forward", {&x.shape, &y.shape});
  do_dense_forward(x, w, bias, y, ws);
}

void Backend::dense_backward_data(const Tensor& dy, const Tensor& w, Tensor dx, bool accumulate, Workspace ws) {
  check_dense("dense_backward_data", dx, w, Tensor{}, dy);
  nchw_only("dense_backward_data", {&dx.shape, &dy.shape});
  do_dense_backward_data(dy, w, dx, accumulate, ws);
}

void Backend::dense_backward_weights(const Tensor& x, const Tensor& dy, Tensor dw, Tensor dbias, Workspace ws) {
  check_dense("dense_backward_weights", x, dw, dbias, dy);
  nchw_only("dense_backward_weights", {&x.shape, &dy.shape});
  do_dense_backward_weights(x, dy, dw, dbias, ws);
}

void Backend::relu_forward(const Tensor& x, Tensor y) {
  same_size("relu_forward", x, y);
  same_order("relu_forward", {&x.shape, &y.shape});
  do_relu_forward(x, y);
}

void Backend::relu_backward(const Tensor& y, const Tensor& dy, Tensor dx, bool accumulate) {
  same_size("relu_backward", y, dy);
  same_size("relu_backward", dy, dx);
  same_order("relu_backward", {&y.shape, &dy.shape, &dx.shape});
  do_relu_backward(y, dy, dx, accumulate);
}

void Backend::activation_forward(const ActivationDesc& desc, const Tensor& x, Tensor y) {
  same_size("activation_forward", x, y);
  same_order("activation_forward", {&x.shape, &y.shape});
  do_activation_forward(desc, x, y);
}

void Backend::activation_backward(const ActivationDesc& desc, const Tensor& x, const Tensor& y, const Tensor& dy,
                                  Tensor dx, bool accumulate) {
  const Tensor& v = derivative_from_output(desc) ? y : x;
  same_size("activation_backward", v, dy);
  same_size("activation_backward", dy, dx);
  same_order("activation_backward", {&x.shape, &y.shape, &dy.shape, &dx.shape});
  do_activation_backward(desc, x, y, dy, dx, accumulate);
}

void Backend::pool2d_forward(const Pool2dDesc& desc, const Tensor& x, Tensor y) {
  check_pool("pool2d_forward", desc, x, y);
  takes_order("pool2d_forward", *this, {&x.shape, &y.shape});
  do_pool2d_forward(desc, x, y);
}

void Backend::pool2d_backward(const Pool2dDesc& desc, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor dx,
                              bool accumulate) {
  check_pool("pool2d_backward", desc, x, y);
  same_size("pool2d_backward", y, dy);
  same_size("pool2d_backward", x, dx);
  takes_order("pool2d_backward", *this, {&x.shape, &y.shape, &dy.shape, &dx.shape});
  do_pool2d_backward(desc, x, y, dy, dx, accumulate);
}

void Backend::batchnorm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                         Tensor running_mean, Tensor running_var, float momentum, float epsilon,
                                         Tensor saved_mean, Tensor saved_inv_std) {
  same_size("batchnorm_forward_training", x, y);
  check_channels("batchnorm_forward_training", x,
                 {&gamma, &beta, &running_mean, &running_var, &saved_mean, &saved_inv_std});
  takes_order("batchnorm_forward_training", *this, {&x.shape, &y.shape});
  do_batchnorm_forward_training(x, gamma, beta, y, running_mean, running_var, momentum, epsilon, saved_mean,
      saved_inv_std);
}

void Backend::batchnorm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                          const Tensor& running_mean, const Tensor& running_var, float epsilon,
                                          Tensor y) {
  same_size("batchnorm_forward_inference", x, y);
  check_channels("batchnorm_forward_inference", x, {&gamma, &beta, &running_mean, &running_var});
  takes_order("batchnorm_forward_inference", *this, {&x.shape, &y.shape});
  do_batchnorm_forward_inference(x, gamma, beta, running_mean, running_var, epsilon, y);
}

void Backend::batchnorm_forward_saved(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                      const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor y) {
  same_size("batchnorm_forward_saved", x, y);
  check_channels("batchnorm_forward_saved", x, {&gamma, &beta, &saved_mean, &saved_inv_std});
  takes_order("batchnorm_forward_saved", *this, {&x.shape, &y.shape});
  do_batchnorm_forward_saved(x, gamma, beta, saved_mean, saved_inv_std, y);
}

void Backend::batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& saved_mean,
                                 const Tensor& saved_inv_std, float epsilon, Tensor dx, Tensor dgamma, Tensor dbeta,
                                 bool accumulate) {
  same_size("batchnorm_backward", x, dy);
  same_size("batchnorm_backward", x, dx);
  check_channels("batchnorm_backward", x, {&gamma, &saved_mean, &saved_inv_std, &dgamma, &dbeta});
  takes_order("batchnorm_backward", *this, {&x.shape, &dy.shape, &dx.shape});
  do_batchnorm_backward(x, dy, gamma, saved_mean, saved_inv_std, epsilon, dx, dgamma, dbeta, accumulate);
}

void Backend::batchnorm_channel_sums(const Tensor& x, Tensor sums) {
  check_sums("batchnorm_channel_sums", x, sums, 1);
  nchw_only("batchnorm_channel_sums", {&x.shape});
  do_batchnorm_channel_sums(x, sums);
}

void Backend::batchnorm_centered_squares(const Tensor& x, const Tensor& sums, double count, Tensor out) {
  check_sums("batchnorm_centered_squares", x, sums, 1);
  nchw_only("batchnorm_centered_squares", {&x.shape});
  check_sums("batchnorm_centered_squares", x, out, 1);
  check_count("batchnorm_centered_squares", count);
  do_batchnorm_centered_squares(x, sums, count, out);
}

void Backend::batchnorm_forward_from_sums(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                          Tensor running_mean, Tensor running_var, float momentum, float epsilon,
                                          double count, Tensor saved_mean, Tensor saved_inv_std) {
  same_size("batchnorm_forward_from_sums", x, y);
  check_channels("batchnorm_forward_from_sums", x,
                 {&gamma, &beta, &running_mean, &running_var, &saved_mean, &saved_inv_std});
  check_count("batchnorm_forward_from_sums", count);
  nchw_only("batchnorm_forward_from_sums", {&x.shape, &y.shape});
  do_batchnorm_forward_from_sums(x, gamma, beta, y, running_mean, running_var, momentum, epsilon, count, saved_mean,
      saved_inv_std);
}

void Backend::batchnorm_backward_sums(const Tensor& x, const Tensor& dy, const Tensor& saved_mean,
                                      const Tensor& saved_inv_std, Tensor sums) {
  same_size("batchnorm_backward_sums", x, dy);
  check_channels("batchnorm_backward_sums", x, {&saved_mean, &saved_inv_std});
  check_sums("batchnorm_backward_sums", x, sums, 2);
  nchw_only("batchnorm_backward_sums", {&x.shape, &dy.shape});
  do_batchnorm_backward_sums(x, dy, saved_mean, saved_inv_std, sums);
}

void Backend::batchnorm_backward_from_sums(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                           const Tensor& saved_mean, const Tensor& saved_inv_std, const Tensor& sums,
                                           double count, Tensor dx, bool accumulate) {
  same_size("batchnorm_backward_from_sums", x, dy);
  same_size("batchnorm_backward_from_sums", x, dx);
  check_channels("batchnorm_backward_from_sums", x, {&gamma, &saved_mean, &saved_inv_std});
  check_sums("batchnorm_backward_from_sums", x, sums, 2);
  nchw_only("batchnorm_backward_from_sums", {&x.shape, &dy.shape, &dx.shape});
  check_count("batchnorm_backward_from_sums", count);
  do_batchnorm_backward_from_sums(x, dy, gamma, saved_mean, saved_inv_std, sums, count, dx, accumulate);
}

void Backend::dropout_forward(const Tensor& x, Tensor y, Tensor mask, float p, const StepScalars* step,
                              std::uint64_t layer) {
  nchw_only("dropout_forward", {&x.shape, &y.shape});  // the mask is drawn in NCHW order
  do_dropout_forward(x, y, mask, p, step, layer);
}

void Backend::dropout_backward(const Tensor& dy, const Tensor& mask, Tensor dx, bool accumulate) {
  nchw_only("dropout_backward", {&dy.shape, &dx.shape});
  do_dropout_backward(dy, mask, dx, accumulate);
}

void Backend::add(const Tensor& a, const Tensor& b, Tensor y) {
  same_order("add", {&a.shape, &b.shape, &y.shape});
  do_add(a, b, y);
}

void Backend::copy_or_add(const Tensor& src, Tensor dst, bool accumulate) {
  // A copy onto itself, as an add's gradient for an input it shares in place (Add::backward): nothing to do.
  if (!accumulate && src.data == dst.data && src.packed16 == dst.packed16) return;
  same_order("copy_or_add", {&src.shape, &dst.shape});
  do_copy_or_add(src, dst, accumulate);
}

void Backend::copy_channels(const Tensor& from, int from_channel, Tensor to, int to_channel, int channels,
                            bool accumulate) {
  const std::size_t plane = plane_of(from);
  if (from.n() != to.n() || plane != plane_of(to) || from.shape.rank != to.shape.rank || from_channel < 0 ||
      to_channel < 0 || channels < 0 || from_channel + channels > from.c() || to_channel + channels > to.c())
    throw ShapeError("copy_channels: channels [" + std::to_string(from_channel) + ", +" + std::to_string(channels) +
                     ") of " + from.shape.str() + " to channel " + std::to_string(to_channel) + " of " +
                     to.shape.str() + " do not fit");
  nchw_only("copy_channels", {&from.shape, &to.shape});
  do_copy_channels(from, from_channel, to, to_channel, channels, accumulate);
}

void Backend::multiply(const Tensor& a, const Tensor& b, Tensor y) {
  if (y.elements() != a.elements()) throw ShapeError("multiply: output " + y.shape.str() + " is not " + a.shape.str());
  check_gate("multiply", a, b);
  nchw_only("multiply", {&a.shape, &b.shape, &y.shape});
  do_multiply(a, b, y);
}

void Backend::multiply_backward(const Tensor& a, const Tensor& b, const Tensor& dy, Tensor da, bool accumulate_a,
                                Tensor db, bool accumulate_b) {
  if (dy.elements() != a.elements() || (!da.empty() && da.elements() != a.elements()) ||
      (!db.empty() && db.elements() != b.elements()))
    throw ShapeError("multiply_backward: gradients " + dy.shape.str() + ", " + da.shape.str() + " and " +
                     db.shape.str() + " do not match " + a.shape.str() + " and " + b.shape.str());
  check_gate("multiply_backward", a, b);
  nchw_only("multiply_backward", {&a.shape, &b.shape, &dy.shape, &da.shape, &db.shape});
  do_multiply_backward(a, b, dy, da, accumulate_a, db, accumulate_b);
}

void Backend::add_channel_bias(const Tensor& bias, Tensor y) {
  check_order("add_channel_bias", *this, y.shape, y.shape, {&bias.shape});
  do_add_channel_bias(bias, y);
}

void Backend::channel_bias_backward(const Tensor& dy, Tensor dbias) {
  check_order("channel_bias_backward", *this, dy.shape, dy.shape, {&dbias.shape});
  do_channel_bias_backward(dy, dbias);
}

void Backend::upsample_forward(const UpsampleDesc& desc, const Tensor& x, Tensor y) {
  check_upsample("upsample_forward", desc, x, y);
  nchw_only("upsample_forward", {&x.shape, &y.shape});
  do_upsample_forward(desc, x, y);
}

void Backend::upsample_backward(const UpsampleDesc& desc, const Tensor& dy, Tensor dx, bool accumulate) {
  check_upsample("upsample_backward", desc, dx, dy);
  nchw_only("upsample_backward", {&dx.shape, &dy.shape});
  do_upsample_backward(desc, dy, dx, accumulate);
}

void Backend::pad_forward(const PadDesc& desc, const Tensor& x, Tensor y) {
  check_pad("pad_forward", desc, x, y);
  nchw_only("pad_forward", {&x.shape, &y.shape});
  do_pad_forward(desc, x, y);
}

void Backend::pad_backward(const PadDesc& desc, const Tensor& dy, Tensor dx, bool accumulate) {
  check_pad("pad_backward", desc, dx, dy);
  nchw_only("pad_backward", {&dx.shape, &dy.shape});
  do_pad_backward(desc, dy, dx, accumulate);
}

void Backend::group_norm_forward(const GroupNormDesc& desc, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                 Tensor y, Tensor saved_mean, Tensor saved_inv_std) {
  nchw_only("group_norm_forward", {&x.shape, &y.shape});
  do_group_norm_forward(desc, x, gamma, beta, y, saved_mean, saved_inv_std);
}

void Backend::group_norm_backward(const GroupNormDesc& desc, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                  const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor dx, bool accumulate,
                                  Tensor dgamma, Tensor dbeta, Workspace ws) {
  nchw_only("group_norm_backward", {&x.shape, &dy.shape, &dx.shape});
  do_group_norm_backward(desc, x, dy, gamma, saved_mean, saved_inv_std, dx, accumulate, dgamma, dbeta, ws);
}

std::size_t Backend::group_norm_workspace_bytes(const GroupNormDesc& desc, const Shape& x) {
  return do_group_norm_workspace_bytes(desc, x);
}

void Backend::softmax_cross_entropy(const Tensor& logits, const IntTensor& labels, float label_smoothing,
                                    Tensor dlogits, const StepScalars* step, Tensor loss_sum, Tensor correct) {
  if (!(label_smoothing >= 0.0f && label_smoothing < 1.0f))
    throw ConfigError("softmax_cross_entropy: label smoothing " + std::to_string(label_smoothing) +
                      " is outside [0, 1)");
  if (!dlogits.empty() && !step) throw ConfigError("softmax_cross_entropy: a gradient needs the step scalars");
  nchw_only("softmax_cross_entropy", {&logits.shape, &dlogits.shape});
  do_softmax_cross_entropy(logits, labels, label_smoothing, dlogits, step, loss_sum, correct);
}

void Backend::pixel_cross_entropy(const Tensor& logits, const ByteTensor& masks, const Tensor& class_weights,
                                  Tensor dlogits, const StepScalars* step, Tensor loss_sum, Tensor correct,
                                  Tensor counted, Workspace ws) {
  const char* const call = "pixel_cross_entropy";
  const std::size_t n = static_cast<std::size_t>(logits.n());
  const int classes = logits.c();
  const std::size_t pixels = static_cast<std::size_t>(logits.h()) * static_cast<std::size_t>(logits.w());
  if (logits.shape.rank < 2 || classes <= 0 || masks.size != n * pixels || (masks.size && !masks.data))
    throw ShapeError(std::string(call) + ": logits " + logits.shape.str() + " and " + std::to_string(masks.size) +
                     " mask bytes do not fit together");
  check_loss_outputs(call, logits, dlogits, step, loss_sum, correct, counted);
  nchw_only(call, {&logits.shape, &dlogits.shape});
  check_class_weights(call, "class weights", class_weights, static_cast<std::size_t>(classes));
  do_pixel_cross_entropy(logits, masks, class_weights, dlogits, step, loss_sum, correct, counted, ws);
}

void Backend::sigmoid_cross_entropy(const Tensor& logits, const Tensor& targets, const Tensor& positive_weights,
                                    float threshold_logit, Tensor dlogits, const StepScalars* step, Tensor loss_sum,
                                    Tensor correct, Tensor counted, Workspace ws) {
  const char* const call = "sigmoid_cross_entropy";
  if (targets.elements() != logits.elements() || (targets.elements() && !targets.data))
    throw ShapeError(std::string(call) + ": logits " + logits.shape.str() + " and targets " + targets.shape.str() +
                     " differ in size");
  check_loss_outputs(call, logits, dlogits, step, loss_sum, correct, counted);
  nchw_only(call, {&logits.shape, &targets.shape, &dlogits.shape});
  check_class_weights(call, "positive weights", positive_weights, logits.sample_elements());
  do_sigmoid_cross_entropy(logits, targets, positive_weights, threshold_logit, dlogits, step, loss_sum, correct,
      counted, ws);
}

void Backend::regression_loss(RegressionLoss kind, float delta, const Tensor& outputs, const Tensor& targets,
                              Tensor doutputs, const StepScalars* step, Tensor loss_sum, Tensor correct,
                              Tensor counted, Workspace ws) {
  const char* const call = "regression_loss";
  if (targets.elements() != outputs.elements() || (targets.elements() && !targets.data))
    throw ShapeError(std::string(call) + ": outputs " + outputs.shape.str() + " and targets " + targets.shape.str() +
                     " differ in size");
  check_loss_outputs(call, outputs, doutputs, step, loss_sum, correct, counted);
  nchw_only(call, {&outputs.shape, &targets.shape, &doutputs.shape});
  if (kind == RegressionLoss::huber && !(delta > 0.0f && std::isfinite(delta)))
    throw ConfigError(std::string(call) + ": the Huber loss's delta " + std::to_string(delta) +
                      " is not a positive number");
  do_regression_loss(kind, delta, outputs, targets, doutputs, step, loss_sum, correct, counted, ws);
}

std::size_t Backend::loss_workspace_bytes(Task task, const Shape& output) {
  return do_loss_workspace_bytes(task, output);
}

void Backend::sgd_update(Tensor params, const Tensor& grads, Tensor velocity, const SgdConfig& config,
                         float learning_rate, const float* guard) {
  do_sgd_update(params, grads, velocity, config, learning_rate, guard);
}

void Backend::adamw_update(Tensor params, const Tensor& grads, Tensor m, Tensor v, const AdamWConfig& config,
                           float learning_rate, long step, const float* guard) {
  do_adamw_update(params, grads, m, v, config, learning_rate, step, guard);
}

void Backend::unscale_gradients(Tensor grads, float inverse_scale, Tensor found) {
  if (found.elements() != 1)
    throw ShapeError("unscale_gradients: `found` holds one float, not " + std::to_string(found.elements()));
  do_unscale_gradients(grads, inverse_scale, found);
}

}  // namespace cnn
