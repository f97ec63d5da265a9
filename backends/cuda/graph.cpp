// CUDA graphs: the calls between begin_capture and end_capture are captured from the compute
// stream (thread-local mode: a call that would synchronise fails the capture instead of running)
// and instantiated once; a replay is one launch instead of one per kernel.
#include <cuda_runtime.h>

#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"

namespace cnn::cuda {
namespace {

class CudaGraph final : public CapturedCalls {
 public:
  CudaGraph(CudaBackend& backend, cudaGraphExec_t graph, std::vector<DeviceRange> touched)
      : backend_(backend), graph_(graph), touched_(std::move(touched)) {}
  ~CudaGraph() override { cudaGraphExecDestroy(graph_); }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  void replay() override { backend_.launch_graph(graph_, touched_); }

 private:
  CudaBackend& backend_;
  cudaGraphExec_t graph_;
  std::vector<DeviceRange> touched_;  // by the captured calls
};

}  // namespace

void CudaBackend::begin_capture() {
  refuse_while_capturing("begin_capture");
  activate();
  CNN_CHECK(cudaStreamBeginCapture(compute_, cudaStreamCaptureModeThreadLocal));
  capturing_ = true;
  captured_ranges_.clear();
}

std::unique_ptr<CapturedCalls> CudaBackend::end_capture() {
  if (!capturing_) throw std::logic_error("end_capture without begin_capture");
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(compute_, &graph);
  if (ended != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    check(ended, "cudaStreamEndCapture");
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  check(instantiated, "cudaGraphInstantiate");
  try {
    // Uploading now keeps the first replay as fast as the rest.
    CNN_CHECK(cudaGraphUpload(exec, compute_));
    return std::make_unique<CudaGraph>(*this, exec, std::exchange(captured_ranges_, {}));
  } catch (...) {
    cudaGraphExecDestroy(exec);
    throw;
  }
}

void CudaBackend::abort_capture() noexcept {
  if (!capturing_) return;
  capturing_ = false;
  captured_ranges_.clear();
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(compute_, &graph);
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();  // the capture's error is not the next call's
}

void CudaBackend::launch_graph(cudaGraphExec_t graph, const std::vector<DeviceRange>& touched) {
  refuse_while_capturing("a graph replay");
  activate();
  CNN_CHECK(cudaGraphLaunch(graph, compute_));
  tracker_.touched(compute_, touched.data(), touched.size());
}

}  // namespace cnn::cuda
