#include "support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <utility>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/device/cuda_api.hpp"
#include "tests/rounded16.hpp"

namespace cnn::cuda_test {

Backend& cpu() {
  static CpuBackend backend(2);
  return backend;
}

namespace {
Backend& cuda_backend(Precision precision, bool fast_start, bool deterministic = false, bool channels_last = false) {
  CudaOptions options;
  options.precision = precision;
  options.fast_start = fast_start;
  options.deterministic = deterministic;
  options.channels_last = channels_last;
  return *make_cuda_backend(options).release();  // lives to the end of the process
}
}  // namespace

Backend& gpu() {
  static Backend& backend = cuda_backend(Precision::fp32, false);
  return backend;
}
Backend& gpu_tf32() {
  static Backend& backend = cuda_backend(Precision::tf32, false);
  return backend;
}
Backend& gpu_fast() {
  static Backend& backend = cuda_backend(Precision::fp32, true);
  return backend;
}
Backend& gpu_16bit(Precision precision) {
  static Backend& bf16 = cuda_backend(Precision::bf16, false);
  static Backend& fp16 = cuda_backend(Precision::fp16, false);
  return precision == Precision::fp16 ? fp16 : bf16;
}
Backend& gpu_channels_last(Precision precision) {
  static Backend& bf16 = cuda_backend(Precision::bf16, false, false, true);
  static Backend& fp16 = cuda_backend(Precision::fp16, false, false, true);
  return precision == Precision::fp16 ? fp16 : bf16;
}
Backend& gpu_deterministic() {
  static Backend& backend = cuda_backend(Precision::fp32, false, true);
  return backend;
}

std::vector<float> rounded16(Precision precision, std::vector<float> values) {
  return testing::rounded16(precision, std::move(values));
}

DeviceBuffer::DeviceBuffer(Backend& backend, std::size_t bytes) : backend_(&backend), bytes_(bytes) {
  data_ = backend_->device_memory().allocate(bytes_ ? bytes_ : 1);
}

DeviceBuffer::~DeviceBuffer() {
  if (!data_) return;
  try {
    backend_->synchronize();  // no kernel may still use it
  } catch (...) {
    // a label error a test left behind: the test that caused it checks it
  }
  backend_->device_memory().deallocate(data_, bytes_ ? bytes_ : 1);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : backend_(other.backend_), data_(other.data_), bytes_(other.bytes_) {
  other.data_ = nullptr;
}

std::vector<float> random_values(std::size_t n, std::uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

Twin::Twin(Backend& gpu, Shape shape, const std::vector<float>& values, bool gpu_channels_last)
    : gpu_backend_(&gpu),
      shape_(shape),
      gpu_channels_last_(gpu_channels_last),
      cpu_(cuda_test::cpu(), shape.elements() * sizeof(float)),
      gpu_(gpu, shape.elements() * sizeof(float)) {
  cuda_test::cpu().copy_to_device(values.data(), cpu_.data(), cpu_.bytes());
  const std::vector<float> on_gpu = gpu_channels_last ? to_channels_last(values, shape) : values;
  gpu.copy_to_device(on_gpu.data(), gpu_.data(), gpu_.bytes());
}

Tensor Twin::gpu() const {
  Tensor t{static_cast<float*>(gpu_.data()), shape_};
  t.shape.channels_last = gpu_channels_last_;
  return t;
}

std::vector<float> Twin::cpu_values() const {
  std::vector<float> v(shape_.elements());
  cuda_test::cpu().copy_to_host(cpu_.data(), v.data(), v.size() * sizeof(float));
  return v;
}

std::vector<float> Twin::gpu_values() const {
  std::vector<float> v(shape_.elements());
  gpu_backend_->copy_to_host(gpu_.data(), v.data(), v.size() * sizeof(float));
  return gpu_channels_last_ ? from_channels_last(v, shape_) : v;
}

double Twin::relative_error() const { return cuda_test::relative_error(gpu_values(), cpu_values()); }

TwinLabels::TwinLabels(Backend& gpu, const std::vector<std::int32_t>& labels)
    : size_(labels.size()),
      cpu_(cuda_test::cpu(), labels.size() * sizeof(std::int32_t)),
      gpu_(gpu, labels.size() * sizeof(std::int32_t)) {
  cuda_test::cpu().copy_to_device(labels.data(), cpu_.data(), cpu_.bytes());
  gpu.copy_to_device(labels.data(), gpu_.data(), gpu_.bytes());
}

TwinScalars::TwinScalars(Backend& gpu, const StepScalars& values)
    : cpu_(cuda_test::cpu(), sizeof(StepScalars)), gpu_(gpu, sizeof(StepScalars)) {
  cuda_test::cpu().copy_to_device(&values, cpu_.data(), sizeof values);
  gpu.copy_to_device(&values, gpu_.data(), sizeof values);
}

Stored16 stored16(Backend& gpu, const Tensor& floats) {
  Stored16 s{DeviceBuffer(gpu, floats.elements() * 2), floats, Tensor{nullptr, floats.shape}};
  gpu.to_16bit(floats, s.bits.data(), value_format(gpu.precision()));
  s.beside.packed16 = s.alone.packed16 = s.bits.data();
  return s;
}

std::vector<std::uint16_t> bits_on_host(Backend& gpu, const Stored16& stored) {
  std::vector<std::uint16_t> out(stored.alone.elements());
  gpu.copy_to_host(stored.bits.data(), out.data(), out.size() * 2);
  return out;
}

}  // namespace cnn::cuda_test
