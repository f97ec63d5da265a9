// BatchNorm's per-channel passes (batchnorm_channel.hpp says what each computes), compiled once per
// instruction set (Note [Kernels for each instruction set], isa_region.hpp): their loops are in
// double, two lanes to an SSE2 register and eight to an AVX-512 one. The lanes and their order
// are the same in every region, and the CPU backend is compiled without contractions into fused
// multiply-adds, so every region gives the same bits. Included by batchnorm_channel.cpp.

namespace cnn::cpu::CNN_ISA::batchnorm {

void normalise_channel(const Tensor& x, float gamma, float beta, float mean, float inv_std, std::size_t ch,
                       Tensor& y, bool relu, const Tensor* residual) {
  const float scale = gamma * inv_std;
  const float shift = beta - mean * scale;
  if (!relu) return for_each_in_channel(x, ch, [&](std::size_t i) { y.data[i] = x.data[i] * scale + shift; });
  if (residual != nullptr) {
    const float* r = residual->data;
    return for_each_in_channel(x, ch, [&](std::size_t i) {
      const float v = (x.data[i] * scale + shift) + r[i];
      y.data[i] = v > 0.f ? v : 0.f;
    });
  }
  for_each_in_channel(x, ch, [&](std::size_t i) {
    const float v = x.data[i] * scale + shift;
    y.data[i] = v > 0.f ? v : 0.f;
  });
}

ChannelMoments moments(const Tensor& x, std::size_t ch, double count) {
  const double mean = channel_sum(x, ch, [&](std::size_t i) { return x.data[i]; }, x.data) / count;
  const double squares = channel_sum(x, ch, [&](std::size_t i) { return (x.data[i] - mean) * (x.data[i] - mean); });
  return {mean, squares / count};
}

namespace {

// dy where the ReLU after the BatchNorm passed its input, +0 elsewhere (relu_backward's value);
// dy itself with no ReLU (relu_output a nullptr_t). The select as bits (dy's, or none), so that
// it vectorizes inside the unrolled lanes of channel_sums too, where a branch would not.
template <class ReluOutput>
[[gnu::always_inline]] inline float masked(const Tensor& dy, ReluOutput relu_output, std::size_t i) {
  const float g = dy.data[i];
  if constexpr (std::is_same_v<ReluOutput, std::nullptr_t>) {
    return g;
  } else {
    const std::uint32_t keep = relu_output->data[i] > 0.f ? ~std::uint32_t{0} : 0u;
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(g) & keep);
  }
}

}  // namespace

// What input_gradient does with the residual's gradient: nothing, write it, or add to it.
enum class Residual { none, write, add };

void input_gradient(const BatchNormGradient& g, std::size_t ch, double sum_dy, double sum_dy_xhat, double count) {
  const double mean = g.saved_mean.data[ch], inv_std = g.saved_inv_std.data[ch];
  const double scale = g.gamma.data[ch] * inv_std / count;
  float* residual_gradient = g.residual_gradient != nullptr ? g.residual_gradient->data : nullptr;
  auto each = [&](auto relu_output, auto accumulate, auto residual) {
    for_each_in_channel(g.x, ch, [&](std::size_t i) {
      const float dy = masked(g.dy, relu_output, i);
      if constexpr (residual() == Residual::write) residual_gradient[i] = dy;
      if constexpr (residual() == Residual::add) residual_gradient[i] += dy;
      const double xhat = (g.x.data[i] - mean) * inv_std;
      const float d = static_cast<float>(scale * (count * dy - sum_dy - xhat * sum_dy_xhat));
      if constexpr (accumulate) g.dx.data[i] += d;
      else g.dx.data[i] = d;
    });
  };
  using None = std::integral_constant<Residual, Residual::none>;
  using Write = std::integral_constant<Residual, Residual::write>;
  using Add = std::integral_constant<Residual, Residual::add>;
  const auto relu = [&](auto accumulate) {
    if (g.relu_output == nullptr) return each(nullptr, accumulate, None{});
    if (residual_gradient == nullptr) return each(g.relu_output, accumulate, None{});
    if (g.accumulate_residual) return each(g.relu_output, accumulate, Add{});
    each(g.relu_output, accumulate, Write{});
  };
  if (g.accumulate) relu(std::true_type{});
  else relu(std::false_type{});
}

ChannelGradientSums gradient_sums(const Tensor& x, const Tensor& dy, std::size_t ch, double mean, double inv_std,
                                  const Tensor* relu_output) {
  ChannelGradientSums s{};
  auto sums = [&](auto relu, auto... ahead) {
    channel_sums(
        x, ch, [&](std::size_t i) { return double(masked(dy, relu, i)); },
        [&](std::size_t i) { return masked(dy, relu, i) * (x.data[i] - mean) * inv_std; }, s.dy, s.dy_xhat,
        ahead...);
  };
  if (relu_output == nullptr) sums(nullptr, x.data, dy.data);
  else sums(relu_output, x.data, dy.data, relu_output->data);
  return s;
}

}  // namespace cnn::cpu::CNN_ISA::batchnorm
