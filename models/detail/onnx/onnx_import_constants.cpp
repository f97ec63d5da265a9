// Operators over constants, folded at import: the Shape, Gather, Unsqueeze, Concat and Reshape
// chains an exporter writes before a classifier, a Cast or a Transpose of a weight, arithmetic on
// shapes. A dimension that depends on the batch (kBatchDim) is carried through the operators
// that copy values and refused by those that compute with them.
#include <algorithm>
#include <string>

#include "models/detail/onnx/onnx_graph_import.hpp"

namespace cnn::onnx_import {
namespace {

// A folded constant is a shape or a small table, never a weight of its own: more is refused.
constexpr std::size_t kMaxFoldedElements = std::size_t{1} << 24;

std::int64_t normalized_axis(const GraphImport& g, std::int64_t axis, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r) g.refuse("its axis " + std::to_string(axis) + " is outside a tensor of rank " + std::to_string(rank));
  return axis < 0 ? axis + r : axis;
}

std::size_t product(const std::vector<std::int64_t>& dims, std::size_t from, std::size_t to) {
  std::size_t p = 1;
  for (std::size_t i = from; i < to; ++i) p *= static_cast<std::size_t>(dims[i]);
  return p;
}

// Copies element `from` of `in` to element `to` of `out` (of one type).
void copy_element(const Constant& in, std::size_t from, Constant& out, std::size_t to) {
  if (in.integer) out.ints[to] = in.ints[from];
  else out.floats[to] = in.floats[from];
}

Constant like(const Constant& in, std::vector<std::int64_t> dims, const GraphImport& g) {
  Constant c;
  c.integer = in.integer;
  c.dims = std::move(dims);
  const std::size_t n = element_count(c.dims, "node '" + g.node().name() + "'");
  if (n > kMaxFoldedElements) g.refuse("it computes a constant of more than 2^24 elements");
  if (c.integer) c.ints.resize(n);
  else c.floats.resize(n);
  return c;
}

std::vector<std::int64_t> integers(const GraphImport& g, int index) {
  const Constant& c = g.constant(index);
  if (!c.integer) g.refuse("its input " + std::to_string(index) + " holds floats, where integers are expected");
  for (std::int64_t v : c.ints)
    if (v == kBatchDim) g.refuse("its input " + std::to_string(index) + " depends on the batch size");
  return c.ints;
}

// The axes of Unsqueeze, Squeeze and the like: an attribute before `input_from` opset, an input
// from it.
std::vector<std::int64_t> axes_of(const GraphImport& g, int input_from) {
  if (g.opset() >= input_from) return g.has_input(1) ? integers(g, 1) : std::vector<std::int64_t>{};
  return g.ints_attribute("axes", {});
}

Constant folded_gather(const GraphImport& g) {
  const Constant& data = g.constant(0);
  const std::vector<std::int64_t> indices = integers(g, 1);
  if (data.dims.empty()) g.refuse("it gathers from a scalar");
  const std::size_t axis = static_cast<std::size_t>(normalized_axis(g, g.int_attribute("axis", 0), data.dims.size()));
  const std::size_t outer = product(data.dims, 0, axis), inner = product(data.dims, axis + 1, data.dims.size());
  const std::int64_t length = data.dims[axis];
  std::vector<std::int64_t> dims(data.dims.begin(), data.dims.begin() + static_cast<std::ptrdiff_t>(axis));
  dims.insert(dims.end(), g.constant(1).dims.begin(), g.constant(1).dims.end());
  dims.insert(dims.end(), data.dims.begin() + static_cast<std::ptrdiff_t>(axis) + 1, data.dims.end());
  Constant out = like(data, dims, g);
  std::size_t to = 0;
  for (std::size_t o = 0; o < outer; ++o)
    for (std::int64_t index : indices) {
      const std::int64_t i = index < 0 ? index + length : index;
      if (i < 0 || i >= length) g.refuse("it gathers index " + std::to_string(index) + " of " + std::to_string(length));
      for (std::size_t k = 0; k < inner; ++k)
        copy_element(data, (o * static_cast<std::size_t>(length) + static_cast<std::size_t>(i)) * inner + k, out, to++);
    }
  return out;
}

Constant folded_concat(const GraphImport& g) {
  const Constant& first = g.constant(0);
  if (first.dims.empty()) g.refuse("it joins scalars");
  const std::size_t axis = static_cast<std::size_t>(normalized_axis(g, g.int_attribute("axis", 0), first.dims.size()));
  std::vector<std::int64_t> dims = first.dims;
  dims[axis] = 0;
  for (int i = 0; i < g.node().input_size(); ++i) {
    const Constant& c = g.constant(i);
    if (c.integer != first.integer || c.dims.size() != first.dims.size())
      g.refuse("it joins constants of other types or ranks");
    for (std::size_t d = 0; d < dims.size(); ++d)
      if (d != axis && c.dims[d] != first.dims[d]) g.refuse("it joins constants of other shapes");
    dims[axis] += c.dims[axis];
  }
  Constant out = like(first, dims, g);
  const std::size_t outer = product(first.dims, 0, axis);
  std::size_t to = 0;
  for (std::size_t o = 0; o < outer; ++o)
    for (int i = 0; i < g.node().input_size(); ++i) {
      const Constant& c = g.constant(i);
      const std::size_t block = product(c.dims, axis, c.dims.size());
      for (std::size_t k = 0; k < block; ++k) copy_element(c, o * block + k, out, to++);
    }
  return out;
}

// Unsqueeze, Squeeze, Reshape and Flatten of a constant: the same values, other dims.
Constant folded_reshaped(const GraphImport& g, const std::string& op) {
  const Constant& in = g.constant(0);
  std::vector<std::int64_t> dims;
  if (op == "Unsqueeze") {
    std::vector<std::int64_t> axes = axes_of(g, 13);
    const std::size_t rank = in.dims.size() + axes.size();
    for (std::int64_t& a : axes) a = normalized_axis(g, a, rank);
    for (std::size_t i = 0, from = 0; i < rank; ++i)
      dims.push_back(std::count(axes.begin(), axes.end(), static_cast<std::int64_t>(i)) ? 1 : in.dims[from++]);
  } else if (op == "Squeeze") {
    std::vector<std::int64_t> axes = axes_of(g, 13);
    for (std::int64_t& a : axes) a = normalized_axis(g, a, in.dims.size());
    for (std::size_t i = 0; i < in.dims.size(); ++i) {
      const bool squeezed = axes.empty() ? in.dims[i] == 1 : std::count(axes.begin(), axes.end(), static_cast<std::int64_t>(i)) > 0;
      if (squeezed && in.dims[i] != 1) g.refuse("it squeezes a dimension of " + std::to_string(in.dims[i]));
      if (!squeezed) dims.push_back(in.dims[i]);
    }
  } else if (op == "Flatten") {
    const std::size_t axis = static_cast<std::size_t>(
        g.int_attribute("axis", 1) < 0 ? g.int_attribute("axis", 1) + static_cast<std::int64_t>(in.dims.size())
                                       : g.int_attribute("axis", 1));
    if (axis > in.dims.size()) g.refuse("its axis is outside the tensor");
    dims = {static_cast<std::int64_t>(product(in.dims, 0, axis)),
            static_cast<std::int64_t>(product(in.dims, axis, in.dims.size()))};
  } else {  // Reshape
    const std::vector<std::int64_t> target = integers(g, 1);
    std::size_t known = 1;
    int inferred = -1;
    for (std::size_t i = 0; i < target.size(); ++i) {
      std::int64_t v = target[i];
      if (v == 0 && g.int_attribute("allowzero", 0) == 0) {
        if (i >= in.dims.size()) g.refuse("its shape copies a dimension the input lacks");
        v = in.dims[i];
      }
      if (v == -1) {
        if (inferred >= 0) g.refuse("its shape has two -1");
        inferred = static_cast<int>(i);
        dims.push_back(1);
        continue;
      }
      if (v < 0 || (v > 0 && known > in.elements() / static_cast<std::size_t>(v)))
        g.refuse("its shape does not hold its input");
      known *= static_cast<std::size_t>(v);
      dims.push_back(v);
    }
    if (inferred >= 0 && known > 0) dims[static_cast<std::size_t>(inferred)] = static_cast<std::int64_t>(in.elements() / known);
  }
  Constant out = like(in, dims, g);
  if (out.elements() != in.elements())
    g.refuse("it reshapes a constant " + in.dims_text() + " to " + out.dims_text());
  out.ints = in.ints;
  out.floats = in.floats;
  return out;
}

Constant folded_cast(const GraphImport& g) {
  const Constant& in = g.constant(0);
  const std::int64_t to = g.int_attribute("to", 0);
  const bool to_float = to == onnx::TensorProto::FLOAT || to == onnx::TensorProto::FLOAT16 ||
                        to == onnx::TensorProto::BFLOAT16 || to == onnx::TensorProto::DOUBLE;
  Constant out = like(in, in.dims, g);
  if (to_float == !in.integer) {
    out = in;
    return out;
  }
  out.integer = !to_float;
  if (to_float) {
    out.ints.clear();
    for (std::int64_t v : in.ints) {
      if (v == kBatchDim) g.refuse("it casts the batch size to a float");
      out.floats.push_back(static_cast<float>(v));
    }
  } else {
    out.floats.clear();
    for (float v : in.floats) {
      if (!(v > -9.2e18f && v < 9.2e18f)) g.refuse("it casts a float out of the integers' range");
      out.ints.push_back(static_cast<std::int64_t>(v));
    }
  }
  return out;
}

// Slice of a one-dimensional constant (a shape's dims).
Constant folded_slice(const GraphImport& g) {
  const Constant& in = g.constant(0);
  if (in.dims.size() != 1) g.refuse("it slices a constant of rank " + std::to_string(in.dims.size()) + ": the import folds Slice of a list");
  const std::vector<std::int64_t> starts = integers(g, 1), ends = integers(g, 2);
  const std::vector<std::int64_t> axes = g.has_input(3) ? integers(g, 3) : std::vector<std::int64_t>{0};
  const std::vector<std::int64_t> steps = g.has_input(4) ? integers(g, 4) : std::vector<std::int64_t>{1};
  if (starts.size() != 1 || ends.size() != 1 || axes.size() != 1 || steps.size() != 1 || (axes[0] != 0 && axes[0] != -1) ||
      steps[0] == 0)
    g.refuse("its starts, ends, axes or steps are not one slice of a list");
  const auto n = static_cast<std::int64_t>(in.dims[0]);
  const std::int64_t step = steps[0];
  const auto clamp = [&](std::int64_t v, std::int64_t low, std::int64_t high) {
    if (v < 0) v += n;
    return std::min(std::max(v, low), high);
  };
  const std::int64_t start = step > 0 ? clamp(starts[0], 0, n) : clamp(starts[0], -1, n - 1);
  const std::int64_t end = step > 0 ? clamp(ends[0], 0, n) : clamp(ends[0], -1, n - 1);
  std::vector<std::size_t> picked;
  for (std::int64_t i = start; step > 0 ? i < end : i > end; i += step) picked.push_back(static_cast<std::size_t>(i));
  Constant out = like(in, {static_cast<std::int64_t>(picked.size())}, g);
  for (std::size_t i = 0; i < picked.size(); ++i) copy_element(in, picked[i], out, i);
  return out;
}

Constant folded_constant_of_shape(const GraphImport& g) {
  const std::vector<std::int64_t> dims = integers(g, 0);
  Constant value;
  value.floats = {0.f};
  if (const onnx::AttributeProto* a = g.attribute("value")) value = read_tensor(a->t(), "node '" + g.node().name() + "'");
  if (value.elements() != 1) g.refuse("its value is not one element");
  Constant out = like(value, dims, g);
  if (out.integer) std::fill(out.ints.begin(), out.ints.end(), value.ints[0]);
  else std::fill(out.floats.begin(), out.floats.end(), value.floats[0]);
  return out;
}

// Add, Sub, Mul and Div of two constants of one shape, or of one and a scalar.
Constant folded_arithmetic(const GraphImport& g, const std::string& op) {
  const Constant& a = g.constant(0);
  const Constant& b = g.constant(1);
  if (a.integer != b.integer) g.refuse("it computes with an integer and a float constant");
  if (a.integer) {
    integers(g, 0);
    integers(g, 1);
  }
  const bool a_scalar = a.elements() == 1, b_scalar = b.elements() == 1;
  if (a.dims != b.dims && !a_scalar && !b_scalar)
    g.refuse("it computes with constants of shapes " + a.dims_text() + " and " + b.dims_text());
  Constant out = like(a, a_scalar && !b_scalar ? b.dims : a.dims, g);
  for (std::size_t i = 0; i < out.elements(); ++i) {
    const std::size_t ia = a_scalar ? 0 : i, ib = b_scalar ? 0 : i;
    if (a.integer) {
      const std::int64_t x = a.ints[ia], y = b.ints[ib];
      if (op == "Div" && y == 0) g.refuse("it divides by zero");
      out.ints[i] = op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : x / y;
    } else {
      const float x = a.floats[ia], y = b.floats[ib];
      out.floats[i] = op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : x / y;
    }
  }
  return out;
}

Constant folded_transpose(const GraphImport& g) {
  const Constant& in = g.constant(0);
  const std::size_t rank = in.dims.size();
  std::vector<std::int64_t> perm = g.ints_attribute("perm", {});
  if (perm.empty())
    for (std::size_t i = 0; i < rank; ++i) perm.push_back(static_cast<std::int64_t>(rank - 1 - i));
  std::vector<std::int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i)
    if (sorted.size() != rank || sorted[i] != static_cast<std::int64_t>(i)) g.refuse("its perm is not a permutation of the axes");
  std::vector<std::int64_t> dims;
  for (std::int64_t p : perm) dims.push_back(in.dims[static_cast<std::size_t>(p)]);
  Constant out = like(in, dims, g);
  std::vector<std::size_t> stride(rank, 1);  // of the input
  for (std::size_t i = rank; i-- > 1;) stride[i - 1] = stride[i] * static_cast<std::size_t>(in.dims[i]);
  std::vector<std::int64_t> index(rank, 0);  // of the output
  for (std::size_t to = 0; to < out.elements(); ++to) {
    std::size_t from = 0;
    for (std::size_t d = 0; d < rank; ++d) from += static_cast<std::size_t>(index[d]) * stride[static_cast<std::size_t>(perm[d])];
    copy_element(in, from, out, to);
    for (std::size_t d = rank; d-- > 0;) {
      if (++index[d] < dims[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

}  // namespace

bool GraphImport::fold_constants() {
  const std::string& op = node().op_type();
  Constant folded;
  if (op == "Identity" || op == "Dropout") folded = constant(0);
  else if (op == "Cast") folded = folded_cast(*this);
  else if (op == "Shape") {
    const Constant& in = constant(0);
    folded.integer = true;
    folded.ints = in.dims;
    folded.dims = {static_cast<std::int64_t>(in.dims.size())};
  } else if (op == "Gather") folded = folded_gather(*this);
  else if (op == "Concat") folded = folded_concat(*this);
  else if (op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" || op == "Flatten") folded = folded_reshaped(*this, op);
  else if (op == "Slice") folded = folded_slice(*this);
  else if (op == "ConstantOfShape") folded = folded_constant_of_shape(*this);
  else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") folded = folded_arithmetic(*this, op);
  else if (op == "Transpose") folded = folded_transpose(*this);
  else return false;
  set_constant(std::move(folded));
  return true;
}

}  // namespace cnn::onnx_import
