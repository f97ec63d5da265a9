#pragma once
// What the CUDA tests share: the backends (the CPU one is the reference), device buffers, the
// same random values on both sides, and the error measure.
#include <cstddef>
#include <cstdint>
#include <vector>

#include <cnnengine/engine/core/backend.hpp>
#include "tests/channels_last_order.hpp"
#include "tests/relative_error.hpp"

namespace cnn::cuda_test {

Backend& cpu();        // CpuBackend(2)
Backend& gpu();        // fp32, algorithms measured
Backend& gpu_tf32();   // tf32 allowed
Backend& gpu_fast();   // fp32, algorithms by heuristics
// bf16 or fp16: convolutions and dense layers multiply 16-bit copies of their operands.
Backend& gpu_16bit(Precision precision);
// The same, taking channels-last images (CudaOptions::channels_last).
Backend& gpu_channels_last(Precision precision);
// fp32, measured deterministic algorithms only: for the tests that compare two GPU runs of the
// same shapes, which then differ only where the engine does.
Backend& gpu_deterministic();

// Device memory of one backend, returned when the buffer goes.
class DeviceBuffer {
 public:
  DeviceBuffer(Backend& backend, std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  Backend* backend_;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Uniform in [lo, hi), seeded: the same values every run.
std::vector<float> random_values(std::size_t n, std::uint64_t seed, float lo = -1.0f, float hi = 1.0f);
// tests/rounded16.hpp's rounding, which this header does not include: its cnn::cpu namespace would
// make the tests' cpu() ambiguous.
std::vector<float> rounded16(Precision precision, std::vector<float> values);

// One tensor on the reference and on a GPU backend holding the same values: on the GPU in NCHW
// order, or channels last (Note [Channels-last images]) where `gpu_channels_last`, its gpu()
// shape saying so. The reference's are NCHW.
class Twin {
 public:
  Twin(Backend& gpu, Shape shape, const std::vector<float>& values, bool gpu_channels_last = false);
  Twin(Backend& gpu, Shape shape, std::uint64_t seed, bool gpu_channels_last = false)
      : Twin(gpu, shape, random_values(shape.elements(), seed), gpu_channels_last) {}
  Tensor cpu() const { return {static_cast<float*>(cpu_.data()), shape_}; }
  Tensor gpu() const;
  std::vector<float> cpu_values() const;
  std::vector<float> gpu_values() const;  // synchronises the GPU backend; in NCHW order
  // max |gpu - cpu| / max |cpu|: the error relative to the tensor's scale.
  double relative_error() const;

 private:
  Backend* gpu_backend_;
  Shape shape_;
  bool gpu_channels_last_;
  DeviceBuffer cpu_, gpu_;
};

// Labels in [0, classes) on both sides.
class TwinLabels {
 public:
  TwinLabels(Backend& gpu, const std::vector<std::int32_t>& labels);
  IntTensor cpu() const { return {static_cast<std::int32_t*>(cpu_.data()), size_}; }
  IntTensor gpu() const { return {static_cast<std::int32_t*>(gpu_.data()), size_}; }

 private:
  std::size_t size_;
  DeviceBuffer cpu_, gpu_;
};

// One StepScalars on both sides (dropout's seed and first sample, the loss gradient's scale).
class TwinScalars {
 public:
  TwinScalars(Backend& gpu, const StepScalars& values);
  const StepScalars* cpu() const { return static_cast<const StepScalars*>(cpu_.data()); }
  const StepScalars* gpu() const { return static_cast<const StepScalars*>(gpu_.data()); }

 private:
  DeviceBuffer cpu_, gpu_;
};

// A tensor's values rounded to `gpu`'s 16-bit format on the device, as a step stores them, and the
// tensor seen with them (Tensor::packed16, Note [Values as they are stored] in backend.hpp):
// beside its floats, or alone.
struct Stored16 {
  DeviceBuffer bits;
  Tensor beside, alone;
};
Stored16 stored16(Backend& gpu, const Tensor& floats);
std::vector<std::uint16_t> bits_on_host(Backend& gpu, const Stored16& stored);

using cnn::testing::from_channels_last;
using cnn::testing::relative_error;
using cnn::testing::to_channels_last;

}  // namespace cnn::cuda_test
