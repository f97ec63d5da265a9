// A bias per channel, added to [N, C, H, W] (or [N, C]) and its gradient: a transposed
// convolution's bias, which the convolution calls it is made of do not add. The gradient is summed
// per channel in 16 fixed lanes, images in order: the same bits on any thread count.
#include <array>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/parallel.hpp"

namespace cnn {

void CpuBackend::do_add_channel_bias(const Tensor& bias, Tensor y) {
  const std::size_t C = static_cast<std::size_t>(y.c());
  const std::size_t plane = static_cast<std::size_t>(y.h()) * static_cast<std::size_t>(y.w());
  const std::size_t planes = static_cast<std::size_t>(y.n()) * C;
  const int useful = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(threads_), y.elements() / (1 << 15) + 1));
  cpu::parallel_ranges(useful, planes, [&](int, std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      const float v = bias.data[i % C];
      float* p = y.data + i * plane;
      for (std::size_t j = 0; j < plane; ++j) p[j] += v;
    }
  });
}

void CpuBackend::do_channel_bias_backward(const Tensor& dy, Tensor dbias) {
  const std::size_t C = static_cast<std::size_t>(dy.c()), N = static_cast<std::size_t>(dy.n());
  const std::size_t plane = static_cast<std::size_t>(dy.h()) * static_cast<std::size_t>(dy.w());
  const int useful = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(threads_), dy.elements() / (1 << 15) + 1));
  // Channels over threads: each channel's sum is one thread's, in a fixed order.
  cpu::parallel_ranges(useful, C, [&](int, std::size_t b, std::size_t e) {
    constexpr std::size_t kLanes = 16;
    for (std::size_t c = b; c < e; ++c) {
      std::array<float, kLanes> lanes{};
      for (std::size_t n = 0; n < N; ++n) {
        const float* p = dy.data + (n * C + c) * plane;
        std::size_t j = 0;
        for (; j + kLanes <= plane; j += kLanes)
          for (std::size_t l = 0; l < kLanes; ++l) lanes[l] += p[j + l];
        for (std::size_t l = 0; j < plane; ++j, ++l) lanes[l] += p[j];
      }
      float sum = 0.f;
      for (float v : lanes) sum += v;
      dbias.data[c] += sum;
    }
  });
}

}  // namespace cnn
