#pragma once
// ONNX tensors as the importer uses them: an initializer or a folded constant, its values as
// floats (any floating type) or as 64-bit integers (any integer type), read with every size
// checked against the bytes that hold it before anything is allocated for it.
#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cnn::onnx_import {

// A dimension of a shape computed from an activation's Shape: the batch, unknown until run time.
inline constexpr std::int64_t kBatchDim = INT64_MIN;

struct Constant {
  std::vector<std::int64_t> dims;  // ONNX's, batch included where a Shape gave it
  bool integer = false;
  std::vector<float> floats;       // where !integer
  std::vector<std::int64_t> ints;  // where integer

  std::size_t elements() const { return integer ? ints.size() : floats.size(); }
  // "[64, 3, 7, 7]"
  std::string dims_text() const;
};

// A list of integers as the messages write them: "[N, -1]" (the batch dimension as N); past 16
// values, the first 16 and the count.
std::string ints_text(const std::vector<std::int64_t>& values);

// The product of `dims`, each at least 0; a ConfigError (`what` names the tensor) where one is
// negative or the product passes 2^40 elements.
std::size_t element_count(const std::vector<std::int64_t>& dims, const std::string& what);

// A TensorProto's values. A ConfigError naming `what` where its data lie in an external file,
// its type is not a floating or integer one, or its data do not hold exactly the elements its
// dims say.
Constant read_tensor(const onnx::TensorProto& tensor, const std::string& what);

// A float's value from IEEE half and bfloat16 bits.
float half_to_float(std::uint16_t bits);
float bfloat16_to_float(std::uint16_t bits);

}  // namespace cnn::onnx_import
