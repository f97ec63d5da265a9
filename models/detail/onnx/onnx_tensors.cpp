#include "models/detail/onnx/onnx_tensors.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include <cnnengine/base/error.hpp>

namespace cnn::onnx_import {
namespace {

// raw_data is little-endian by ONNX's definition.
static_assert(std::endian::native == std::endian::little);

constexpr std::size_t kMaxElements = std::size_t{1} << 40;
constexpr std::size_t kMaxIntegerElements = std::size_t{1} << 24;

using Proto = onnx::TensorProto;

std::size_t element_bytes(int type) {
  switch (type) {
    case Proto::FLOAT: case Proto::INT32: case Proto::UINT32: return 4;
    case Proto::FLOAT16: case Proto::BFLOAT16: case Proto::INT16: case Proto::UINT16: return 2;
    case Proto::DOUBLE: case Proto::INT64: case Proto::UINT64: return 8;
    case Proto::INT8: case Proto::UINT8: case Proto::BOOL: return 1;
    default: return 0;
  }
}

bool is_float_type(int type) {
  return type == Proto::FLOAT || type == Proto::FLOAT16 || type == Proto::BFLOAT16 || type == Proto::DOUBLE;
}

template <class T>
T raw_element(const std::string& raw, std::size_t i) {
  T value;
  std::memcpy(&value, raw.data() + i * sizeof(T), sizeof(T));
  return value;
}

// Element i of raw data of `type`, as a double (integers up to 2^53 exactly; larger ones are
// read as integers by raw_integer).
double raw_float(const std::string& raw, int type, std::size_t i) {
  switch (type) {
    case Proto::FLOAT: return raw_element<float>(raw, i);
    case Proto::FLOAT16: return half_to_float(raw_element<std::uint16_t>(raw, i));
    case Proto::BFLOAT16: return bfloat16_to_float(raw_element<std::uint16_t>(raw, i));
    default: return raw_element<double>(raw, i);
  }
}

std::int64_t raw_integer(const std::string& raw, int type, std::size_t i) {
  switch (type) {
    case Proto::INT32: return raw_element<std::int32_t>(raw, i);
    case Proto::UINT32: return raw_element<std::uint32_t>(raw, i);
    case Proto::INT16: return raw_element<std::int16_t>(raw, i);
    case Proto::UINT16: return raw_element<std::uint16_t>(raw, i);
    case Proto::INT8: return raw_element<std::int8_t>(raw, i);
    case Proto::UINT8: case Proto::BOOL: return raw_element<std::uint8_t>(raw, i);
    case Proto::UINT64: return static_cast<std::int64_t>(raw_element<std::uint64_t>(raw, i));
    default: return raw_element<std::int64_t>(raw, i);
  }
}

// The typed field that holds a tensor of `type` where raw_data is empty, and its length.
int typed_length(const Proto& t, int type) {
  switch (type) {
    case Proto::FLOAT: return t.float_data_size();
    case Proto::DOUBLE: return t.double_data_size();
    case Proto::INT64: return t.int64_data_size();
    case Proto::UINT32: case Proto::UINT64: return t.uint64_data_size();
    default: return t.int32_data_size();  // the 16- and 8-bit types and bool, as ONNX stores them
  }
}

double typed_float(const Proto& t, int type, int i) {
  switch (type) {
    case Proto::FLOAT: return t.float_data(i);
    case Proto::DOUBLE: return t.double_data(i);
    case Proto::FLOAT16: return half_to_float(static_cast<std::uint16_t>(t.int32_data(i)));
    default: return bfloat16_to_float(static_cast<std::uint16_t>(t.int32_data(i)));
  }
}

std::int64_t typed_integer(const Proto& t, int type, int i) {
  switch (type) {
    case Proto::INT64: return t.int64_data(i);
    case Proto::UINT32: case Proto::UINT64: return static_cast<std::int64_t>(t.uint64_data(i));
    default: return t.int32_data(i);
  }
}

}  // namespace

std::string ints_text(const std::vector<std::int64_t>& values) {
  constexpr std::size_t kShown = 16;  // a hostile file's list of millions stays a line
  std::string text = "[";
  for (std::size_t i = 0; i < std::min(values.size(), kShown); ++i)
    text += (i ? ", " : "") + (values[i] == kBatchDim ? std::string("N") : std::to_string(values[i]));
  if (values.size() > kShown) text += ", ... (" + std::to_string(values.size()) + " values)";
  return text + "]";
}

std::string Constant::dims_text() const { return ints_text(dims); }

std::size_t element_count(const std::vector<std::int64_t>& dims, const std::string& what) {
  std::size_t count = 1;
  for (std::int64_t d : dims) {
    if (d < 0) throw ConfigError(what + ": a dimension of " + std::to_string(d));
    if (d != 0 && count > kMaxElements / static_cast<std::size_t>(d))
      throw ConfigError(what + ": more than 2^40 elements");
    count *= static_cast<std::size_t>(d);
  }
  return count;
}

Constant read_tensor(const Proto& t, const std::string& what) {
  if (t.data_location() == Proto::EXTERNAL || t.external_data_size() > 0)
    throw ConfigError(what + ": its data lie in an external file, which the import does not read (save the model "
                      "with its weights inside: onnx.save_model(model, path, save_as_external_data=False))");
  const int type = t.data_type();
  const std::size_t size = element_bytes(type);
  if (size == 0)
    throw ConfigError(what + ": a tensor of ONNX type " + std::to_string(type) +
                      ", where the import reads floating and integer tensors");
  Constant c;
  c.dims.assign(t.dims().begin(), t.dims().end());
  const std::size_t n = element_count(c.dims, what);
  const bool raw = t.has_raw_data();
  const std::size_t held = raw ? t.raw_data().size() / size : static_cast<std::size_t>(typed_length(t, type));
  if (held != n || (raw && t.raw_data().size() % size != 0))
    throw ConfigError(what + ": its dims " + c.dims_text() + " say " + std::to_string(n) + " elements, and it holds " +
                      (raw ? std::to_string(t.raw_data().size()) + " bytes" : std::to_string(held) + " values"));
  c.integer = !is_float_type(type);
  // Integers are widened to 64 bits: a large tensor of small ones (a quantised weight, which no
  // layer takes) would take 8 times its bytes.
  if (c.integer && n > kMaxIntegerElements)
    throw ConfigError(what + ": " + std::to_string(n) + " integers, where the import reads integer tensors (shapes, "
                      "indices) of at most 2^24 elements");
  if (c.integer) {
    c.ints.resize(n);
    for (std::size_t i = 0; i < n; ++i)
      c.ints[i] = raw ? raw_integer(t.raw_data(), type, i) : typed_integer(t, type, static_cast<int>(i));
  } else {
    c.floats.resize(n);
    for (std::size_t i = 0; i < n; ++i)
      c.floats[i] = static_cast<float>(raw ? raw_float(t.raw_data(), type, i) : typed_float(t, type, static_cast<int>(i)));
  }
  return c;
}

float half_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  std::uint32_t exponent = (bits >> 10) & 0x1fu, mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  if (exponent == 0) {
    if (mantissa == 0) return std::bit_cast<float>(sign);
    // A subnormal half is a normal float: shift the mantissa up to its leading one.
    exponent = 113;  // 127 - 15 + 1
    while (!(mantissa & 0x400u)) {
      mantissa <<= 1;
      --exponent;
    }
    mantissa &= 0x3ffu;
    return std::bit_cast<float>(sign | (exponent << 23) | (mantissa << 13));
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

float bfloat16_to_float(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

}  // namespace cnn::onnx_import
