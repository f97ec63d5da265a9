#pragma once
// A tensor is a view: a pointer into memory someone else owns (the step arena, the parameter
// block) and a shape. Copying a Tensor copies the view, never the data.
#include <cstddef>
#include <cstdint>

#include "engine/core/shape.hpp"

namespace cnn {

struct Tensor {
  float* data = nullptr;
  Shape shape;

  std::size_t elements() const { return shape.elements(); }
  std::size_t bytes() const { return elements() * sizeof(float); }
  bool empty() const { return data == nullptr; }
  int n() const { return shape[0]; }
  int c() const { return shape.rank > 1 ? shape[1] : 1; }
  int h() const { return shape.rank > 2 ? shape[2] : 1; }
  int w() const { return shape.rank > 3 ? shape[3] : 1; }
  // Elements per sample (everything after the batch dimension).
  std::size_t sample_elements() const { return shape[0] ? elements() / static_cast<std::size_t>(shape[0]) : 0; }
};

// Integer views: labels, pooling indices.
struct IntTensor {
  std::int32_t* data = nullptr;
  std::size_t size = 0;
};

}  // namespace cnn
