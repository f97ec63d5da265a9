#include "cnnengine/backends/cuda/detail/conv_algorithms.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "cnnengine/memory/buffer.hpp"
#include "cnnengine/memory/out_of_memory.hpp"

namespace cnn::cuda {
namespace {

struct Candidates {
  std::vector<AlgoChoice> fastest_first;
  std::size_t tested_workspace = 0;  // measured with this much scratch; SIZE_MAX for heuristics
  std::size_t asked_workspace = 0;   // what the measurement wanted (free memory may have cut it)
  std::size_t largest_useful = 0;    // the largest workspace any usable algorithm asks for
};

// shape (11), pass, device, cuDNN version, tf32, measured
using CacheKey = std::array<long long, 16>;

std::mutex cache_mutex;
std::map<CacheKey, Candidates>& cache() {
  static std::map<CacheKey, Candidates> entries;
  return entries;
}

CacheKey cache_key(const AlgoSearch& search, const ConvPlan& plan, ConvAlgoPass pass, bool measured) {
  CacheKey key{};
  for (std::size_t i = 0; i < plan.shape.size(); ++i) key[i] = plan.shape[i];
  key[11] = static_cast<int>(pass);
  key[12] = search.device;
  key[13] = static_cast<long long>(cudnnGetVersion());
  key[14] = search.tf32;
  key[15] = measured;
  return key;
}

bool uses_tensor_ops(cudnnMathType_t math) {
  return math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// The three passes' perf structs share their fields; turn any into our choice list.
template <class Perf>
Candidates to_candidates(const Perf* perf, int count, bool tf32, std::size_t tested_workspace) {
  Candidates out;
  out.tested_workspace = tested_workspace;
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || (!tf32 && uses_tensor_ops(perf[i].mathType))) continue;
    if (perf[i].memory > tested_workspace) continue;
    // Without tf32 the search ran under CUDNN_FMA_MATH, whatever math a result names: run it so
    // (CUDNN_DEFAULT_MATH would let cuDNN use TF32 on Ampere and later).
    const cudnnMathType_t math = tf32 ? perf[i].mathType : CUDNN_FMA_MATH;
    out.fastest_first.push_back({static_cast<int>(perf[i].algo), perf[i].memory, math});
    out.largest_useful = std::max(out.largest_useful, perf[i].memory);
  }
  return out;
}

Candidates heuristics(const AlgoSearch& search, const ConvPlan& plan, ConvAlgoPass pass) {
  constexpr std::size_t unlimited = std::numeric_limits<std::size_t>::max();
  int returned = 0;
  switch (pass) {
    case ConvAlgoPass::forward: {
      std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> perf{};
      CNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(search.handle, plan.x, plan.w, plan.conv, plan.y,
                                                        static_cast<int>(perf.size()), &returned,
                                                        perf.data()));
      return to_candidates(perf.data(), returned, search.tf32, unlimited);
    }
    case ConvAlgoPass::backward_data: {
      std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> perf{};
      CNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(search.handle, plan.w, plan.y, plan.conv,
                                                             plan.x, static_cast<int>(perf.size()),
                                                             &returned, perf.data()));
      return to_candidates(perf.data(), returned, search.tf32, unlimited);
    }
    case ConvAlgoPass::backward_filter: {
      std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> perf{};
      CNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(search.handle, plan.x, plan.y, plan.conv,
                                                               plan.w, static_cast<int>(perf.size()),
                                                               &returned, perf.data()));
      return to_candidates(perf.data(), returned, search.tf32, unlimited);
    }
  }
  return {};
}

std::size_t tensor_bytes(int n, int c, int h, int w) {
  return static_cast<std::size_t>(n) * static_cast<std::size_t>(c) * static_cast<std::size_t>(h) *
         static_cast<std::size_t>(w) * sizeof(float);
}

// Measures every algorithm cuDNN can run with up to `workspace_wanted` bytes of workspace.
// Throws memory::OutOfMemory when even the tensors do not fit.
Candidates measure(const AlgoSearch& search, const ConvPlan& plan, ConvAlgoPass pass,
                   std::size_t workspace_wanted) {
  const ConvShape& s = plan.shape;
  using memory::Category;
  const memory::Buffer x(*search.scratch, tensor_bytes(s[0], s[1], s[2], s[3]), Category::workspace);
  const memory::Buffer y(*search.scratch, tensor_bytes(s[0], s[4], s[5], s[6]), Category::workspace);
  const memory::Buffer w(*search.scratch, tensor_bytes(s[4], s[1], s[7], s[8]), Category::workspace);
  // Every byte 0x3c: each float is 0.0115, finite and nonzero. All-zero data draws less power
  // and can time faster than training data does.
  for (const memory::Buffer* b : {&x, &y, &w}) CNN_CHECK(cudaMemset(b->data(), 0x3c, b->bytes()));
  CNN_CHECK(cudaDeviceSynchronize());

  // Never ask for more than the device has free: Find would only fail later.
  std::size_t free = 0, total = 0;
  CNN_CHECK(cudaMemGetInfo(&free, &total));
  constexpr std::size_t margin = std::size_t{64} << 20;
  std::size_t workspace_bytes = std::min(workspace_wanted, free > margin ? free - margin : 0);
  std::unique_ptr<memory::Buffer> workspace;
  while (!workspace) {
    try {
      workspace = std::make_unique<memory::Buffer>(*search.scratch, workspace_bytes, Category::workspace);
    } catch (const memory::OutOfMemory&) {
      if (workspace_bytes == 0) throw;
      workspace_bytes = workspace_bytes < (std::size_t{1} << 20) ? 0 : workspace_bytes / 2;
    }
  }

  int returned = 0;
  switch (pass) {
    case ConvAlgoPass::forward: {
      std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> perf{};
      CNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
          search.handle, plan.x, x.data(), plan.w, w.data(), plan.conv, plan.y, y.data(),
          static_cast<int>(perf.size()), &returned, perf.data(), workspace->data(), workspace_bytes));
      return to_candidates(perf.data(), returned, search.tf32, workspace_bytes);
    }
    case ConvAlgoPass::backward_data: {
      std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> perf{};
      CNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
          search.handle, plan.w, w.data(), plan.y, y.data(), plan.conv, plan.x, x.data(),
          static_cast<int>(perf.size()), &returned, perf.data(), workspace->data(), workspace_bytes));
      return to_candidates(perf.data(), returned, search.tf32, workspace_bytes);
    }
    case ConvAlgoPass::backward_filter: {
      std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> perf{};
      CNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
          search.handle, plan.x, x.data(), plan.y, y.data(), plan.conv, plan.w, w.data(),
          static_cast<int>(perf.size()), &returned, perf.data(), workspace->data(), workspace_bytes));
      return to_candidates(perf.data(), returned, search.tf32, workspace_bytes);
    }
  }
  return {};
}

const AlgoChoice* fastest_within(const Candidates& candidates, std::size_t limit) {
  for (const AlgoChoice& c : candidates.fastest_first)
    if (c.workspace <= limit) return &c;
  return nullptr;
}

const char* pass_name(ConvAlgoPass pass) {
  switch (pass) {
    case ConvAlgoPass::forward: return "forward";
    case ConvAlgoPass::backward_data: return "backward-data";
    case ConvAlgoPass::backward_filter: return "backward-filter";
  }
  return "?";
}

}  // namespace

AlgoChoice choose_algorithm(const AlgoSearch& search, const ConvPlan& plan, ConvAlgoPass pass,
                            std::size_t limit) {
  CNN_CHECK(cudnnSetConvolutionMathType(plan.conv, search.tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
  std::lock_guard<std::mutex> lock(cache_mutex);
  auto& entries = cache();

  const CacheKey heuristic_key = cache_key(search, plan, pass, false);
  auto heuristic = entries.find(heuristic_key);
  if (heuristic == entries.end())
    heuristic = entries.emplace(heuristic_key, heuristics(search, plan, pass)).first;

  const CacheKey measured_key = cache_key(search, plan, pass, true);
  auto measured = entries.find(measured_key);
  // Measuring again pays only when the last measurement was allowed less workspace than this
  // limit allows and some algorithm could use more.
  const std::size_t useful = std::min(limit, heuristic->second.largest_useful);
  if (search.measure && (measured == entries.end() || measured->second.asked_workspace < useful)) {
    try {
      Candidates fresh = measure(search, plan, pass, useful);
      fresh.asked_workspace = useful;
      measured = entries.insert_or_assign(measured_key, std::move(fresh)).first;
    } catch (const memory::OutOfMemory&) {
      // Not even the scratch tensors fit: the heuristics decide.
    }
  }

  const AlgoChoice* choice = nullptr;
  if (measured != entries.end()) choice = fastest_within(measured->second, limit);
  if (!choice) choice = fastest_within(heuristic->second, limit);
  if (!choice) {
    const ConvShape& s = plan.shape;
    throw DeviceError(
        std::string("cuDNN has no convolution ") + pass_name(pass) + " algorithm for input [" +
        std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]) + "x" +
        std::to_string(s[3]) + "], " + std::to_string(s[4]) + " filters of " + std::to_string(s[7]) +
        "x" + std::to_string(s[8]) + " whose workspace fits " + std::to_string(limit) + " bytes");
  }
  return *choice;
}

}  // namespace cnn::cuda
