#pragma once
// Choosing cuDNN convolution algorithms: the fastest whose workspace fits a limit (and, when
// asked, that is deterministic). Candidates for a (shapes, convolution, pass) are measured once
// per process with cudnnFind*AlgorithmEx on scratch buffers, or ranked by cuDNN's heuristics
// (fast start), and kept in a process-wide cache keyed also by device, cuDNN version and
// precision (which sets the tensors' data type and the math mode). Measurements can be kept
// between processes (export_measurements, import_measurements: the algorithm cache file of
// backends/device/detail/algorithm_cache_file.hpp).
#include <cudnn.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "backends/cuda/detail/descriptors.hpp"
#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::cuda {

// n, c, h, w, out channels, out h, out w, kernel h, kernel w, stride, padding, dilation, groups,
// channels last (1: x and y are, Note [Channels-last images]; 0: NCHW)
using ConvShape = std::array<int, 14>;

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
  bool deterministic = true;  // the same bits on every run (no atomics in its sums)
  float milliseconds = -1;    // measured; below 0 where chosen by heuristics
  // The fastest candidate's measured time within the same workspace limit, deterministic or
  // not: what a deterministic choice costs. Below 0 where unknown.
  float fastest_milliseconds = -1;
  bool valid() const { return algo >= 0; }
};

// The cuDNN state of one convolution shape: descriptors and the algorithm chosen per pass. x, y
// and w are in the backend's product data type (16 bits in bf16 and fp16); y_float describes y as
// the float tensor the bias is added to and taken from. Channels-last x and y (shape[13]) have
// NHWC descriptors and the filter's copy KRSC ([out, kh, kw, in]: cuDNN's NHWC filter).
struct ConvPlan {
  ConvShape shape{};
  TensorDescriptor x, y, y_float, bias;
  FilterDescriptor w;
  ConvolutionDescriptor conv;
  std::array<AlgoChoice, 3> choice{};  // by ConvAlgoPass
};

struct AlgoSearch {
  cudnnHandle_t handle = nullptr;
  int device = 0;
  // fp32: FMA math only; tf32, bf16 and fp16: the tensor cores too. bf16 and fp16 plans hold
  // 16-bit tensors, so the measurements are kept apart by precision.
  Precision precision = Precision::fp32;
  // true: measure (cudnnFind*Ex), allocating scratch from `scratch` (a planner's budget: Note
  // [Measuring inside the budget]); false: heuristics only, unless measurements are already cached.
  bool measure = false;
  memory::MemoryResource* scratch = nullptr;
  bool deterministic = false;  // only algorithms cuDNN reports deterministic
  // Where no algorithm's workspace fits the limit: true (planning) takes the one that needs the
  // least, false (a call inside a step, whose workspace is given) throws.
  bool leanest_over_limit = false;
};

// The fastest algorithm for `pass` whose workspace is at most `limit` bytes; where none is,
// the leanest when search.leanest_over_limit, else none (find_algorithm) or DeviceError
// (choose_algorithm).
std::optional<AlgoChoice> find_algorithm(const AlgoSearch& search, const ConvPlan& plan, ConvAlgoPass pass,
                                         std::size_t limit);
AlgoChoice choose_algorithm(const AlgoSearch& search, const ConvPlan& plan, ConvAlgoPass pass,
                            std::size_t limit);

// Note [Measuring inside the budget]
// A measurement runs cuDNN's Find on scratch tensors x, y and w and a workspace. While a trainer
// or a predictor plans, that scratch comes from its budget's memory (Backend::set_query_memory),
// so the budget counts it and refuses it beyond what it leaves; otherwise from the device's own.
// The workspace asked for is cut to what the tensors leave of the room: what the scratch memory
// can give now (its largest_free_block(): under a budget, what the budget leaves), within the
// device's free memory less a margin for cuDNN's own allocations. Where the tensors alone do
// not fit, nothing is allocated and the heuristics decide; so too where the scratch memory
// refuses them (a largest_free_block() of 0 says nothing, not even that nothing is left).
std::size_t measurement_room(std::size_t device_free, std::size_t scratch_free);
// `wanted`, within what `tensors` bytes leave of `room`; none where the tensors do not fit.
std::optional<std::size_t> measurement_workspace(std::size_t wanted, std::size_t tensors, std::size_t room);

// Device `device`'s measurements under this cuDNN version, as text lines (key -> value), for
// the algorithm cache file; and measurements read back from one (invalid lines are skipped;
// each imported algorithm's workspace is checked with cuDNN when first used). Import returns
// how many were taken.
std::map<std::string, std::string> export_measurements(int device);
int import_measurements(int device, const std::map<std::string, std::string>& lines);
// Measurements made in this process so far (a save is due when it has moved).
std::uint64_t measurements_made();

// What a convolution's tensors hold in `precision`: float, or bfloat16 or half.
cudnnDataType_t conv_data_type(Precision precision);
std::size_t conv_element_bytes(Precision precision);

}  // namespace cnn::cuda
