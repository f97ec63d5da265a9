// The operators that change no values of an activation, or only its layout: Flatten, Reshape
// (with GroupNorm's pattern around InstanceNormalization), Squeeze, Identity and Cast, Dropout,
// Resize (an upsampling), Pad, a final Softmax; and Constant and Shape, which give constants.
#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

#include <cnnengine/layers/builtin_layers.hpp>
#include "models/detail/onnx/onnx_graph_import.hpp"

namespace cnn::onnx_import {
namespace {

// The per-sample dims a Reshape of a `in` sample to `target` (ONNX's, the batch first) gives, or
// a reason it cannot be read: the batch must stay the first dimension.
struct ReshapeTarget {
  std::vector<std::int64_t> dims;
  std::string problem;
};
ReshapeTarget per_sample_target(const Constant& target, const Shape& in, bool batch_is_one) {
  const std::vector<std::int64_t>& t = target.ints;
  if (!target.integer || target.dims.size() != 1) return {{}, "its shape, a tensor " + target.dims_text() + ", is not a list of integers"};
  if (t.size() < 2) return {{}, "it reshapes to " + ints_text(t) + ", which leaves no batch dimension"};
  const std::size_t elements = in.elements();
  ReshapeTarget r;
  std::size_t known = 1;
  int inferred = -1;
  for (std::size_t i = 1; i < t.size(); ++i) {
    std::int64_t v = t[i];
    if (v == 0) {
      if (i - 1 >= static_cast<std::size_t>(in.rank)) return {{}, "its shape " + ints_text(t) + " copies a dimension the input lacks"};
      v = in[static_cast<int>(i - 1)];
    }
    if (v == -1) {
      if (inferred >= 0) return {{}, "its shape " + ints_text(t) + " has two -1"};
      inferred = static_cast<int>(r.dims.size());
      r.dims.push_back(1);
      continue;
    }
    if (v < 1 || static_cast<std::size_t>(v) > elements)
      return {{}, "its shape " + ints_text(t) + " does not keep the batch first (a " + in.str() + " sample)"};
    known *= static_cast<std::size_t>(v);
    if (known > elements) return {{}, "its shape " + ints_text(t) + " holds more than a " + in.str() + " sample"};
    r.dims.push_back(v);
  }
  if (inferred >= 0) {
    if (elements % known != 0) return {{}, "its shape " + ints_text(t) + " does not divide a " + in.str() + " sample"};
    r.dims[static_cast<std::size_t>(inferred)] = static_cast<std::int64_t>(elements / known);
  } else if (known != elements) {
    return {{}, "its shape " + ints_text(t) + " does not hold a " + in.str() + " sample"};
  }
  const std::int64_t first = t[0];
  const bool batch_first = first == kBatchDim || first == 0 || (first == -1 && inferred < 0) || (first == 1 && batch_is_one);
  if (!batch_first) return {{}, "its shape " + ints_text(t) + " does not keep the batch first (a " + in.str() + " sample)"};
  return r;
}

bool same_dims(const std::vector<std::int64_t>& dims, const Shape& s) {
  if (dims.size() != static_cast<std::size_t>(s.rank)) return false;
  for (int i = 0; i < s.rank; ++i)
    if (dims[static_cast<std::size_t>(i)] != s[i]) return false;
  return true;
}

bool all_equal(const std::vector<float>& values, float v) {
  for (float x : values)
    if (x != v) return false;
  return true;
}

}  // namespace

void GraphImport::flatten() {
  expect_attributes({"axis"});
  const int x = activation(0);
  const Shape in = shape_of(x);
  std::int64_t axis = int_attribute("axis", 1);
  if (axis < 0) axis += in.rank + 1;
  if (axis != 1) refuse("it flattens from axis " + std::to_string(axis) + ": the import reads Flatten from axis 1 only");
  if (in.rank == 1) alias(x);
  else add_layer(layers::flatten(), {x});
}

void GraphImport::reshape() {
  expect_attributes({"allowzero"});
  const int x = activation(0);
  const Shape in = shape_of(x);
  const Constant& target = constant(1);
  if (int_attribute("allowzero", 0) != 0)
    for (std::int64_t v : target.ints)
      if (v == 0) refuse("it reshapes to a dimension of 0 (allowzero)");
  const ReshapeTarget r = per_sample_target(target, in, batch_is_one_);
  if (!r.problem.empty()) refuse(r.problem);
  if (r.dims.size() == 2 && group_norm_pattern(x, static_cast<int>(r.dims[0]))) return;
  if (same_dims(r.dims, in)) alias(x);
  else if (r.dims.size() == 1) add_layer(layers::flatten(), {x});
  else
    refuse("it reshapes a " + in.str() + " sample to " + ints_text(r.dims) +
           ": the import reads a Reshape to [N, features] (a Flatten) or to the same shape");
}

// Reshape(x, [N, groups, -1]), InstanceNormalization with scale 1 and bias 0, Reshape back, then
// Mul by gamma and Add of beta: a GroupNorm (a LayerNorm where one group's gamma is per element),
// as PyTorch and our own export write it.
bool GraphImport::group_norm_pattern(int x, int groups) {
  const Shape in = shape_of(x);
  const onnx::NodeProto* norm = sole_reader(output_name());
  if (!norm || norm->op_type() != "InstanceNormalization" || norm->input_size() != 3 || groups < 1 ||
      in[0] % groups != 0)
    return false;
  const Constant* ones = constant_named(norm->input(1));
  const Constant* zeros = constant_named(norm->input(2));
  if (!ones || !zeros || ones->integer || zeros->integer || !all_equal(ones->floats, 1.f) ||
      !all_equal(zeros->floats, 0.f) || ones->elements() != static_cast<std::size_t>(groups))
    return false;
  const onnx::NodeProto* back = sole_reader(norm->output(0));
  if (!back || back->op_type() != "Reshape" || back->input_size() != 2) return false;
  const Constant* shape = constant_named(back->input(1));
  if (!shape || !same_dims(per_sample_target(*shape, in, batch_is_one_).dims, in)) return false;
  float epsilon = 1e-5f;
  for (const onnx::AttributeProto& a : norm->attribute())
    if (a.name() == "epsilon" && a.type() == onnx::AttributeProto::FLOAT) epsilon = a.f();
  // Mul by gamma and Add of beta, where they follow with no other reader.
  const auto affine = [&](const std::string& value, const char* op) -> std::pair<const onnx::NodeProto*, const Constant*> {
    const onnx::NodeProto* n = sole_reader(value);
    if (!n || n->op_type() != op || n->input_size() != 2) return {nullptr, nullptr};
    const Constant* c = constant_named(n->input(0) == value ? n->input(1) : n->input(0));
    if (!c || c->integer || (c->elements() != static_cast<std::size_t>(in[0]) && c->elements() != in.elements()))
      return {nullptr, nullptr};
    return {n, c};
  };
  const auto [mul, gamma] = affine(back->output(0), "Mul");
  const auto [add, beta] = mul ? affine(mul->output(0), "Add") : std::pair<const onnx::NodeProto*, const Constant*>{};
  const bool per_element = gamma && gamma->elements() == in.elements() && gamma->elements() != static_cast<std::size_t>(in[0]);
  if (gamma && beta && gamma->elements() != beta->elements()) return false;
  if (per_element && groups != 1) return false;
  const std::size_t count = per_element ? in.elements() : static_cast<std::size_t>(in[0]);
  LayerParameters params{{"gamma", gamma ? gamma->floats : std::vector<float>(count, 1.f)},
                         {"beta", beta ? beta->floats : std::vector<float>(count, 0.f)}};
  const int id = add_layer(per_element ? layers::layer_norm(epsilon) : layers::group_norm(groups, epsilon), {x},
                           std::move(params), -1);
  take(*norm, id);
  take(*back, id);
  if (mul) take(*mul, id);
  if (add && beta) take(*add, id);
  return true;
}

// Squeeze of the 1 x 1 of a pooled map: a Flatten.
void GraphImport::squeeze() {
  expect_attributes({"axes"});
  const int x = activation(0);
  const Shape in = shape_of(x);
  std::vector<std::int64_t> axes = opset() >= 13 ? (has_input(1) ? constant(1).ints : std::vector<std::int64_t>{})
                                                 : ints_attribute("axes", {});
  std::vector<std::int64_t> dims;
  for (int i = 0; i < in.rank; ++i) {
    bool squeezed = axes.empty() && in[i] == 1;
    for (std::int64_t a : axes) squeezed = squeezed || a == i + 1 || a == i - in.rank;
    if (squeezed && in[i] != 1) refuse("it squeezes a dimension of " + std::to_string(in[i]));
    if (!squeezed) dims.push_back(in[i]);
  }
  for (std::int64_t a : axes)
    if (a == 0 || a == -in.rank - 1) refuse("it squeezes the batch dimension");
  if (same_dims(dims, in)) alias(x);
  else if (dims.size() == 1) add_layer(layers::flatten(), {x});
  else refuse("it squeezes a " + in.str() + " sample to " + ints_text(dims) + ", which no layer of cnnengine gives");
}

// Identity and Cast to a floating type: the activation as it is (the network runs in its own
// precision).
void GraphImport::identity() {
  const bool cast = node().op_type() == "Cast";
  expect_attributes(cast ? std::set<std::string>{"to", "saturate"} : std::set<std::string>{});
  const int x = activation(0);
  if (cast) {
    const std::int64_t to = int_attribute("to", 0);
    if (to != onnx::TensorProto::FLOAT && to != onnx::TensorProto::FLOAT16 && to != onnx::TensorProto::BFLOAT16 &&
        to != onnx::TensorProto::DOUBLE)
      refuse("it casts an activation to ONNX type " + std::to_string(to) + ", not a floating one");
  }
  alias(x);
}

// Dropout: a dropout layer of its ratio (the identity in inference, as ONNX's).
void GraphImport::dropout() {
  expect_attributes({"ratio", "seed"});
  const int x = activation(0);
  if (output_read(1)) refuse("its mask output is read, which no layer of cnnengine gives");
  if (has_input(2) && scalar(2) != 0) refuse("it is in training mode: export the model in eval() mode");
  const double ratio = has_input(1) ? scalar(1) : float_attribute("ratio", 0.5f);
  if (!(ratio >= 0 && ratio < 1)) refuse("its ratio " + std::to_string(ratio) + " is not in [0, 1)");
  if (ratio == 0) alias(x);
  else add_layer(layers::dropout(static_cast<float>(ratio)), {x});
}

// Pad in constant mode of height and width (opsets 11 on: pads, the value and opset 18's axes are
// inputs): a pad layer. Padding the batch or the channels, a negative pad (a crop) and the other
// modes (reflect, edge, wrap) are refused.
void GraphImport::pad() {
  expect_attributes({"mode"});
  const std::string mode = string_attribute("mode", "constant");
  if (mode != "constant") refuse("its mode is " + mode + ": cnnengine pads with a constant value only");
  const int x = activation(0);
  const Shape in = shape_of(x);
  if (in.rank != 3) refuse("its input is " + in.str() + " a sample, where C x H x W maps are expected");
  if (!has_input(1)) refuse("it gives no pads");
  const Constant& given = constant(1);
  std::vector<std::int64_t> axes = {0, 1, 2, 3};
  if (has_input(3)) {
    const Constant& a = constant(3);
    if (!a.integer) refuse("its axes are not integers");
    axes = a.ints;
  }
  if (!given.integer || given.ints.size() != 2 * axes.size())
    refuse("its pads, a tensor " + given.dims_text() + ", are not two integers an axis of " + ints_text(axes));
  std::vector<std::int64_t> begin(4, 0), end(4, 0);
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const std::int64_t axis = axes[i] < 0 ? axes[i] + 4 : axes[i];
    if (axis < 0 || axis > 3) refuse("its axes " + ints_text(axes) + " are not axes of an [N, C, H, W] input");
    begin[static_cast<std::size_t>(axis)] = given.ints[i];
    end[static_cast<std::size_t>(axis)] = given.ints[i + axes.size()];
  }
  if (begin[0] || end[0] || begin[1] || end[1])
    refuse("it pads the batch or the channels (pads " + ints_text(given.ints) + "): cnnengine pads height and width");
  for (std::int64_t v : {begin[2], end[2], begin[3], end[3]})
    if (v < 0) refuse("its pads " + ints_text(given.ints) + " crop (a negative pad), which no layer of cnnengine does");
  // The pad layer refuses the rest (a side over its limit, a NaN value), named as this node's.
  const auto side = [](std::int64_t v) { return static_cast<int>(std::min<std::int64_t>(v, INT_MAX)); };
  const double value = has_input(2) && constant(2).elements() > 0 ? scalar(2) : 0.0;
  add_layer(layers::pad(side(begin[3]), side(end[3]), side(begin[2]), side(end[2]), static_cast<float>(value)), {x});
}

// Resize by a whole factor, the same for height and width: nearest (with the coordinate modes
// that pick floor(y / f) for a factor f) or bilinear (half_pixel: align_corners=False).
void GraphImport::resize() {
  expect_attributes({"antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                     "extrapolation_value", "keep_aspect_ratio_policy", "mode", "nearest_mode"});
  const int x = activation(0);
  const Shape in = shape_of(x);
  if (in.rank != 3) refuse("its input is " + in.str() + " a sample, where C x H x W maps are expected");
  // Opset 18's axes name the dimensions scales and sizes give; only height and width may be.
  std::vector<std::int64_t> axes = ints_attribute("axes", {0, 1, 2, 3});
  for (std::int64_t& a : axes) a = a < 0 ? a + 4 : a;
  const bool spatial_only = axes == std::vector<std::int64_t>{2, 3};
  if (!spatial_only && axes != std::vector<std::int64_t>{0, 1, 2, 3})
    refuse("its axes are not [2, 3] (height and width)");
  const std::size_t first = spatial_only ? 0 : 2;  // where height's value is
  double fh = 0, fw = 0;
  const bool scales = has_input(2) && constant(2).elements() > 0, sizes = has_input(3) && constant(3).elements() > 0;
  if (scales == sizes) refuse("it gives " + std::string(scales ? "both scales and sizes" : "neither scales nor sizes"));
  if (scales) {
    const std::vector<float>& s = floats(2);
    if (s.size() != first + 2 || (first == 2 && (s[0] != 1 || s[1] != 1)))
      refuse("its scales " + constant(2).dims_text() + " are not [1, 1, fH, fW] (or [fH, fW] over axes [2, 3])");
    fh = s[first];
    fw = s[first + 1];
  } else {
    const Constant& c = constant(3);
    if (!c.integer || c.ints.size() != first + 2 || (first == 2 && c.ints[1] != in[0]) || c.ints[first] < 1 ||
        c.ints[first + 1] < 1 || c.ints[first] % in[1] != 0 || c.ints[first + 1] % in[2] != 0)
      refuse("its sizes are not whole multiples of its " + in.str() + " input");
    fh = static_cast<double>(c.ints[first] / in[1]);
    fw = static_cast<double>(c.ints[first + 1] / in[2]);
  }
  if (fh != fw || fh < 1 || fh != std::floor(fh) || fh > 64)
    refuse("it scales height by " + std::to_string(fh) + " and width by " + std::to_string(fw) +
           ": cnnengine's upsample takes one whole factor for both");
  const std::string mode = string_attribute("mode", "nearest");
  const std::string coordinates = string_attribute("coordinate_transformation_mode", "half_pixel");
  const std::string nearest = string_attribute("nearest_mode", "round_prefer_floor");
  UpsampleMode upsample = UpsampleMode::nearest;
  if (mode == "nearest") {
    // For y = q f + r (0 <= r < f), floor(y / f) = q, and the half-pixel centre
    // (y + 1/2) / f - 1/2 = q + (2r + 1 - f) / 2f lies within 1/2 of q, so it rounds to q.
    const bool floor_pick = coordinates == "asymmetric" && nearest == "floor";
    const bool half_pixel = (coordinates == "half_pixel" || coordinates == "pytorch_half_pixel") &&
                            (nearest == "round_prefer_floor" || nearest == "round_prefer_ceil");
    const bool tf_half = coordinates == "tf_half_pixel_for_nn" && nearest == "floor";
    if (!floor_pick && !half_pixel && !tf_half)
      refuse("its nearest sampling (" + coordinates + ", " + nearest + ") is not PyTorch's nearest upsampling");
  } else if (mode == "linear") {
    if (coordinates != "half_pixel" && coordinates != "pytorch_half_pixel")
      refuse("its linear sampling (" + coordinates + ") is not bilinear with align_corners=False, cnnengine's");
    upsample = UpsampleMode::bilinear;
  } else {
    refuse("its mode '" + mode + "': cnnengine's upsample is nearest or bilinear");
  }
  if (fh == 1) alias(x);
  else add_layer(layers::upsample(static_cast<int>(fh), upsample), {x});
}

// A Softmax that gives the graph's output: the network gives the logits it reads (a trainer's
// loss applies the softmax itself).
void GraphImport::softmax() {
  expect_attributes({"axis"});
  const int x = activation(0);
  const Shape in = shape_of(x);
  const std::int64_t axis = int_attribute("axis", opset() >= 13 ? -1 : 1);
  const bool over_classes = axis == 1 || (in.rank == 1 && axis == -1) || (in.rank == 3 && axis == -3);
  if (!graph_outputs_.count(output_name()) || !over_classes)
    refuse("no layer of cnnengine computes a Softmax inside a network (a final one over the classes is left out)");
  note("the final Softmax (" + node().name() + ") is left out: the network gives the logits it reads");
  alias(x);
}

void GraphImport::constant_op() {
  expect_attributes({"value", "value_float", "value_floats", "value_int", "value_ints"});
  const onnx::AttributeProto* a = node().attribute_size() == 1 ? &node().attribute(0) : nullptr;
  if (!a) refuse("it has no value (or more than one)");
  Constant c;
  if (a->name() == "value") {
    c = read_tensor(a->t(), "node '" + node().name() + "' (Constant)");
  } else if (a->name() == "value_float" || a->name() == "value_floats") {
    c.floats = a->name() == "value_float" ? std::vector<float>{a->f()} : std::vector<float>(a->floats().begin(), a->floats().end());
    if (a->name() == "value_floats") c.dims = {static_cast<std::int64_t>(c.floats.size())};
  } else {
    c.integer = true;
    c.ints = a->name() == "value_int" ? std::vector<std::int64_t>{a->i()}
                                      : std::vector<std::int64_t>(a->ints().begin(), a->ints().end());
    if (a->name() == "value_ints") c.dims = {static_cast<std::int64_t>(c.ints.size())};
  }
  set_constant(std::move(c));
}

// Shape of an activation: its batch (unknown until run time: kBatchDim) and its sample's dims.
void GraphImport::shape() {
  expect_attributes({"start", "end"});
  const Shape in = shape_of(activation(0));
  std::vector<std::int64_t> dims{kBatchDim};
  for (int i = 0; i < in.rank; ++i) dims.push_back(in[i]);
  const auto rank = static_cast<std::int64_t>(dims.size());
  const auto clamp = [&](std::int64_t v) { return std::min(std::max(v < 0 ? v + rank : v, std::int64_t{0}), rank); };
  const std::int64_t start = clamp(int_attribute("start", 0)), end = clamp(int_attribute("end", rank));
  Constant c;
  c.integer = true;
  if (start < end) c.ints.assign(dims.begin() + start, dims.begin() + end);
  c.dims = {static_cast<std::int64_t>(c.ints.size())};
  set_constant(std::move(c));
}

}  // namespace cnn::onnx_import
