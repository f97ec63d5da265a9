// The operators that become layers with weights or windows: convolutions, BatchNorm and the group
// normalisations, the poolings, Gemm and MatMul (dense layers).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include <cnnengine/layers/builtin_layers.hpp>
#include "models/detail/onnx/onnx_graph_import.hpp"

namespace cnn::onnx_import {
namespace {

std::string pair_text(std::int64_t a, std::int64_t b) { return std::to_string(a) + "x" + std::to_string(b); }

// A per-axis attribute (strides, dilations) that must be one value for both axes.
int same_on_both_axes(const GraphImport& g, const std::string& name, std::int64_t fallback, std::int64_t low = 1) {
  const std::vector<std::int64_t> v = g.ints_attribute(name, {fallback, fallback});
  if (v.size() != 2) g.refuse("its " + name + " " + ints_text(v) + " are not two values (height, width)");
  if (v[0] != v[1])
    g.refuse("its " + name + " " + ints_text(v) + " differ between height and width: cnnengine's layers take one " +
             name.substr(0, name.size() - 1) + " for both");
  if (v[0] < low || v[0] > 1 << 16) g.refuse("its " + name + " " + ints_text(v) + " are out of range");
  return static_cast<int>(v[0]);
}

// Padding before and after one axis, from pads or auto_pad (ONNX's SAME: the output is
// ceil(input / stride), the extra pixel after for SAME_UPPER, before for SAME_LOWER).
struct AxisPads {
  std::int64_t begin = 0, end = 0;
};
std::pair<AxisPads, AxisPads> read_pads(const GraphImport& g, std::int64_t h, std::int64_t w, std::int64_t k,
                                        std::int64_t s, std::int64_t d) {
  const std::string mode = g.string_attribute("auto_pad", "NOTSET");
  if (mode == "SAME_UPPER" || mode == "SAME_LOWER") {
    const auto same = [&](std::int64_t in) {
      const std::int64_t total = std::max<std::int64_t>((in + s - 1) / s * s - s + (k - 1) * d + 1 - in, 0);
      const std::int64_t less = total / 2, more = total - less;
      return mode == "SAME_UPPER" ? AxisPads{less, more} : AxisPads{more, less};
    };
    return {same(h), same(w)};
  }
  if (mode == "VALID") return {};
  if (mode != "NOTSET") g.refuse("its auto_pad '" + mode + "' is not one of ONNX's");
  const std::vector<std::int64_t> p = g.ints_attribute("pads", {0, 0, 0, 0});
  if (p.size() != 4) g.refuse("its pads " + ints_text(p) + " are not four values");
  for (std::int64_t v : p)
    if (v < 0 || v > 1 << 16) g.refuse("its pads " + ints_text(p) + " are out of range");
  return {AxisPads{p[0], p[2]}, AxisPads{p[1], p[3]}};
}

bool even(AxisPads h, AxisPads w) { return h.begin == h.end && w.begin == w.end && h.begin == w.begin; }

// A layer's input where its padding differs between sides (TensorFlow's SAME at stride 2): a pad
// layer of `value` in front of it takes it all, and the layer pads nothing.
int pad_in_front(GraphImport& g, int x, AxisPads h, AxisPads w, float value) {
  return g.add_layer(layers::pad(static_cast<int>(w.begin), static_cast<int>(w.end), static_cast<int>(h.begin),
                                 static_cast<int>(h.end), value),
                     {x}, {}, -1);
}

// The one padding a transposed convolution of cnnengine takes: the same on every side (its pads
// crop the output, which no layer in front can do).
int symmetric_padding(const GraphImport& g, const Shape& in, int k, int s, int d) {
  const auto [h, w] = read_pads(g, in[1], in[2], k, s, d);
  if (h.begin == h.end && w.begin == w.end && h.begin == w.begin) return static_cast<int>(h.begin);
  g.refuse("it pads the top, left, bottom and right of its " + in.str() + " input by " + std::to_string(h.begin) + ", " +
           std::to_string(w.begin) + ", " + std::to_string(h.end) + " and " + std::to_string(w.end) +
           ": cnnengine's transposed convolutions pad every side alike (export the model with symmetric padding)");
}

// A float constant's values, checked finite (a NaN weight is a corrupt file).
std::vector<float> finite_values(GraphImport& g, int index, const char* what) {
  std::vector<float> v = g.parameter_values(index);
  for (float x : v)
    if (!std::isfinite(x)) g.refuse(std::string("its ") + what + " holds a value that is not finite");
  return v;
}

// A per-channel vector (BatchNorm's, a bias): `count` values.
std::vector<float> channel_values(GraphImport& g, int index, std::int64_t count, const char* what) {
  const Constant& c = g.constant(index);
  const bool one_row = c.dims.size() <= 1 || (c.dims.size() == 2 && c.dims[0] == 1);  // [count] or [1, count]
  if (c.elements() != static_cast<std::size_t>(count) || !one_row)
    g.refuse(std::string("its ") + what + " is " + c.dims_text() + ", where " + std::to_string(count) +
             " values are expected");
  return finite_values(g, index, what);
}

const Constant& weight_of_rank(const GraphImport& g, int index, std::size_t rank, const char* what) {
  const Constant& w = g.constant(index);
  if (w.integer || w.dims.size() != rank)
    g.refuse(std::string("its weight is ") + (w.integer ? "of integers " : "") + w.dims_text() + ", where " + what);
  return w;
}

}  // namespace

void GraphImport::conv() {
  expect_attributes({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
  const int x = activation(0);
  const Shape in = shape_of(x);
  if (in.rank != 3) refuse("its input is " + in.str() + " a sample, where a 2-D convolution takes C x H x W");
  const Constant& w = weight_of_rank(*this, 1, 4, "a 2-D convolution's is [out, in / groups, kH, kW]");
  const std::int64_t groups = int_attribute("group", 1), out = w.dims[0], kh = w.dims[2], kw = w.dims[3];
  if (groups < 1 || groups > in[0] || in[0] % groups != 0 || out % groups != 0 || w.dims[1] != in[0] / groups || out < 1)
    refuse("its weight " + w.dims_text() + " in " + std::to_string(groups) + " group(s) does not fit its input of " +
           std::to_string(in[0]) + " channels");
  const std::vector<std::int64_t> kernel = ints_attribute("kernel_shape", {kh, kw});
  if (kernel != std::vector<std::int64_t>{kh, kw})
    refuse("its kernel_shape " + ints_text(kernel) + " is not its weight's " + w.dims_text());
  if (kh != kw || kh < 1 || kh > 1 << 16)
    refuse("its kernel is " + pair_text(kh, kw) + ": cnnengine's convolutions have square kernels");
  const int k = static_cast<int>(kh), s = same_on_both_axes(*this, "strides", 1),
            d = same_on_both_axes(*this, "dilations", 1);
  const auto [ph, pw] = read_pads(*this, in[1], in[2], k, s, d);
  const bool padded_evenly = even(ph, pw);
  layers::ConvOptions options{.stride = s, .padding = padded_evenly ? static_cast<int>(ph.begin) : 0, .dilation = d,
                              .groups = static_cast<int>(groups), .bias = has_input(2)};
  LayerParameters params{{"weight", finite_values(*this, 1, "weight")}};
  if (options.bias) params.emplace_back("bias", channel_values(*this, 2, out, "bias"));
  const int input = padded_evenly ? x : pad_in_front(*this, x, ph, pw, 0.0f);
  add_layer(layers::conv2d(static_cast<int>(out), k, options), {input}, std::move(params));
}

void GraphImport::conv_transpose() {
  expect_attributes({"auto_pad", "dilations", "group", "kernel_shape", "output_padding", "pads", "strides"});
  const int x = activation(0);
  const Shape in = shape_of(x);
  if (in.rank != 3) refuse("its input is " + in.str() + " a sample, where a 2-D convolution takes C x H x W");
  const Constant& w = weight_of_rank(*this, 1, 4, "a transposed convolution's is [in, out, kH, kW]");
  if (int_attribute("group", 1) != 1) refuse("it is grouped: cnnengine's transposed convolutions are not");
  const std::int64_t out = w.dims[1], kh = w.dims[2], kw = w.dims[3];
  if (w.dims[0] != in[0] || out < 1)
    refuse("its weight " + w.dims_text() + " does not fit its input of " + std::to_string(in[0]) + " channels");
  if (ints_attribute("kernel_shape", {kh, kw}) != std::vector<std::int64_t>{kh, kw})
    refuse("its kernel_shape is not its weight's " + w.dims_text());
  if (kh != kw || kh < 1 || kh > 1 << 16)
    refuse("its kernel is " + pair_text(kh, kw) + ": cnnengine's convolutions have square kernels");
  if (same_on_both_axes(*this, "dilations", 1) != 1) refuse("it is dilated: cnnengine's transposed convolutions are not");
  const std::string mode = string_attribute("auto_pad", "NOTSET");
  if (mode != "NOTSET" && mode != "VALID")
    refuse("its auto_pad " + mode + ": give the padding as pads (auto_pad SAME of a transposed convolution is not "
           "read)");
  const int k = static_cast<int>(kh), s = same_on_both_axes(*this, "strides", 1),
            q = same_on_both_axes(*this, "output_padding", 0, 0);
  const int p = symmetric_padding(*this, in, k, 1, 1);
  const bool bias = has_input(2);
  LayerParameters params{{"weight", finite_values(*this, 1, "weight")}};
  if (bias) params.emplace_back("bias", channel_values(*this, 2, out, "bias"));
  add_layer(layers::conv_transpose2d(static_cast<int>(out), k, s, p, q, bias), {x}, std::move(params));
}

void GraphImport::batch_normalization() {
  expect_attributes({"epsilon", "momentum", "training_mode"});
  if (int_attribute("training_mode", 0) != 0) refuse("it is in training mode: export the model in eval() mode");
  for (int i = 1; i < node().output_size(); ++i)
    if (output_read(i)) refuse("its running statistics' outputs are read: export the model in eval() mode");
  const int x = activation(0);
  const Shape in = shape_of(x);
  if (in.rank != 3 && in.rank != 1)
    refuse("its input is " + in.str() + " a sample: cnnengine's BatchNorm normalises C x H x W maps or features");
  const float epsilon = float_attribute("epsilon", 1e-5f);
  // ONNX's running mean is momentum x old + (1 - momentum) x batch; PyTorch's momentum weighs the
  // batch. 1 - 0.9f is 0.100000024: six digits give back the 0.1 it was written from.
  char digits[32];
  std::snprintf(digits, sizeof digits, "%.6g", 1.0 - static_cast<double>(float_attribute("momentum", 0.9f)));
  const float torch_momentum = std::strtof(digits, nullptr);
  LayerParameters params{{"gamma", channel_values(*this, 1, in[0], "scale")},
                         {"beta", channel_values(*this, 2, in[0], "bias")},
                         {"running_mean", channel_values(*this, 3, in[0], "mean")},
                         {"running_var", channel_values(*this, 4, in[0], "variance")}};
  for (float v : params[3].second)
    if (v < 0) refuse("its running variance holds a negative value");
  add_layer(layers::batchnorm2d(torch_momentum > 0 && torch_momentum <= 1 ? torch_momentum : 0.1f, epsilon), {x},
            std::move(params));
}

// InstanceNormalization: a group per channel.
void GraphImport::instance_normalization() {
  expect_attributes({"epsilon"});
  const int x = activation(0);
  const Shape in = shape_of(x);
  if (in.rank != 3) refuse("its input is " + in.str() + " a sample, where C x H x W maps are expected");
  add_layer(layers::group_norm(in[0], float_attribute("epsilon", 1e-5f)), {x},
            {{"gamma", channel_values(*this, 1, in[0], "scale")}, {"beta", channel_values(*this, 2, in[0], "bias")}});
}

// GroupNormalization: its scale and bias one per group (opsets 18 to 20) or per channel (21).
void GraphImport::group_normalization() {
  expect_attributes({"epsilon", "num_groups", "stash_type"});
  const int x = activation(0);
  const Shape in = shape_of(x);
  if (in.rank != 3) refuse("its input is " + in.str() + " a sample, where C x H x W maps are expected");
  const std::int64_t groups = int_attribute("num_groups", 0);
  if (groups < 1 || in[0] % groups != 0)
    refuse("its " + std::to_string(groups) + " groups do not divide its " + std::to_string(in[0]) + " channels");
  const auto per_channel = [&](int index, const char* what) {
    const std::size_t held = constant(index).elements();
    if (held == static_cast<std::size_t>(in[0])) return channel_values(*this, index, in[0], what);
    const std::vector<float> per_group = channel_values(*this, index, groups, what);
    std::vector<float> values;
    for (float v : per_group) values.insert(values.end(), static_cast<std::size_t>(in[0] / groups), v);
    return values;
  };
  add_layer(layers::group_norm(static_cast<int>(groups), float_attribute("epsilon", 1e-5f)), {x},
            {{"gamma", per_channel(1, "scale")}, {"beta", per_channel(2, "bias")}});
}

// Max and average pooling. The padding after an axis may exceed the padding before it where it
// only lets the last window overhang the input: that is ceil_mode (PyTorch's rule), which clips
// the window as ONNX's padding does for a maximum and for an average that leaves padding out.
// Other uneven padding is a pad layer in front: of -infinity for a maximum, of zeros for an
// average that counts the padding (one that leaves it out cannot be), as is any padding such an
// average counts.
void GraphImport::pool() {
  const bool max = node().op_type() == "MaxPool";
  if (max) expect_attributes({"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"});
  else expect_attributes({"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"});
  if (max && output_read(1)) refuse("its indices output is read, which no layer of cnnengine gives");
  int x = activation(0);
  const Shape in = shape_of(x);
  if (in.rank != 3) refuse("its input is " + in.str() + " a sample, where C x H x W maps are expected");
  const std::vector<std::int64_t> kernel = ints_attribute("kernel_shape", {});
  if (kernel.size() != 2) refuse("its kernel_shape " + ints_text(kernel) + " is not two values");
  if (kernel[0] != kernel[1] || kernel[0] < 1 || kernel[0] > 1 << 16)
    refuse("its window is " + pair_text(kernel[0], kernel[1]) + ": cnnengine's poolings have square windows");
  const int k = static_cast<int>(kernel[0]), s = same_on_both_axes(*this, "strides", 1);
  if (same_on_both_axes(*this, "dilations", 1) != 1) refuse("it is dilated: cnnengine's poolings are not");
  const bool onnx_ceil = int_attribute("ceil_mode", 0) != 0;
  const bool counts_padding = !max && int_attribute("count_include_pad", 0) != 0;
  // PyTorch's pooling of the same output: p on every side, the length rounded down or up
  // (ceil_mode); none where the padding differs between the axes or begins longer than it ends.
  struct Torch {
    std::int64_t p;
    bool ceil;
  };
  const auto as_torch = [&](const Shape& n, AxisPads h, AxisPads w) -> std::optional<Torch> {
    if (h.begin != w.begin || h.end != w.end || h.end < h.begin || 2 * h.begin > k) return std::nullopt;
    const std::int64_t p = h.begin;
    const auto onnx_length = [&](std::int64_t length, AxisPads a) {
      const std::int64_t span = length + a.begin + a.end - k;
      return span < 0 ? std::int64_t{0} : (onnx_ceil ? (span + s - 1) / s : span / s) + 1;
    };
    const auto our_length = [&](std::int64_t length, bool ceil) {
      const std::int64_t span = length + 2 * p - k;
      if (span < 0) return std::int64_t{0};
      std::int64_t out = span / s + 1;
      if (ceil && span % s != 0 && out * s < length + p) ++out;
      return out;
    };
    for (bool ceil : {false, true})
      if (our_length(n[1], ceil) == onnx_length(n[1], h) && our_length(n[2], ceil) == onnx_length(n[2], w))
        return Torch{p, ceil};
    return std::nullopt;
  };
  const auto [h, w] = read_pads(*this, in[1], in[2], k, s, 1);
  std::optional<Torch> torch = as_torch(in, h, w);
  const bool padded = h.begin + h.end + w.begin + w.end > 0;
  if (!torch || (counts_padding && padded)) {
    if (!max && !counts_padding)
      refuse("it pads its " + in.str() + " input by " + ints_text({h.begin, w.begin, h.end, w.end}) +
             " and leaves the padding out of its averages: cnnengine's average pooling pads every side alike (a "
             "longer end only as ceil_mode)");
    if (max && std::max({h.begin, h.end, w.begin, w.end}) >= k)
      refuse("it pads its " + in.str() + " input by " + ints_text({h.begin, w.begin, h.end, w.end}) +
             ", a window's width or more: a window would hold padding alone");
    x = pad_in_front(*this, x, h, w, max ? -INFINITY : 0.0f);
    torch = as_torch(shape_of(x), AxisPads{}, AxisPads{});
    if (!torch) refuse("its output is not one of PyTorch's poolings (floor or ceil_mode) of its padded input");
  }
  const auto [p, ceil] = *torch;
  if (counts_padding && ceil)
    refuse("it counts the padding in its averages (count_include_pad=1) with ceil_mode: cnnengine's average pooling "
           "leaves the overhang out; export with count_include_pad=False");
  add_layer(max ? layers::max_pool2d(k, s, static_cast<int>(p), ceil) : layers::avg_pool2d(k, s, static_cast<int>(p), ceil),
            {x});
}

void GraphImport::global_pool() {
  expect_attributes({});
  const int x = activation(0);
  if (shape_of(x).rank != 3) refuse("its input is " + shape_of(x).str() + " a sample, where C x H x W maps are expected");
  add_layer(node().op_type() == "GlobalMaxPool" ? layers::global_max_pool2d() : layers::global_avg_pool2d(), {x});
}

// ReduceMean over height and width: a global average pooling (flat where keepdims is 0).
void GraphImport::reduce_mean() {
  expect_attributes({"axes", "keepdims", "noop_with_empty_axes"});
  const int x = activation(0);
  if (shape_of(x).rank != 3) refuse("its input is " + shape_of(x).str() + " a sample, where C x H x W maps are expected");
  std::vector<std::int64_t> axes = opset() >= 18 && has_input(1) ? constant(1).ints : ints_attribute("axes", {});
  if (opset() >= 18 && has_input(1) && constant(1).integer == false) refuse("its axes are not integers");
  for (std::int64_t& a : axes) a = a < 0 ? a + 4 : a;
  std::sort(axes.begin(), axes.end());
  if (axes != std::vector<std::int64_t>{2, 3})
    refuse("it averages over the axes " + ints_text(axes) + ": the import reads a mean over height and width only");
  if (int_attribute("keepdims", 1) != 0) {
    add_layer(layers::global_avg_pool2d(), {x});
    return;
  }
  const int pooled = add_layer(layers::global_avg_pool2d(), {x}, {}, -1);
  add_layer(layers::flatten(), {pooled});
}

// Gemm: alpha x A B' + beta x C, A the flat activation, B the weight (transposed with transB).
void GraphImport::gemm() {
  expect_attributes({"alpha", "beta", "transA", "transB"});
  const int x = activation(0);
  const Shape in = shape_of(x);
  if (in.rank != 1) refuse("its input is " + in.str() + " a sample: flatten it first");
  if (int_attribute("transA", 0) != 0) refuse("it transposes its input (transA)");
  const Constant& b = weight_of_rank(*this, 1, 2, "Gemm's is a matrix");
  const bool transposed = int_attribute("transB", 0) != 0;
  const std::int64_t units = transposed ? b.dims[0] : b.dims[1], features = transposed ? b.dims[1] : b.dims[0];
  if (features != in[0] || units < 1)
    refuse("its weight " + b.dims_text() + (transposed ? " (transposed)" : "") + " does not take " +
           std::to_string(in[0]) + " features");
  const float alpha = float_attribute("alpha", 1.f), beta = float_attribute("beta", 1.f);
  const std::vector<float> values = finite_values(*this, 1, "weight");
  std::vector<float> weight(values.size());
  for (std::int64_t u = 0; u < units; ++u)
    for (std::int64_t f = 0; f < features; ++f)
      weight[static_cast<std::size_t>(u * features + f)] =
          alpha * values[static_cast<std::size_t>(transposed ? u * features + f : f * units + u)];
  LayerParameters params{{"weight", std::move(weight)}};
  const bool bias = has_input(2);
  if (bias) {
    const std::size_t held = constant(2).elements();
    if (held != 1 && held != static_cast<std::size_t>(units))
      refuse("its C " + constant(2).dims_text() + " is not one value per unit (" + std::to_string(units) + ")");
    const std::vector<float> c = finite_values(*this, 2, "C");
    std::vector<float> scaled(static_cast<std::size_t>(units));
    for (std::size_t i = 0; i < scaled.size(); ++i) scaled[i] = beta * c[held == 1 ? 0 : i];
    params.emplace_back("bias", std::move(scaled));
  }
  add_layer(layers::dense(static_cast<int>(units), bias), {x}, std::move(params));
}

// MatMul by a constant [features, units], with the Add of a bias that follows it where it has no
// other reader.
void GraphImport::matmul() {
  expect_attributes({});
  const int x = activation(0);
  const Shape in = shape_of(x);
  if (in.rank != 1) refuse("its input is " + in.str() + " a sample: the import reads MatMul of a flat input only");
  const Constant& b = weight_of_rank(*this, 1, 2, "a matrix [features, units]");
  const std::int64_t features = b.dims[0], units = b.dims[1];
  if (features != in[0] || units < 1)
    refuse("its weight " + b.dims_text() + " does not take " + std::to_string(in[0]) + " features");
  const std::vector<float> values = finite_values(*this, 1, "weight");
  std::vector<float> weight(values.size());
  for (std::int64_t u = 0; u < units; ++u)
    for (std::int64_t f = 0; f < features; ++f)
      weight[static_cast<std::size_t>(u * features + f)] = values[static_cast<std::size_t>(f * units + u)];
  LayerParameters params{{"weight", std::move(weight)}};
  const onnx::NodeProto* add = sole_reader(output_name());
  const Constant* bias = nullptr;
  if (add && add->op_type() == "Add" && add->input_size() == 2) {
    const std::string& other = add->input(0) == output_name() ? add->input(1) : add->input(0);
    bias = constant_named(other);
    if (bias && (bias->integer || bias->elements() != static_cast<std::size_t>(units) || bias->dims.size() > 2))
      bias = nullptr;
  }
  if (bias) {
    for (float v : bias->floats)
      if (!std::isfinite(v)) refuse("the bias added to it holds a value that is not finite");
    params.emplace_back("bias", bias->floats);
  }
  const int id = add_layer(layers::dense(static_cast<int>(units), bias != nullptr), {x}, std::move(params));
  if (bias) take(*add, id);
}

}  // namespace cnn::onnx_import
