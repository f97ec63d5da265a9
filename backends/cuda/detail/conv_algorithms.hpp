#pragma once
// Choosing cuDNN convolution algorithms: the fastest whose workspace fits a limit. Candidates
// for a (shapes, convolution, pass) are measured once per process with cudnnFind*AlgorithmEx on
// scratch buffers, or ranked by cuDNN's heuristics (fast start), and kept in a process-wide
// cache keyed also by device, cuDNN version and math mode.
#include <cudnn.h>

#include <array>
#include <cstddef>
#include <functional>

#include "cnnengine/backends/cuda/detail/descriptors.hpp"
#include "cnnengine/memory/memory_resource.hpp"

namespace cnn::cuda {

// n, c, h, w, out channels, out h, out w, kernel h, kernel w, stride, padding
using ConvShape = std::array<int, 11>;

struct ConvShapeHash {
  std::size_t operator()(const ConvShape& s) const noexcept {
    std::size_t h = 0;
    for (int v : s) h = h * 1000003u ^ std::hash<int>()(v);
    return h;
  }
};

enum class ConvAlgoPass { forward = 0, backward_data = 1, backward_filter = 2 };

struct AlgoChoice {
  int algo = -1;  // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t, by pass
  std::size_t workspace = 0;
  cudnnMathType_t math = CUDNN_FMA_MATH;
  bool valid() const { return algo >= 0; }
};

// The cuDNN state of one convolution shape: descriptors and the algorithm chosen per pass.
struct ConvPlan {
  ConvShape shape{};
  TensorDescriptor x, y, bias;
  FilterDescriptor w;
  ConvolutionDescriptor conv;
  std::array<AlgoChoice, 3> choice{};  // by ConvAlgoPass
};

struct AlgoSearch {
  cudnnHandle_t handle = nullptr;
  int device = 0;
  bool tf32 = false;
  // true: measure (cudnnFind*Ex), allocating scratch from `scratch`; false: heuristics only,
  // unless measurements are already cached.
  bool measure = false;
  memory::MemoryResource* scratch = nullptr;
};

// The fastest algorithm for `pass` whose workspace is at most `limit` bytes. Throws
// DeviceError when none fits.
AlgoChoice choose_algorithm(const AlgoSearch& search, const ConvPlan& plan, ConvAlgoPass pass,
                            std::size_t limit);

}  // namespace cnn::cuda
