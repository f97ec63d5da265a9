#pragma once
// Shapes and tensors. A tensor is a view: a pointer into memory someone else owns (the step
// arena, the parameter block) and a shape. Copying a Tensor copies the view, never the data.
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include <cnnengine/base/error.hpp>

namespace cnn {

// A tensor shape: up to four dimensions, NCHW for images. dims beyond rank are 1.
//
// Note [Channels-last images]
// An image tensor's dimensions are always [N, C, H, W]; `channels_last` says its values lie in
// memory as N, H, W, C (PyTorch's torch.channels_last, cuDNN's NHWC), the order in which tensor-core
// convolutions read them without a transpose. It belongs to the shape, so that a query on shapes
// alone (a convolution's workspace) knows the layout, and two shapes of one size but different
// orders are not equal. A batch [N, C, H, W] is channels last; a sample's shape [C, H, W] may
// carry the flag for the batches made of it (batched). A backend takes channels-last images
// where Backend::takes_channels_last says so, in the calls it lists there; every other call
// refuses them (engine/core/backend_calls.cpp). Weights stay [out, in, kh, kw] in every layout: a
// backend reorders its own copies of them. A training step keeps its images channels last where
// the backend and every layer take them (channels_last_step, engine/plan/detail/step_plan.cpp).
struct Shape {
  static constexpr int kMaxRank = 4;
  std::array<int, kMaxRank> dims{1, 1, 1, 1};
  int rank = 0;
  bool channels_last = false;

  Shape() = default;
  // Throws ShapeError for more than four dimensions.
  Shape(std::initializer_list<int> list) {
    if (list.size() > static_cast<std::size_t>(kMaxRank))
      throw ShapeError("a shape has at most " + std::to_string(kMaxRank) + " dimensions, got " +
                       std::to_string(list.size()));
    for (int d : list) dims[static_cast<std::size_t>(rank++)] = d;
  }
  int operator[](int i) const { return dims[static_cast<std::size_t>(i)]; }
  int& operator[](int i) { return dims[static_cast<std::size_t>(i)]; }
  std::size_t elements() const {
    std::size_t n = 1;
    for (int i = 0; i < rank; ++i) n *= static_cast<std::size_t>(dims[static_cast<std::size_t>(i)]);
    return n;
  }
  bool operator==(const Shape& o) const {
    if (rank != o.rank || channels_last != o.channels_last) return false;
    for (int i = 0; i < rank; ++i)
      if (dims[static_cast<std::size_t>(i)] != o.dims[static_cast<std::size_t>(i)]) return false;
    return true;
  }
  // The same shape with a batch dimension in front: {C,H,W} -> {n,C,H,W}. Throws ShapeError
  // for a shape of four dimensions already.
  Shape batched(int n) const {
    if (rank >= kMaxRank) throw ShapeError("cannot add a batch dimension to " + str() + ": it has four already");
    Shape s;
    s.dims[0] = n;
    for (int i = 0; i < rank; ++i) s.dims[static_cast<std::size_t>(i + 1)] = dims[static_cast<std::size_t>(i)];
    s.rank = rank + 1;
    s.channels_last = channels_last;
    return s;
  }
  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < rank; ++i) s += (i ? "x" : "") + std::to_string(dims[static_cast<std::size_t>(i)]);
    return s + (channels_last ? ", channels last]" : "]");
  }
};

// True where a sample's values lie alike in NCHW and channels-last order (Note [Channels-last
// images]): not an image [C, H, W], or an image of one channel or of one pixel.
inline bool one_order(const Shape& sample) {
  return sample.rank != 3 || sample[0] == 1 || static_cast<long long>(sample[1]) * sample[2] == 1;
}

struct Tensor {
  float* data = nullptr;
  Shape shape;
  // Where not null, the values in the backend's 16-bit format, for a backend that takes values as
  // they are stored (Note [Values as they are stored], backend.hpp): an input's 16-bit bits,
  // beside `data` widened from them or alone (`data` null); or, on an output, where the call
  // rounds its result (`data` then null, or its scratch). A view that moves `data` must move this
  // too, or drop it.
  void* packed16 = nullptr;

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

// Bytes in a backend's memory: a segmentation's masks, one byte a pixel.
struct ByteTensor {
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;
};

}  // namespace cnn
