#pragma once
// The words a program shares with the backend contract, without the contract itself: the kind of
// device and how it multiplies, how a step stores values, the activations and upsampling modes a
// layer is built with, a layer's workspace. cnnengine.hpp includes this; a layer of one's own,
// which calls the kernels, includes <cnnengine/engine/core/backend.hpp> as well.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cnn {

// The kernels a layer may call (engine/core/backend.hpp).
class Backend;
// A step's seed, first sample and gradient scale, in device memory (engine/core/backend.hpp).
struct StepScalars;

enum class DeviceKind { cpu, cuda };
inline std::string to_string(DeviceKind kind) { return kind == DeviceKind::cpu ? "cpu" : "cuda"; }

// How convolutions and dense layers multiply; parameters, optimizer state and every other call
// stay float32 whichever it is. fp32: float products. tf32 (CUDA): cuDNN and cuBLAS may round the
// operands to TF32 for the tensor cores. bf16 and fp16: the operands rounded to bfloat16 or IEEE
// half, the products summed in float (the CPU: backends/cpu/detail/gemm16.hpp; CUDA, which also
// rounds a convolution's result: Note [16-bit products on CUDA], backends/cuda/conv.cpp); fp16
// trains with loss scaling (engine/train/loss_scale.hpp). A training step in bf16 or fp16 also
// stores the values between layers in 16 bits (value_format below).
enum class Precision { fp32, tf32, bf16, fp16 };
std::string to_string(Precision precision);
// "fp32", "tf32", "bf16" or "fp16"; anything else is a ConfigError naming them.
Precision parse_precision(std::string_view word);

// How a step stores the values layers pass each other (docs/design.md, "16-bit values"): float32,
// or 16 bits that each layer reads and writes through float32 copies of its own time step.
enum class ValueFormat { fp32, bf16, fp16 };
// bf16 for Precision::bf16, fp16 for fp16, fp32 otherwise.
ValueFormat value_format(Precision precision);
std::string to_string(ValueFormat format);

// The element-wise activations besides ReLU (PyTorch's definitions): leaky_relu x < 0 ? slope x
// : x; relu6 min(max(x, 0), 6); sigmoid; tanh; silu x sigmoid(x); gelu the exact form,
// x (1 + erf(x / sqrt 2)) / 2; hardswish x relu6(x + 3) / 6; hardsigmoid relu6(x + 3) / 6.
enum class Activation { leaky_relu, relu6, sigmoid, tanh, silu, gelu, hardswish, hardsigmoid };

// The activation's name, as its layer's type name: "leaky_relu", "relu6", ...
inline const char* to_string(Activation kind) {
  switch (kind) {
    case Activation::leaky_relu: return "leaky_relu";
    case Activation::relu6: return "relu6";
    case Activation::sigmoid: return "sigmoid";
    case Activation::tanh: return "tanh";
    case Activation::silu: return "silu";
    case Activation::gelu: return "gelu";
    case Activation::hardswish: return "hardswish";
    case Activation::hardsigmoid: return "hardsigmoid";
  }
  return "activation";
}

// Upsampling by a whole factor, PyTorch's Upsample: nearest copies each pixel factor x factor
// times; bilinear interpolates with align_corners=False (pixel centres, edges clamped).
enum class UpsampleMode { nearest, bilinear };

enum class ConvPass { forward, backward };  // backward covers backward-data and backward-filter

struct Workspace {
  void* data = nullptr;
  std::size_t bytes = 0;
};

// A point in the work a backend has been given: Backend::reached says without waiting whether
// everything before it is done, Backend::wait waits for it. id 0: nothing to wait for.
struct Fence {
  std::uint64_t id = 0;
};

}  // namespace cnn
