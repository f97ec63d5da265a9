// Depthwise convolution on the CPU (backends/cpu/detail/depthwise_conv.hpp): each (image, channel)
// plane on its own, planes spread over the work pool. An im2col product would be one row of a
// matrix per channel: all packing and no arithmetic. These loops read each plane once per kernel
// row and keep their inner loops over output columns, which the compiler vectorises; 3x3 kernels
// at stride 1 and 2 with padding 1 (MobileNet's) have fused loops over all nine taps. Planes of up
// to 112 x 112 go to the channel-blocked kernels instead (cpu_depthwise_blocked.cpp). Backward-data at
// stride 1 is the forward loop with the kernel turned around. Backward-filter sums each tap in 16
// fixed lanes: by channel (each range owns whole channels, images in order) where the channels
// are many and the tensors cache-sized, else by plane, each plane's sums added to its range's
// partials, the partials then added in range order: the same bits whichever thread runs a range.
#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <string>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/depthwise_conv.hpp"
#include "backends/cpu/detail/gemm.hpp"
#include "backends/cpu/detail/parallel.hpp"

namespace cnn::cpu {
namespace {

struct Plane {
  int h, w, hout, wout, kh, kw, stride, pad, dilation;
  int taps() const { return kh * kw; }
  std::size_t in() const { return static_cast<std::size_t>(h) * static_cast<std::size_t>(w); }
  std::size_t out() const { return static_cast<std::size_t>(hout) * static_cast<std::size_t>(wout); }
  int padded_w() const { return w + 2 * pad; }
  std::size_t padded() const { return static_cast<std::size_t>(h + 2 * pad) * static_cast<std::size_t>(padded_w()); }
  // Stride 1 computes whole padded rows: the output with the padded input's row length.
  std::size_t wide_out() const { return static_cast<std::size_t>(hout) * static_cast<std::size_t>(padded_w()); }
};

Plane plane_of(const Conv2dDesc& d, const Shape& x, const Shape& y) {
  return {x[2], x[3], y[2], y[3], d.kernel_h, d.kernel_w, d.stride, d.padding, std::max(d.dilation, 1)};
}

// The plane stride 1's backward-data runs forward: dy padded by dilation x (kernel - 1) -
// padding, into dx; false where that padding would be negative.
bool adjoint_of(const Plane& g, Plane& adjoint) {
  const int pad_h = g.dilation * (g.kh - 1) - g.pad, pad_w = g.dilation * (g.kw - 1) - g.pad;
  if (g.stride != 1 || pad_h != pad_w || pad_h < 0) return false;
  adjoint = Plane{g.hout, g.wout, g.h, g.w, g.kh, g.kw, 1, pad_h, g.dilation};
  return true;
}

// Copies a plane into the middle of its zero-padded copy (whose border is already zero).
void pad_plane(const Plane& g, const float* in, float* padded) {
  const int pw = g.padded_w();
  for (int r = 0; r < g.h; ++r)
    std::copy(in + static_cast<std::size_t>(r) * g.w, in + static_cast<std::size_t>(r + 1) * g.w,
              padded + static_cast<std::size_t>(r + g.pad) * pw + g.pad);
}

// out = (add ? out : 0) + bias + the convolution of one plane, read from its padded copy: no
// bounds to check. Stride 1 runs over the padded rows flat (one long loop however narrow the
// image: 7x7 planes are MobileNet's last), into `wide`, then keeps each row's first wout values.
void forward_padded(const Plane& g, const float* padded, const float* k, float bias, float* out, bool add,
                    float* wide) {
  const int pw = g.padded_w();
  if (g.stride == 1) {
    const std::size_t n = static_cast<std::size_t>(g.hout - 1) * pw + static_cast<std::size_t>(g.wout);
    if (g.kh == 3 && g.kw == 3) {
      const std::size_t d = static_cast<std::size_t>(g.dilation), row = d * static_cast<std::size_t>(pw);
      const float k0 = k[0], k1 = k[1], k2 = k[2], k3 = k[3], k4 = k[4], k5 = k[5], k6 = k[6], k7 = k[7], k8 = k[8];
      const float* r0 = padded;
      const float* r1 = padded + row;
      const float* r2 = padded + 2 * row;
      for (std::size_t o = 0; o < n; ++o) {
        float sum = bias;
        sum += k0 * r0[o] + k1 * r0[o + d] + k2 * r0[o + 2 * d];
        sum += k3 * r1[o] + k4 * r1[o + d] + k5 * r1[o + 2 * d];
        sum += k6 * r2[o] + k7 * r2[o + d] + k8 * r2[o + 2 * d];
        wide[o] = sum;
      }
    } else {
      std::fill(wide, wide + n, bias);
      for (int ki = 0; ki < g.kh; ++ki)
        for (int kj = 0; kj < g.kw; ++kj) {
          const float wv = k[ki * g.kw + kj];
          const float* src = padded + static_cast<std::size_t>(ki) * g.dilation * pw + static_cast<std::size_t>(kj) * g.dilation;
          for (std::size_t o = 0; o < n; ++o) wide[o] += wv * src[o];
        }
    }
    for (int oh = 0; oh < g.hout; ++oh) {
      const float* src = wide + static_cast<std::size_t>(oh) * pw;
      float* o = out + static_cast<std::size_t>(oh) * g.wout;
      if (add)
        for (int ow = 0; ow < g.wout; ++ow) o[ow] += src[ow];
      else
        std::copy(src, src + g.wout, o);
    }
    return;
  }
  const int s = g.stride, d = g.dilation;
  for (int oh = 0; oh < g.hout; ++oh) {
    float* o = out + static_cast<std::size_t>(oh) * g.wout;
    const float* top = padded + static_cast<std::size_t>(oh) * s * pw;
    if (g.kh == 3 && g.kw == 3) {
      const float* r0 = top;
      const float* r1 = top + static_cast<std::size_t>(d) * pw;
      const float* r2 = top + 2 * static_cast<std::size_t>(d) * pw;
      for (int ow = 0; ow < g.wout; ++ow) {
        const int c = ow * s;
        float sum = add ? o[ow] + bias : bias;
        sum += k[0] * r0[c] + k[1] * r0[c + d] + k[2] * r0[c + 2 * d];
        sum += k[3] * r1[c] + k[4] * r1[c + d] + k[5] * r1[c + 2 * d];
        sum += k[6] * r2[c] + k[7] * r2[c + d] + k[8] * r2[c + 2 * d];
        o[ow] = sum;
      }
      continue;
    }
    if (!add) std::fill(o, o + g.wout, bias);
    else if (bias != 0.f)
      for (int ow = 0; ow < g.wout; ++ow) o[ow] += bias;
    for (int ki = 0; ki < g.kh; ++ki)
      for (int kj = 0; kj < g.kw; ++kj) {
        const float wv = k[ki * g.kw + kj];
        const float* src = top + static_cast<std::size_t>(ki) * d * pw + kj * d;
        for (int ow = 0; ow < g.wout; ++ow) o[ow] += wv * src[ow * s];
      }
  }
}

constexpr int kMostTaps = 64;  // kernels up to 8x8 turned around on the stack; larger ones scatter

// dx (+)= backward-data of one plane. Stride 1: the forward loop on dy padded, with the kernel
// turned around (rows and columns reversed). Otherwise each output gradient is scattered to the
// taps that read it, in a padded scratch plane, whose middle is then written or added to dx.
void backward_data_plane(const Plane& g, const float* dy, const float* k, float* dx, bool accumulate, float* scratch) {
  Plane adjoint{};
  if (g.taps() <= kMostTaps && adjoint_of(g, adjoint)) {
    std::array<float, kMostTaps> flipped;
    for (int t = 0; t < g.taps(); ++t) flipped[static_cast<std::size_t>(t)] = k[g.taps() - 1 - t];
    float* padded = scratch;
    std::fill(padded, padded + adjoint.padded(), 0.f);
    pad_plane(adjoint, dy, padded);
    return forward_padded(adjoint, padded, flipped.data(), 0.f, dx, accumulate, padded + adjoint.padded());
  }
  const int pw = g.padded_w(), s = g.stride, d = g.dilation;
  float* padded = scratch;
  std::fill(padded, padded + g.padded(), 0.f);
  for (int oh = 0; oh < g.hout; ++oh) {
    const float* src = dy + static_cast<std::size_t>(oh) * g.wout;
    float* top = padded + static_cast<std::size_t>(oh) * s * pw;
    for (int ki = 0; ki < g.kh; ++ki)
      for (int kj = 0; kj < g.kw; ++kj) {
        const float wv = k[ki * g.kw + kj];
        float* dst = top + static_cast<std::size_t>(ki) * d * pw + kj * d;
        for (int ow = 0; ow < g.wout; ++ow) dst[ow * s] += wv * src[ow];
      }
  }
  for (int r = 0; r < g.h; ++r) {
    const float* src = padded + static_cast<std::size_t>(r + g.pad) * pw + g.pad;
    float* o = dx + static_cast<std::size_t>(r) * g.w;
    if (accumulate)
      for (int c = 0; c < g.w; ++c) o[c] += src[c];
    else
      std::copy(src, src + g.w, o);
  }
}

constexpr int kLanes = 16;

// lanes[l] += a[i] * b[i * stride] for i = l mod 16: independent sums the compiler vectorises
// without reordering any of them.
void dot_lanes(const float* a, const float* b, std::size_t n, int stride, float* lanes) {
  std::array<float, kLanes> acc;  // local: no aliasing with a or b, kept in a register
  std::copy(lanes, lanes + kLanes, acc.begin());
  std::size_t i = 0;
  if (stride == 1) {
    for (; i + kLanes <= n; i += kLanes)
      for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  } else {
    const auto s = static_cast<std::size_t>(stride);
    for (; i + kLanes <= n; i += kLanes)
      for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[(i + l) * s];
  }
  for (std::size_t l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i * static_cast<std::size_t>(stride)];
  std::copy(acc.begin(), acc.end(), lanes);
}

float lanes_sum(const float* lanes) {
  float sum = 0.f;
  for (int l = 0; l < kLanes; ++l) sum += lanes[l];
  return sum;
}

// sums[t] (+)= lanes_sum(lanes + 16 t) for t < count: the same sums, vectorised across t.
void lanes_sums(const float* lanes, std::size_t count, float* sums, bool add) {
  std::array<float, kMostTaps + 1> acc{};
  for (std::size_t first = 0; first < count; first += acc.size()) {
    const std::size_t m = std::min(acc.size(), count - first);
    std::fill(acc.begin(), acc.begin() + m, 0.f);
    for (int l = 0; l < kLanes; ++l)
      for (std::size_t t = 0; t < m; ++t) acc[t] += lanes[(first + t) * kLanes + l];
    for (std::size_t t = 0; t < m; ++t) sums[first + t] = add ? sums[first + t] + acc[t] : acc[t];
  }
}

// lanes[t * 16 + l] += tap t's products of one plane, from x's padded copy. Stride 1: dy laid
// out with the padded row length (`wide`, its extra columns zero) so that each tap is one long
// dot product.
void filter_plane(const Plane& g, const float* padded, const float* dy, float* lanes, float* wide) {
  const int pw = g.padded_w();
  if (g.stride == 1) {
    for (int oh = 0; oh < g.hout; ++oh)
      std::copy(dy + static_cast<std::size_t>(oh) * g.wout, dy + static_cast<std::size_t>(oh + 1) * g.wout,
                wide + static_cast<std::size_t>(oh) * pw);
    const std::size_t n = static_cast<std::size_t>(g.hout - 1) * pw + static_cast<std::size_t>(g.wout);
    for (int t = 0; t < g.taps(); ++t) {
      const int ki = t / g.kw, kj = t % g.kw;
      dot_lanes(wide, padded + static_cast<std::size_t>(ki) * g.dilation * pw + kj * g.dilation, n, 1,
                lanes + static_cast<std::size_t>(t) * kLanes);
    }
    return;
  }
  // Short rows: the sums on the stack for the whole plane (where they fit) rather than in and out
  // of `lanes` for each row.
  std::array<float, kMostTaps * kLanes> local;
  const std::size_t floats = static_cast<std::size_t>(g.taps()) * kLanes;
  const bool on_stack = g.taps() <= kMostTaps;
  float* sums = on_stack ? local.data() : lanes;
  if (on_stack) std::copy(lanes, lanes + floats, local.begin());
  for (int oh = 0; oh < g.hout; ++oh) {
    const float* d = dy + static_cast<std::size_t>(oh) * g.wout;
    const float* top = padded + static_cast<std::size_t>(oh) * g.stride * pw;
    for (int t = 0; t < g.taps(); ++t) {
      const int ki = t / g.kw, kj = t % g.kw;
      dot_lanes(d, top + static_cast<std::size_t>(ki) * g.dilation * pw + kj * g.dilation,
                static_cast<std::size_t>(g.wout), g.stride, sums + static_cast<std::size_t>(t) * kLanes);
    }
  }
  if (on_stack) std::copy(local.begin(), local.begin() + static_cast<std::ptrdiff_t>(floats), lanes);
}

void sum_lanes(const float* dy, std::size_t n, float* lanes) {
  std::array<float, kLanes> acc;
  std::copy(lanes, lanes + kLanes, acc.begin());
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += dy[i + static_cast<std::size_t>(l)];
  for (std::size_t l = 0; i < n; ++i, ++l) acc[l] += dy[i];
  std::copy(acc.begin(), acc.end(), lanes);
}

// One channel's lanes: taps x 16 for the weights, 16 for the bias.
std::size_t lane_floats(const Plane& g) { return aligned_floats(static_cast<std::size_t>(g.taps() + 1) * kLanes); }

// Backward-filter by channel keeps the lanes of this many channels at once.
constexpr std::size_t kChannelBlock = 16;

// A range's partials (backward-filter over planes): C x taps weight sums, then C bias sums.
std::size_t partial_floats(const Conv2dDesc& d) {
  return aligned_floats(static_cast<std::size_t>(d.out_channels) *
                        (static_cast<std::size_t>(d.kernel_h) * static_cast<std::size_t>(d.kernel_w) + 1));
}



// One thread's scratch planes, in floats: forward's padded input and wide output; backward's the
// most that backward-data and backward-filter take.
std::size_t scratch_floats(const Plane& g, ConvPass pass) {
  const std::size_t forward = aligned_floats(g.padded() + g.wide_out());
  if (pass == ConvPass::forward) return forward;
  Plane adjoint{};
  const std::size_t data = g.taps() <= kMostTaps && adjoint_of(g, adjoint)
                               ? adjoint.padded() + adjoint.wide_out()
                               : g.padded();
  return aligned_floats(std::max(data, forward));
}

std::size_t plane_count(const Shape& x) { return static_cast<std::size_t>(x[0]) * static_cast<std::size_t>(x[1]); }

Plane plane_for(const Conv2dDesc& d, const Shape& x) {
  // The output's size from the input's (PyTorch's formula), for the workspace query.
  const int reach_h = std::max(d.dilation, 1) * (d.kernel_h - 1) + 1, reach_w = std::max(d.dilation, 1) * (d.kernel_w - 1) + 1;
  const Shape y{x[0], x[1], (x[2] + 2 * d.padding - reach_h) / d.stride + 1, (x[3] + 2 * d.padding - reach_w) / d.stride + 1};
  return plane_of(d, x, y);
}

// Backward-filter gives each range whole channels (all their images: no partials to add, no
// sums per plane) where there are enough channels to share out and x and dy stay in cache (it
// reads the planes out of order); otherwise ranges of planes, with partials.
constexpr std::size_t kByChannelMostBytes = std::size_t{16} << 20;

bool filter_by_channel(const Conv2dDesc& d, const Plane& g, const Shape& x, int threads) {
  const std::size_t bytes = plane_count(x) * (g.in() + g.out()) * sizeof(float);
  return d.out_channels >= 4 * std::max(threads, 1) && bytes <= kByChannelMostBytes;
}

// One range's floats of workspace.
std::size_t share_floats(const Conv2dDesc& d, const Plane& g, const Shape& x, ConvPass pass, int threads) {
  if (pass == ConvPass::forward) return scratch_floats(g, pass);
  return scratch_floats(g, pass) +
         (filter_by_channel(d, g, x, threads) ? kChannelBlock * lane_floats(g) : lane_floats(g) + partial_floats(d));
}

void require(const Workspace& ws, std::size_t floats, const char* what) {
  if (ws.bytes < floats * sizeof(float))
    throw std::logic_error(std::string(what) + " (depthwise): workspace of " + std::to_string(ws.bytes) + " bytes, " +
                           std::to_string(floats * sizeof(float)) + " needed");
}

}  // namespace

std::size_t depthwise_workspace_floats(const Conv2dDesc& d, const Shape& x, ConvPass pass, int threads) {
  if (depthwise_blocked(d, x)) return depthwise_blocked_floats(d, x, pass, threads);
  const Plane g = plane_for(d, x);
  return static_cast<std::size_t>(range_threads(threads, plane_count(x))) * share_floats(d, g, x, pass, threads);
}

void depthwise_forward(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,
                       bool accumulate, Workspace ws) {
  const Plane g = plane_of(d, x.shape, y.shape);
  const int C = x.c();
  const std::size_t share = share_floats(d, g, x.shape, ConvPass::forward, threads);
  require(ws, depthwise_workspace_floats(d, x.shape, ConvPass::forward, threads), "conv2d_forward");
  if (depthwise_blocked(d, x.shape)) return depthwise_blocked_forward(threads, d, x, w, bias, y, accumulate, ws);
  parallel_ranges(threads, plane_count(x.shape), [&](int t, std::size_t b, std::size_t e) {
    float* padded = static_cast<float*>(ws.data) + static_cast<std::size_t>(t) * share;
    std::fill(padded, padded + g.padded(), 0.f);  // the border stays zero
    for (std::size_t i = b; i < e; ++i) {
      const int c = static_cast<int>(i % static_cast<std::size_t>(C));
      pad_plane(g, x.data + i * g.in(), padded);
      forward_padded(g, padded, w.data + static_cast<std::size_t>(c) * g.taps(), bias.empty() ? 0.f : bias.data[c],
                     y.data + i * g.out(), accumulate, padded + g.padded());
    }
  });
}

void depthwise_backward_data(int threads, const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor dx,
                             bool accumulate, Workspace ws) {
  const Plane g = plane_of(d, dx.shape, dy.shape);
  const int C = dx.c();
  const std::size_t share = share_floats(d, g, dx.shape, ConvPass::backward, threads);
  require(ws, depthwise_workspace_floats(d, dx.shape, ConvPass::backward, threads), "conv2d_backward_data");
  if (depthwise_blocked(d, dx.shape)) return depthwise_blocked_backward_data(threads, d, dy, w, dx, accumulate, ws);
  parallel_ranges(threads, plane_count(dx.shape), [&](int t, std::size_t b, std::size_t e) {
    float* scratch = static_cast<float*>(ws.data) + static_cast<std::size_t>(t) * share;
    for (std::size_t i = b; i < e; ++i) {
      const int c = static_cast<int>(i % static_cast<std::size_t>(C));
      backward_data_plane(g, dy.data + i * g.out(), w.data + static_cast<std::size_t>(c) * g.taps(), dx.data + i * g.in(),
                          accumulate, scratch);
    }
  });
}

void depthwise_backward_filter(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor dw,
                               Tensor dbias, Workspace ws) {
  const Plane g = plane_of(d, x.shape, dy.shape);
  const int C = x.c();
  const std::size_t N = static_cast<std::size_t>(x.n()), channels = static_cast<std::size_t>(C);
  const std::size_t taps = static_cast<std::size_t>(g.taps());
  const std::size_t scratch = scratch_floats(g, ConvPass::backward), share = share_floats(d, g, x.shape, ConvPass::backward, threads);
  require(ws, depthwise_workspace_floats(d, x.shape, ConvPass::backward, threads), "conv2d_backward_filter");
  if (depthwise_blocked(d, x.shape)) return depthwise_blocked_backward_filter(threads, d, x, dy, dw, dbias, ws);
  float* shares = static_cast<float*>(ws.data);
  // Per range: its scratch (set up), then, for each plane i, its products added to `lanes`.
  auto setup = [&](float* own) {
    std::fill(own, own + g.padded() + g.wide_out(), 0.f);  // borders and wide columns stay zero
  };
  auto add_plane = [&](float* own, std::size_t i, float* lanes) {
    const float* dp = dy.data + i * g.out();
    pad_plane(g, x.data + i * g.in(), own);
    filter_plane(g, own, dp, lanes, own + g.padded());
    if (!dbias.empty()) sum_lanes(dp, g.out(), lanes + taps * kLanes);
  };
  const std::size_t lanes_size = lane_floats(g);
  if (filter_by_channel(d, g, x.shape, threads)) {
    // Each channel's sums in image order: the same bits for any thread count. A range walks the
    // images a block of its channels at a time (consecutive planes: memory read in order), each
    // channel of the block with its own lanes.
    parallel_ranges(threads, channels, [&](int t, std::size_t b, std::size_t e) {
      float* own = shares + static_cast<std::size_t>(t) * share;
      float* lanes = own + scratch;
      setup(own);
      for (std::size_t first = b; first < e; first += kChannelBlock) {
        const std::size_t last = std::min(e, first + kChannelBlock);
        std::fill(lanes, lanes + (last - first) * lanes_size, 0.f);
        for (std::size_t n = 0; n < N; ++n)
          for (std::size_t c = first; c < last; ++c) add_plane(own, n * channels + c, lanes + (c - first) * lanes_size);
        for (std::size_t c = first; c < last; ++c) {
          const float* own_lanes = lanes + (c - first) * lanes_size;
          lanes_sums(own_lanes, taps, dw.data + c * taps, true);
          if (!dbias.empty()) dbias.data[c] += lanes_sum(own_lanes + taps * kLanes);
        }
      }
    });
    return;
  }
  const int used = parallel_ranges(threads, plane_count(x.shape), [&](int t, std::size_t b, std::size_t e) {
    float* own = shares + static_cast<std::size_t>(t) * share;
    float* lanes = own + scratch;
    float* partial = lanes + lanes_size;
    setup(own);
    std::fill(partial, partial + channels * (taps + 1), 0.f);
    for (std::size_t i = b; i < e; ++i) {
      const auto c = i % channels;
      std::fill(lanes, lanes + lanes_size, 0.f);
      add_plane(own, i, lanes);
      lanes_sums(lanes, taps, partial + c * taps, true);
      if (!dbias.empty()) partial[channels * taps + c] += lanes_sum(lanes + taps * kLanes);
    }
  });
  const std::size_t weight_floats = channels * taps;
  for (std::size_t j = 0; j < weight_floats + channels; ++j) {
    float sum = 0.f;
    for (int t = 0; t < used; ++t) sum += shares[static_cast<std::size_t>(t) * share + scratch + lanes_size + j];
    if (j < weight_floats) dw.data[j] += sum;
    else if (!dbias.empty()) dbias.data[j - weight_floats] += sum;
  }
}

}  // namespace cnn::cpu
