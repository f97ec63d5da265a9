// The blocked depthwise kernels (cpu_depthwise_blocked.cpp says how they work), compiled once per
// instruction set they use (Note [Kernels for each instruction set], isa_region.hpp): a 16-float
// value is one AVX-512 register, two AVX2 ones, four SSE ones. Included by
// cpu_depthwise_blocked.cpp after the geometry every region shares.

namespace cnn::cpu::CNN_ISA::depthwise {
namespace {

// 16 floats in one value: one AVX-512 register, two AVX ones elsewhere. These functions never
// cross a library boundary, so the calling convention GCC warns of (-Wpsabi) does not matter.
#pragma GCC diagnostic ignored "-Wpsabi"
using Vec = float __attribute__((vector_size(64)));

Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
void store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }

#if CNN_ISA_LEVEL >= 2
// r[i][j] <- r[j][i].
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
  }
  for (int h = 0; h < 16; h += 8)
    for (int i = 0; i < 4; ++i) {
      t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
      t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xdd);
    }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
  }
}
#endif

// Channels [0, lanes) of one image (h x w planes, one after the other from `planes`) into the
// middle of a block (rows of `pw` pixels, `pad` either side and above); lanes past `lanes` are
// zeroed, the border is left as it is. `next`: the next block's planes, fetched into L2 as this
// one is read: the hardware's prefetchers follow 16 short planes read abreast poorly (without
// this, 64x576x14x14 ran at half speed).
void pack(const float* planes, int lanes, int h, int w, int pad, int pw, float* block, const float* next = nullptr) {
  const std::size_t size = static_cast<std::size_t>(h) * static_cast<std::size_t>(w);
  Walk walk{w, pad, pw};
#if CNN_ISA_LEVEL >= 2
  __m512 r[16];
  for (std::size_t p0 = 0; p0 < size; p0 += 16) {
    const std::size_t count = std::min<std::size_t>(16, size - p0);
    const __mmask16 mask = static_cast<__mmask16>((1u << count) - 1);
    if (next)
      for (int l = 0; l < 16; ++l) __builtin_prefetch(next + static_cast<std::size_t>(l) * size + p0, 0, 2);
    for (int l = 0; l < 16; ++l)
      r[l] = l < lanes ? _mm512_maskz_loadu_ps(mask, planes + static_cast<std::size_t>(l) * size + p0) : _mm512_setzero_ps();
    transpose16(r);
    for (std::size_t j = 0; j < count; ++j, walk.next()) _mm512_storeu_ps(block + walk.at(), r[j]);
  }
#else
  (void)next;  // the prefetchers follow the plain loops' order
  for (std::size_t p = 0; p < size; ++p, walk.next()) {
    float* o = block + walk.at();
    for (int l = 0; l < kBlock; ++l) o[l] = l < lanes ? planes[static_cast<std::size_t>(l) * size + p] : 0.f;
  }
#endif
}

// The reverse: the middle of a block to channels [0, lanes) of one image's planes (+= where
// `add`), fetching `next` (the next block's planes) likewise.
void unpack(const float* block, int lanes, int h, int w, int pad, int pw, float* planes, bool add,
            float* next = nullptr) {
  const std::size_t size = static_cast<std::size_t>(h) * static_cast<std::size_t>(w);
  Walk walk{w, pad, pw};
#if CNN_ISA_LEVEL >= 2
  __m512 r[16];
  for (std::size_t p0 = 0; p0 < size; p0 += 16) {
    const std::size_t count = std::min<std::size_t>(16, size - p0);
    const __mmask16 mask = static_cast<__mmask16>((1u << count) - 1);
    for (std::size_t j = 0; j < 16; ++j) {
      r[j] = j < count ? _mm512_loadu_ps(block + walk.at()) : _mm512_setzero_ps();
      if (j < count) walk.next();
    }
    transpose16(r);
    if (next)
      for (int l = 0; l < 16; ++l) __builtin_prefetch(next + static_cast<std::size_t>(l) * size + p0, 1, 2);
    for (int l = 0; l < lanes; ++l) {
      float* o = planes + static_cast<std::size_t>(l) * size + p0;
      _mm512_mask_storeu_ps(o, mask, add ? _mm512_add_ps(_mm512_maskz_loadu_ps(mask, o), r[l]) : r[l]);
    }
  }
#else
  (void)next;
  for (std::size_t p = 0; p < size; ++p, walk.next()) {
    const float* src = block + walk.at();
    for (int l = 0; l < lanes; ++l) {
      float& o = planes[static_cast<std::size_t>(l) * size + p];
      o = add ? o + src[l] : src[l];
    }
  }
#endif
}

// Per tap, its 16 channels' weights (turned around where `flip`), and the tap's offset in the
// padded block.
struct Taps {
  std::array<Vec, kMostTaps> weight;
  std::array<std::ptrdiff_t, kMostTaps> offset;
};

void load_taps(const Geometry& g, const float* w, int c0, int lanes, bool flip, Taps& t) {
  const int taps = g.taps();
  for (int k = 0; k < taps; ++k) {
    Vec v{};
    for (int l = 0; l < lanes; ++l) v[l] = w[static_cast<std::size_t>(c0 + l) * taps + (flip ? taps - 1 - k : k)];
    t.weight[static_cast<std::size_t>(k)] = v;
    const int ki = k / g.kw, kj = k % g.kw;
    t.offset[static_cast<std::size_t>(k)] =
        (static_cast<std::ptrdiff_t>(ki) * g.dilation * g.padded_w() + static_cast<std::ptrdiff_t>(kj) * g.dilation) * kBlock;
  }
}

// out[o] = bias + the taps' products, for every output pixel o, from the padded block. Taps: 9
// (fixed: the weights stay in registers) or 0 (as many as the geometry says).
template <int Fixed>
void forward_block(const Geometry& g, const float* padded, const Taps& t, Vec bias, float* out) {
  const int taps = Fixed ? Fixed : g.taps();
  const std::size_t row = static_cast<std::size_t>(g.stride) * static_cast<std::size_t>(g.padded_w()) * kBlock;
  const std::size_t step = static_cast<std::size_t>(g.stride) * kBlock;
  std::array<Vec, Fixed ? Fixed : kMostTaps> local;  // 3x3: in registers
  if constexpr (Fixed != 0) std::copy(t.weight.begin(), t.weight.begin() + Fixed, local.begin());
  const Vec* weight = Fixed ? local.data() : t.weight.data();
  for (int oh = 0; oh < g.hout; ++oh) {
    const float* top = padded + static_cast<std::size_t>(oh) * row;
    float* o = out + static_cast<std::size_t>(oh) * static_cast<std::size_t>(g.wout) * kBlock;
    for (int ow = 0; ow < g.wout; ++ow) {
      const float* at = top + static_cast<std::size_t>(ow) * step;
      Vec sum = bias;
      for (int k = 0; k < taps; ++k)
        sum += weight[k] * load(at + t.offset[static_cast<std::size_t>(k)]);
      store(o + static_cast<std::size_t>(ow) * kBlock, sum);
    }
  }
}

void forward_any(const Geometry& g, const float* padded, const Taps& t, Vec bias, float* out) {
  if (g.taps() == 9) forward_block<9>(g, padded, t, bias, out);
  else forward_block<0>(g, padded, t, bias, out);
}

// padded[o's taps] += weight * dy[o] for every output pixel o (the padded block zeroed first).
void scatter_block(const Geometry& g, const float* dy, const Taps& t, float* padded) {
  const std::size_t row = static_cast<std::size_t>(g.stride) * static_cast<std::size_t>(g.padded_w()) * kBlock;
  const std::size_t step = static_cast<std::size_t>(g.stride) * kBlock;
  const int taps = g.taps();
  for (int oh = 0; oh < g.hout; ++oh) {
    float* top = padded + static_cast<std::size_t>(oh) * row;
    const float* src = dy + static_cast<std::size_t>(oh) * static_cast<std::size_t>(g.wout) * kBlock;
    for (int ow = 0; ow < g.wout; ++ow) {
      float* at = top + static_cast<std::size_t>(ow) * step;
      const Vec v = load(src + static_cast<std::size_t>(ow) * kBlock);
      for (int k = 0; k < taps; ++k) {
        float* p = at + t.offset[static_cast<std::size_t>(k)];
        store(p, load(p) + t.weight[static_cast<std::size_t>(k)] * v);
      }
    }
  }
}

// sums[k] += dy[o] * x at o's tap k, sums[taps] += dy[o], pixels in order.
template <int Fixed>
void filter_block(const Geometry& g, const float* padded, const float* dy, const Taps& t, Vec* sums) {
  const int taps = Fixed ? Fixed : g.taps();
  const std::size_t row = static_cast<std::size_t>(g.stride) * static_cast<std::size_t>(g.padded_w()) * kBlock;
  const std::size_t step = static_cast<std::size_t>(g.stride) * kBlock;
  std::array<Vec, (Fixed ? Fixed : kMostTaps) + 1> acc;
  for (int k = 0; k <= taps; ++k) acc[static_cast<std::size_t>(k)] = sums[k];
  for (int oh = 0; oh < g.hout; ++oh) {
    const float* top = padded + static_cast<std::size_t>(oh) * row;
    const float* src = dy + static_cast<std::size_t>(oh) * static_cast<std::size_t>(g.wout) * kBlock;
    for (int ow = 0; ow < g.wout; ++ow) {
      const float* at = top + static_cast<std::size_t>(ow) * step;
      const Vec v = load(src + static_cast<std::size_t>(ow) * kBlock);
      for (int k = 0; k < taps; ++k) acc[static_cast<std::size_t>(k)] += v * load(at + t.offset[static_cast<std::size_t>(k)]);
      acc[static_cast<std::size_t>(taps)] += v;
    }
  }
  for (int k = 0; k <= taps; ++k) sums[k] = acc[static_cast<std::size_t>(k)];
}

Vec bias_of(const Tensor& bias, int c0, int lanes) {
  Vec v{};
  if (!bias.empty())
    for (int l = 0; l < lanes; ++l) v[l] = bias.data[c0 + l];
  return v;
}

// Items [b, e) of (image, block) of the convolution `conv` from src (planes conv.in() apart) into
// dst (planes conv.out() apart), added where `accumulate`: forward, and backward-data gathered as
// the forward of the adjoint convolution (taps turned around, no bias). `padded`: the range's
// scratch, the padded block then the output block.
void convolve_blocks(const Geometry& conv, const float* w, bool turned, const Tensor& bias, const float* src,
                     float* dst, bool accumulate, int C, std::size_t blocks, std::size_t b, std::size_t e,
                     float* padded) {
  float* out = padded + conv.padded() * kBlock;
  std::fill(padded, padded + conv.padded() * kBlock, 0.f);  // the border stays zero
  Taps t;
  for (std::size_t i = b; i < e; ++i) {
    const std::size_t n = i / blocks;
    const int c0 = static_cast<int>(i % blocks) * kBlock, lanes = std::min(kBlock, C - c0);
    load_taps(conv, w, c0, lanes, turned, t);
    const std::size_t first = n * static_cast<std::size_t>(C) + static_cast<std::size_t>(c0);
    const bool more = i + 1 < e;
    pack(src + first * conv.in(), lanes, conv.h, conv.w, conv.pad, conv.padded_w(), padded,
         more ? src + (first + static_cast<std::size_t>(lanes)) * conv.in() : nullptr);
    forward_any(conv, padded, t, bias_of(bias, c0, lanes), out);
    unpack(out, lanes, conv.hout, conv.wout, 0, conv.wout, dst + first * conv.out(), accumulate,
           more ? dst + (first + static_cast<std::size_t>(lanes)) * conv.out() : nullptr);
  }
}

}  // namespace

void forward(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y, bool accumulate, Workspace ws) {
  const Geometry g = geometry(d, x.shape);
  const std::size_t blocks = block_count(x.shape), share = block_floats(g, ConvPass::forward);
  parallel_ranges(threads, static_cast<std::size_t>(x.n()) * blocks, [&](int r, std::size_t b, std::size_t e) {
    convolve_blocks(g, w.data, false, bias, x.data, y.data, accumulate, x.c(), blocks, b, e,
                    static_cast<float*>(ws.data) + static_cast<std::size_t>(r) * share);
  });
}

void backward_data(int threads, const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor dx,
                   bool accumulate, Workspace ws) {
  const Geometry g = geometry(d, dx.shape);
  const int C = dx.c();
  const std::size_t blocks = block_count(dx.shape), share = block_floats(g, ConvPass::backward);
  Geometry adjoint{};
  const bool gather = adjoint_of(g, adjoint);
  parallel_ranges(threads, static_cast<std::size_t>(dx.n()) * blocks, [&](int r, std::size_t b, std::size_t e) {
    float* padded = static_cast<float*>(ws.data) + static_cast<std::size_t>(r) * share;
    if (gather)
      return convolve_blocks(adjoint, w.data, true, Tensor{}, dy.data, dx.data, accumulate, C, blocks, b, e, padded);
    Taps t;
    float* dyb = padded + g.padded() * kBlock;
    for (std::size_t i = b; i < e; ++i) {
      const std::size_t n = i / blocks;
      const int c0 = static_cast<int>(i % blocks) * kBlock, lanes = std::min(kBlock, C - c0);
      load_taps(g, w.data, c0, lanes, false, t);
      const std::size_t first = n * static_cast<std::size_t>(C) + static_cast<std::size_t>(c0);
      const bool more = i + 1 < e;
      pack(dy.data + first * g.out(), lanes, g.hout, g.wout, 0, g.wout, dyb,
           more ? dy.data + (first + static_cast<std::size_t>(lanes)) * g.out() : nullptr);
      std::fill(padded, padded + g.padded() * kBlock, 0.f);
      scatter_block(g, dyb, t, padded);
      unpack(padded, lanes, g.h, g.w, g.pad, g.padded_w(), dx.data + first * g.in(), accumulate,
             more ? dx.data + (first + static_cast<std::size_t>(lanes)) * g.in() : nullptr);
    }
  });
}

void backward_filter(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor dw,
                     Tensor dbias, Workspace ws) {
  const Geometry g = geometry(d, x.shape);
  const int C = x.c(), taps = g.taps();
  const std::size_t blocks = block_count(x.shape), share = block_floats(g, ConvPass::backward);
  const std::size_t N = static_cast<std::size_t>(x.n());
  parallel_ranges(threads, blocks, [&](int r, std::size_t b, std::size_t e) {
    float* padded = static_cast<float*>(ws.data) + static_cast<std::size_t>(r) * share;
    float* dyb = padded + g.padded() * kBlock;
    std::fill(padded, padded + g.padded() * kBlock, 0.f);
    Taps t;
    load_taps(g, dw.data, 0, 0, false, t);  // the offsets; the weights are not read
    for (std::size_t blk = b; blk < e; ++blk) {
      const int c0 = static_cast<int>(blk) * kBlock, lanes = std::min(kBlock, C - c0);
      std::array<Vec, kMostTaps + 1> sums{};
      for (std::size_t n = 0; n < N; ++n) {
        const std::size_t first = n * static_cast<std::size_t>(C) + static_cast<std::size_t>(c0);
        const bool more = n + 1 < N;
        pack(x.data + first * g.in(), lanes, g.h, g.w, g.pad, g.padded_w(), padded,
             more ? x.data + (first + static_cast<std::size_t>(C)) * g.in() : nullptr);
        pack(dy.data + first * g.out(), lanes, g.hout, g.wout, 0, g.wout, dyb,
             more ? dy.data + (first + static_cast<std::size_t>(C)) * g.out() : nullptr);
        if (taps == 9) filter_block<9>(g, padded, dyb, t, sums.data());
        else filter_block<0>(g, padded, dyb, t, sums.data());
      }
      for (int l = 0; l < lanes; ++l) {
        float* k = dw.data + static_cast<std::size_t>(c0 + l) * taps;
        for (int j = 0; j < taps; ++j) k[j] += sums[static_cast<std::size_t>(j)][l];
        if (!dbias.empty()) dbias.data[c0 + l] += sums[static_cast<std::size_t>(taps)][l];
      }
    }
  });
}

}  // namespace cnn::cpu::CNN_ISA::depthwise
