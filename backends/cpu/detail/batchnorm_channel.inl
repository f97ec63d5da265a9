// BatchNorm's per-channel passes (batchnorm_channel.hpp says what each computes), compiled once per
// instruction set (Note [Kernels for each instruction set], isa_region.hpp): their loops are in
// double, two lanes to an SSE2 register and eight to an AVX-512 one. The lanes and their order
// are the same in every region, and the CPU backend is compiled without contractions into fused
// multiply-adds, so every region gives the same bits. Included by batchnorm_channel.cpp.

namespace cnn::cpu::CNN_ISA::batchnorm {

void normalise_channel(const Tensor& x, float gamma, float beta, float mean, float inv_std, std::size_t ch,
                       Tensor& y) {
  const float scale = gamma * inv_std;
  const float shift = beta - mean * scale;
  for_each_in_channel(x, ch, [&](std::size_t i) { y.data[i] = x.data[i] * scale + shift; });
}

ChannelMoments moments(const Tensor& x, std::size_t ch, double count) {
  const double mean = channel_sum(x, ch, [&](std::size_t i) { return x.data[i]; }) / count;
  const double squares = channel_sum(x, ch, [&](std::size_t i) { return (x.data[i] - mean) * (x.data[i] - mean); });
  return {mean, squares / count};
}

void input_gradient(const BatchNormGradient& g, std::size_t ch, double sum_dy, double sum_dy_xhat, double count) {
  const double mean = g.saved_mean.data[ch], inv_std = g.saved_inv_std.data[ch];
  const double scale = g.gamma.data[ch] * inv_std / count;
  for_each_in_channel(g.x, ch, [&](std::size_t i) {
    const double xhat = (g.x.data[i] - mean) * inv_std;
    const float d = static_cast<float>(scale * (count * g.dy.data[i] - sum_dy - xhat * sum_dy_xhat));
    if (g.accumulate) g.dx.data[i] += d;
    else g.dx.data[i] = d;
  });
}

ChannelGradientSums gradient_sums(const Tensor& x, const Tensor& dy, std::size_t ch, double mean, double inv_std) {
  ChannelGradientSums s{};
  channel_sums(
      x, ch, [&](std::size_t i) { return double(dy.data[i]); },
      [&](std::size_t i) { return dy.data[i] * (x.data[i] - mean) * inv_std; }, s.dy, s.dy_xhat);
  return s;
}

}  // namespace cnn::cpu::CNN_ISA::batchnorm
