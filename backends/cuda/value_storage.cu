// 16-bit values (Backend::to_16bit, from_16bit) and the 16-bit copies of a product's operands (Note
// [16-bit products on CUDA], conv.cpp), rounded as detail/values16.cuh rounds them, so that the
// CPU and CUDA backends store the same bits.
#include <cstddef>
#include <cstdint>

#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include "backends/cuda/detail/grid_stride.cuh"
#include "backends/cuda/detail/values16.cuh"
#include <cnnengine/base/error.hpp>

namespace cnn::cuda {
namespace {

// Note [Four values a thread]
// A conversion moves 6 bytes a value and computes next to nothing, so it runs at the memory's
// speed only with wide accesses: where the float side is 16-byte aligned and the 16-bit side
// 8-byte aligned (always so for the step's buffers and the operand copies), each thread moves four
// values at a time (one 16-byte and one 8-byte access) and the last n % 4 values one at a time.
// Elsewhere (a view that starts mid-buffer) every value goes one at a time. The bits are the same.
template <ValueFormat F>
__global__ void narrow_kernel(const float* x, std::uint16_t* y, std::size_t n, bool fours) {
  std::size_t done = 0;
  if (fours) {
    done = n / 4 * 4;
    CNN_FOR_EACH_ELEMENT(i, n / 4) {
      const float4 v = reinterpret_cast<const float4*>(x)[i];
      reinterpret_cast<ushort4*>(y)[i] = make_ushort4(narrowed<F>(v.x), narrowed<F>(v.y), narrowed<F>(v.z),
                                                      narrowed<F>(v.w));
    }
  }
  CNN_FOR_EACH_ELEMENT(i, n - done) y[done + i] = narrowed<F>(x[done + i]);
}

template <ValueFormat F>
__global__ void widen_kernel(const std::uint16_t* x, float* y, std::size_t n, bool accumulate, bool fours) {
  std::size_t done = 0;
  if (fours) {
    done = n / 4 * 4;
    CNN_FOR_EACH_ELEMENT(i, n / 4) {
      const ushort4 b = reinterpret_cast<const ushort4*>(x)[i];
      float4 v = make_float4(widened<F>(b.x), widened<F>(b.y), widened<F>(b.z), widened<F>(b.w));
      if (accumulate) {
        const float4 a = reinterpret_cast<const float4*>(y)[i];
        v = make_float4(a.x + v.x, a.y + v.y, a.z + v.z, a.w + v.w);
      }
      reinterpret_cast<float4*>(y)[i] = v;
    }
  }
  CNN_FOR_EACH_ELEMENT(i, n - done) {
    const float v = widened<F>(x[done + i]);
    y[done + i] = accumulate ? y[done + i] + v : v;
  }
}

// Note [Filters in channels-last order]
// A channels-last convolution's filter is cuDNN's NHWC filter, [out, kh, kw, in / groups], where
// the engine keeps every weight as [out, in / groups, kh, kw] (Note [Channels-last images],
// tensor.hpp). The 16-bit copy the convolution makes of its filter anyway (Note [16-bit products
// on CUDA], conv.cpp) is made in that order, and a weight gradient's 16-bit result is put back in
// the engine's order as it is widened into the float gradient. A filter is small next to the
// images (resnet50's largest, 2.4 million values), so one thread a value, gathering, is enough.
// [outer, c, plane] values (floats, or 16-bit values where the tensor has them) rounded into
// [outer, plane, c] 16-bit ones; thread i writes value i.
template <ValueFormat F>
__global__ void narrow_to_channels_last_kernel(ValuesIn x, std::uint16_t* y, std::size_t n, std::size_t c,
                                               std::size_t plane) {
  CNN_FOR_EACH_ELEMENT(i, n) {
    const std::size_t ch = i % c, rest = i / c;
    y[i] = narrowed<F>(x.at<F>((rest / plane * c + ch) * plane + rest % plane));
  }
}

// [outer, plane, c] 16-bit values widened into [outer, c, plane] floats, added to them where
// `accumulate`; thread i writes value i.
template <ValueFormat F>
__global__ void widen_from_channels_last_kernel(const std::uint16_t* x, float* y, std::size_t n, std::size_t c,
                                                std::size_t plane, bool accumulate) {
  CNN_FOR_EACH_ELEMENT(i, n) {
    const std::size_t p = i % plane, rest = i / plane;
    const float v = widened<F>(x[(rest / c * plane + p) * c + rest % c]);
    y[i] = accumulate ? y[i] + v : v;
  }
}

bool fours_fit(const void* wide, const void* packed) {
  return reinterpret_cast<std::uintptr_t>(wide) % 16 == 0 && reinterpret_cast<std::uintptr_t>(packed) % 8 == 0;
}

}  // namespace

void CudaBackend::narrow16(const float* x, void* packed, std::size_t n, ValueFormat format) {
  if (n == 0) return;
  const bool fours = fours_fit(x, packed);
  const unsigned blocks = blocks_for(fours ? (n + 3) / 4 : n);
  auto* y = static_cast<std::uint16_t*>(packed);
  if (format == ValueFormat::bf16) {
    narrow_kernel<ValueFormat::bf16><<<blocks, 256, 0, compute_>>>(x, y, n, fours);
    check_launch("narrow_kernel<bf16>");
  } else {
    narrow_kernel<ValueFormat::fp16><<<blocks, 256, 0, compute_>>>(x, y, n, fours);
    check_launch("narrow_kernel<fp16>");
  }
}

void CudaBackend::widen16(const void* packed, float* x, std::size_t n, ValueFormat format, bool accumulate) {
  if (n == 0) return;
  const bool fours = fours_fit(x, packed);
  const unsigned blocks = blocks_for(fours ? (n + 3) / 4 : n);
  const auto* bits = static_cast<const std::uint16_t*>(packed);
  if (format == ValueFormat::bf16) {
    widen_kernel<ValueFormat::bf16><<<blocks, 256, 0, compute_>>>(bits, x, n, accumulate, fours);
    check_launch("widen_kernel<bf16>");
  } else {
    widen_kernel<ValueFormat::fp16><<<blocks, 256, 0, compute_>>>(bits, x, n, accumulate, fours);
    check_launch("widen_kernel<fp16>");
  }
}

void CudaBackend::narrow16_to_channels_last(const Tensor& x, void* packed, std::size_t c, std::size_t plane,
                                            ValueFormat format) {
  const std::size_t n = x.elements();
  if (n == 0) return;
  with_format(format, [&](auto f) {
    narrow_to_channels_last_kernel<decltype(f)::value>
        <<<blocks_for(n), 256, 0, compute_>>>(values_in(x), static_cast<std::uint16_t*>(packed), n, c, plane);
  });
  check_launch("narrow_to_channels_last_kernel");
}

void CudaBackend::widen16_from_channels_last(const void* packed, float* x, std::size_t n, std::size_t c,
                                             std::size_t plane, ValueFormat format, bool accumulate) {
  if (n == 0) return;
  with_format(format, [&](auto f) {
    widen_from_channels_last_kernel<decltype(f)::value><<<blocks_for(n), 256, 0, compute_>>>(
        static_cast<const std::uint16_t*>(packed), x, n, c, plane, accumulate);
  });
  check_launch("widen_from_channels_last_kernel");
}

void CudaBackend::do_to_16bit(const Tensor& x, void* packed, ValueFormat format) {
  activate();
  const std::size_t n = x.elements();
  if (n == 0) return;
  narrow16(x.data, packed, n, format);
  touched(x, DeviceRange{packed, n * 2});
}

void CudaBackend::do_from_16bit(const void* packed, Tensor x, ValueFormat format) {
  activate();
  const std::size_t n = x.elements();
  if (n == 0) return;
  widen16(packed, x.data, n, format, false);
  touched(DeviceRange{packed, n * 2}, x);
}

}  // namespace cnn::cuda
