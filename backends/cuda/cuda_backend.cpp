#include "backends/cuda/detail/cuda_backend_impl.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>

#include "backends/cuda/detail/architectures.hpp"
#include "backends/cuda/detail/check.hpp"
#include "memory/buffer.hpp"
#include <cnnengine/memory/memory_resource.hpp>
#include <cnnengine/memory/out_of_memory.hpp>

namespace cnn::cuda {
namespace {

std::string version_string(int major, int minor, int patch) {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::string cudnn_version_string() {
  std::size_t v = cudnnGetVersion();  // major * 10000 + minor * 100 + patch since cuDNN 9
  return version_string(static_cast<int>(v / 10000), static_cast<int>(v / 100 % 100),
                        static_cast<int>(v % 100));
}

// Everything that can change a measured algorithm's time besides the GPU: the driver (its exact
// build where /proc says it), the CUDA runtime and cuDNN.
std::string measurement_versions() {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::string text = "CUDA driver API " + std::to_string(driver) + ", runtime " + std::to_string(runtime) +
                     ", cuDNN " + std::to_string(cudnnGetVersion());
  std::ifstream proc("/proc/driver/nvidia/version");
  if (std::string line; proc && std::getline(proc, line)) text += ", " + line;
  return text;
}

std::string cublas_version_string() {
  int major = 0, minor = 0, patch = 0;
  cublasGetProperty(MAJOR_VERSION, &major);
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  return version_string(major, minor, patch);
}

}  // namespace

// Note [The libraries' own device memory]
// cuDNN and cuBLAS take device memory for themselves, outside the allocator the plan draws from:
// their handles' state and the kernels they load. The budget holds at the driver's count only if
// the plan counts it, so the constructor asks the driver how much of the device is free before
// and after creating the handles (70 MiB on an H100 with cuDNN 9.14 and cuBLAS 13.1), and
// library_reserved_bytes() sets that difference aside with the cuBLAS workspace. It is a
// measurement of the whole device: another process allocating at that moment would be counted
// too, which errs on the side of the budget. The kernels a run loads later, as it first calls
// them (CUDA loads modules lazily), and the driver's rounding of our few large allocations took
// 10 to 18 MiB more there (small and resnet18, batch 256 and at their largest batch in 2 GiB,
// measured by benchmarks/train_throughput): kKernelsLoadedLater is set aside for them.
CudaBackend::CudaBackend(const CudaOptions& options)
    : options_(options), device_memory_(options.device) {
  try {
    int count = 0;
    CNN_CHECK(cudaGetDeviceCount(&count));
    if (options_.device < 0 || options_.device >= count) {
      throw DeviceError("CUDA device " + std::to_string(options_.device) + " does not exist: " +
                        std::to_string(count) + " device(s) found");
    }
    activate();
    cudaDeviceProp props{};
    CNN_CHECK(cudaGetDeviceProperties(&props, options_.device));
    device_name_ = props.name;
    compute_major_ = props.major;
    compute_minor_ = props.minor;
    multiprocessors_ = std::max(1, props.multiProcessorCount);
    total_memory_ = props.totalGlobalMem;
    if (cudaError_t status = kernel_image_status(); status != cudaSuccess) {
      std::string archs;
      for (int a : compiled_architectures()) archs += (archs.empty() ? "sm_" : ", sm_") + std::to_string(a);
      throw DeviceError(device_name_ + " (compute capability " + std::to_string(compute_major_) +
                        "." + std::to_string(compute_minor_) + ") cannot run this build's kernels (" +
                        archs + "): " + cudaGetErrorString(status) +
                        "; rebuild with -DCMAKE_CUDA_ARCHITECTURES=" +
                        std::to_string(compute_major_ * 10 + compute_minor_));
    }

    const std::size_t free_before_libraries = available_memory();
    CNN_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    CNN_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));

    CNN_CHECK(cudnnCreate(&cudnn_));
    CNN_CHECK(cudnnSetStream(cudnn_, compute_));

    CNN_CHECK(cublasCreate(&cublas_));
    CNN_CHECK(cublasSetStream(cublas_, compute_));
    CNN_CHECK(cublasSetMathMode(
        cublas_, options_.precision == Precision::tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    CNN_CHECK(cudaDeviceSynchronize());
    const std::size_t free_after_libraries = available_memory();
    if (free_before_libraries > free_after_libraries)
      library_resident_bytes_ = free_before_libraries - free_after_libraries;
    // cuBLAS's recommended workspace: 32 MiB on Hopper and later, 4 MiB before. Reserved once so
    // that cuBLAS never allocates inside a step and the budget sees it.
    cublas_workspace_bytes_ = (compute_major_ >= 9 ? std::size_t{32} : std::size_t{4}) << 20;
    cublas_workspace_ = device_memory_.allocate(cublas_workspace_bytes_, memory::kDefaultAlignment,
                                                memory::Category::workspace);
    CNN_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_, cublas_workspace_bytes_));
    loss_scratch_ = device_memory_.allocate(loss_scratch_bytes(), memory::kDefaultAlignment,
                                            memory::Category::workspace);
    if (channel_partials_bytes() > 0)
      channel_partials_ = device_memory_.allocate(channel_partials_bytes(), memory::kDefaultAlignment,
                                                  memory::Category::workspace);
    zero_channel_partials_counters();

    void* flag = nullptr;
    CNN_CHECK(cudaHostAlloc(&flag, sizeof(LabelError), cudaHostAllocMapped));
    label_error_ = static_cast<LabelError*>(flag);
    *label_error_ = LabelError{};
    void* flag_device = nullptr;
    CNN_CHECK(cudaHostGetDevicePointer(&flag_device, flag, 0));
    label_error_device_ = static_cast<LabelError*>(flag_device);
    open_algorithm_cache();
  } catch (...) {
    release();
    throw;
  }
}

CudaBackend::~CudaBackend() { release(); }

void CudaBackend::release() noexcept {
  abort_capture();
  keep_measurements(true);
  if (compute_) cudaStreamSynchronize(compute_);
  if (copy_) cudaStreamSynchronize(copy_);
  conv_plans_.clear();
  tracker_.release();
  for (cudaEvent_t& event : fence_events_) {
    if (event) cudaEventDestroy(event);
    event = nullptr;
  }
  if (label_error_) cudaFreeHost(label_error_);
  label_error_ = label_error_device_ = nullptr;
  if (cublas_) cublasDestroy(cublas_);
  cublas_ = nullptr;
  if (cublas_workspace_) {
    memory::give_back(device_memory_, cublas_workspace_, cublas_workspace_bytes_, memory::kDefaultAlignment,
                      memory::Category::workspace);
  }
  cublas_workspace_ = nullptr;
  cublas_workspace_bytes_ = 0;
  if (loss_scratch_) {
    memory::give_back(device_memory_, loss_scratch_, loss_scratch_bytes(), memory::kDefaultAlignment,
                      memory::Category::workspace);
  }
  loss_scratch_ = nullptr;
  if (channel_partials_) {
    memory::give_back(device_memory_, channel_partials_, channel_partials_bytes(), memory::kDefaultAlignment,
                      memory::Category::workspace);
  }
  channel_partials_ = nullptr;
  if (cudnn_) cudnnDestroy(cudnn_);
  cudnn_ = nullptr;
  if (copy_) cudaStreamDestroy(copy_);
  if (compute_) cudaStreamDestroy(compute_);
  copy_ = compute_ = nullptr;
  cudaGetLastError();
}

void CudaBackend::activate() const { CNN_CHECK(cudaSetDevice(options_.device)); }

std::size_t CudaBackend::available_memory() const {
  activate();
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) == cudaSuccess) return free;
  cudaGetLastError();
  return 0;
}

void CudaBackend::open_algorithm_cache() {
  if (options_.algorithm_cache.empty()) return;
  const std::string gpu = device_name_ + ", compute capability " + std::to_string(compute_major_) + "." +
                          std::to_string(compute_minor_) + ", " + std::to_string(multiprocessors_) +
                          " multiprocessors, " + std::to_string(total_memory_) + " bytes";
  algorithm_cache_ = std::make_unique<AlgorithmCacheFile>(options_.algorithm_cache, gpu, measurement_versions());
  const int read = import_measurements(options_.device, algorithm_cache_->load());
  if (!algorithm_cache_->problem().empty()) {  // neither read nor written
    algorithm_cache_note_ = "algorithm cache not used: " + algorithm_cache_->problem();
    algorithm_cache_.reset();
    return;
  }
  algorithm_cache_note_ = std::to_string(read) + " measured algorithm choices read from " + options_.algorithm_cache;
  measurements_kept_ = measurements_made();
  last_kept_ = std::chrono::steady_clock::now();
}

void CudaBackend::keep_measurements(bool now) noexcept {
  if (!algorithm_cache_) return;
  try {
    const std::uint64_t made = measurements_made();
    const auto since = std::chrono::steady_clock::now() - last_kept_;
    if (made == measurements_kept_ || (!now && since < std::chrono::seconds(2))) return;
    if (!algorithm_cache_->save(export_measurements(options_.device))) {
      algorithm_cache_note_ = algorithm_cache_->problem();
      algorithm_cache_.reset();  // said once; measuring goes on without the file
      return;
    }
    measurements_kept_ = made;
    last_kept_ = std::chrono::steady_clock::now();
  } catch (...) {
    algorithm_cache_.reset();
  }
}

std::string CudaBackend::determinism_report() const {
  double chosen = 0, fastest = 0;
  int passes = 0, timed = 0, slower = 0;
  for (const auto& [shape, plan] : conv_plans_)
    for (const AlgoChoice& c : plan->choice) {
      if (!c.valid()) continue;
      ++passes;
      if (c.milliseconds < 0 || c.fastest_milliseconds < 0) continue;
      ++timed;
      chosen += c.milliseconds;
      fastest += c.fastest_milliseconds;
      if (c.milliseconds > c.fastest_milliseconds) ++slower;
    }
  char cost[200] = "";
  if (timed > 0 && fastest > 0)
    std::snprintf(cost, sizeof cost,
                  "; of %d convolution passes measured, %d run a slower algorithm: %.3f x the fastest's time", timed,
                  slower, chosen / fastest);
  if (options_.deterministic)
    return std::string("deterministic: cuDNN's deterministic convolution algorithms only") +
           (timed ? cost : passes ? "; their cost is unknown (chosen by heuristics, not measured)" : "");
  return "not deterministic: cuDNN may choose convolution algorithms whose sums vary from run to run "
         "(CudaOptions::deterministic, train_images --deterministic, restricts it)";
}

unsigned CudaBackend::blocks_for(std::size_t n) const {
  const std::size_t wanted = (n + 255) / 256;
  const std::size_t most = static_cast<std::size_t>(multiprocessors_) * 8;  // the rest grid-strides
  return static_cast<unsigned>(std::clamp<std::size_t>(wanted, 1, most));
}

std::string CudaBackend::description() const {
  return "cuda: " + device_name_ + " (device " + std::to_string(options_.device) + ", compute capability " +
         std::to_string(compute_major_) + "." + std::to_string(compute_minor_) + ", " +
         memory::format_bytes(total_memory_) + "), cuDNN " + cudnn_version_string() + ", cuBLAS " +
         cublas_version_string() + ", " + to_string(options_.precision) + ", convolution algorithms " +
         (options_.fast_start ? "by heuristics" : "measured") + (options_.deterministic ? ", deterministic" : "") +
         (algorithm_cache_note_.empty() ? "" : "; " + algorithm_cache_note_);
}

void CudaBackend::refuse_while_capturing(const char* call) const {
  if (capturing_) throw std::logic_error(std::string(call) + " cannot be part of a captured graph");
}

void CudaBackend::copy_to_device(const void* host, void* device, std::size_t bytes) {
  // `host` may be reused once the copy is done; earlier compute work may still be running.
  const Fence copied = copy_to_device_async(host, device, bytes);
  if (copied.id) CNN_CHECK(cudaEventSynchronize(fence_events_[copied.id % kFenceEvents]));
}

void CudaBackend::copy_to_host(const void* device, void* host, std::size_t bytes) {
  refuse_while_capturing("copy_to_host");
  activate();
  if (bytes) CNN_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, compute_));
  CNN_CHECK(cudaStreamSynchronize(compute_));
  raise_device_errors();
}

Fence CudaBackend::record_fence(cudaStream_t stream) {
  const std::uint64_t id = ++fences_;
  cudaEvent_t& event = fence_events_[id % kFenceEvents];
  if (!event) CNN_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  CNN_CHECK(cudaEventRecord(event, stream));
  return Fence{id};
}

Fence CudaBackend::copy_to_device_async(const void* host, void* device, std::size_t bytes) {
  refuse_while_capturing("a copy to the device");
  if (bytes == 0) return {};
  activate();
  tracker_.order_copy(device, bytes, compute_, copy_);
  CNN_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, copy_));
  const Fence fence = record_fence(copy_);
  // Later compute calls see the data; nothing waits on the host.
  CNN_CHECK(cudaStreamWaitEvent(compute_, fence_events_[fence.id % kFenceEvents], 0));
  return fence;
}

Fence CudaBackend::copy_to_host_async(const void* device, void* host, std::size_t bytes) {
  refuse_while_capturing("a copy to the host");
  activate();
  if (bytes) CNN_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, compute_));
  return record_fence(compute_);
}

bool CudaBackend::reached(Fence fence) {
  if (fence.id == 0) return true;
  if (fence_expired(fence)) return cudaStreamQuery(copy_) == cudaSuccess && cudaStreamQuery(compute_) == cudaSuccess;
  const cudaError_t status = cudaEventQuery(fence_events_[fence.id % kFenceEvents]);
  if (status == cudaErrorNotReady) return false;
  CNN_CHECK(status);
  return true;
}

void CudaBackend::wait(Fence fence) {
  refuse_while_capturing("wait");
  if (fence.id == 0) return;
  if (fence_expired(fence)) return synchronize();
  CNN_CHECK(cudaEventSynchronize(fence_events_[fence.id % kFenceEvents]));
  raise_device_errors();
}

void CudaBackend::do_copy_on_device(const void* src, void* dst, std::size_t bytes) {
  if (bytes == 0) return;
  activate();
  CNN_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, compute_));
  touched(DeviceRange{src, bytes}, DeviceRange{dst, bytes});
}

void CudaBackend::synchronize() {
  refuse_while_capturing("synchronize");
  activate();
  CNN_CHECK(cudaStreamSynchronize(copy_));
  CNN_CHECK(cudaStreamSynchronize(compute_));
  raise_device_errors();
}

void CudaBackend::raise_device_errors() {
  volatile LabelError* error = label_error_;
  if (!error->raised) return;
  const int row = error->row, label = error->label, classes = error->classes;
  const int pixel_row = error->pixel_row, pixel_column = error->pixel_column;
  error->raised = 0;
  if (pixel_row >= 0) {
    throw DataError("pixel_cross_entropy: mask value " + std::to_string(label) + " at pixel (" +
                    std::to_string(pixel_row) + ", " + std::to_string(pixel_column) + ") of sample " +
                    std::to_string(row) + " is neither one of the " + std::to_string(classes) + " classes nor " +
                    std::to_string(kIgnoreMask) + " (ignored)");
  }
  throw DataError("softmax_cross_entropy: label " + std::to_string(label) + " of sample " +
                  std::to_string(row) + " is outside [0, " + std::to_string(classes) + ")");
}

}  // namespace cnn::cuda

namespace cnn {

std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& options) {
  try {
    return std::make_unique<cuda::CudaBackend>(options);
  } catch (const memory::OutOfMemory&) {
    throw;
  } catch (const std::exception& e) {
    throw DeviceError("cannot start the CUDA backend on device " + std::to_string(options.device) +
                      ": " + e.what());
  }
}

}  // namespace cnn
