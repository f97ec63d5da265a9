#pragma once
// A tensor shape: up to four dimensions, NCHW for images. dims beyond rank are 1.
#include <array>
#include <cstddef>
#include <initializer_list>
#include <string>

#include "base/error.hpp"

namespace cnn {

struct Shape {
  static constexpr int kMaxRank = 4;
  std::array<int, kMaxRank> dims{1, 1, 1, 1};
  int rank = 0;

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
    if (rank != o.rank) return false;
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
    return s;
  }
  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < rank; ++i) s += (i ? "x" : "") + std::to_string(dims[static_cast<std::size_t>(i)]);
    return s + "]";
  }
};

}  // namespace cnn
