// The grouped convolution's vector kernels (cpu_grouped_conv.cpp says how they work), compiled
// for AVX2 with FMA (8-float vectors) and for AVX-512 (16) (Note [Kernels for each instruction
// set], isa_region.hpp). Included by cpu_grouped_conv.cpp.

namespace cnn::cpu::CNN_ISA::grouped {
namespace {

#if CNN_ISA_LEVEL >= 2
using Vec = __m512;
constexpr int kLanes = 16;
inline Vec vzero() { return _mm512_setzero_ps(); }
inline Vec vload(const float* p) { return _mm512_loadu_ps(p); }
inline void vstore(float* p, Vec v) { _mm512_storeu_ps(p, v); }
inline Vec vset(float f) { return _mm512_set1_ps(f); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline Vec vadd(Vec a, Vec b) { return _mm512_add_ps(a, b); }
inline float vsum(Vec v) { return _mm512_reduce_add_ps(v); }
// Keeps a loaded vector in its register: left alone, the compiler folds the load into every
// multiply-add that reads it, one (mostly unaligned) load per multiply-add instead of one.
inline Vec held(Vec v) {
  asm("" : "+v"(v));
  return v;
}
// Register blocks (24 accumulators): output rows x vectors of wide pixels, taller where a group
// has the rows; backward-filter's weight rows x taps.
constexpr int kTallRows = 8, kTallVecs = 3, kShortRows = 4, kShortVecs = 6;
constexpr int kFilterRows = 4, kFilterTaps = 6;
#else
using Vec = __m256;
constexpr int kLanes = 8;
inline Vec vzero() { return _mm256_setzero_ps(); }
inline Vec vload(const float* p) { return _mm256_loadu_ps(p); }
inline void vstore(float* p, Vec v) { _mm256_storeu_ps(p, v); }
inline Vec vset(float f) { return _mm256_set1_ps(f); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline Vec vadd(Vec a, Vec b) { return _mm256_add_ps(a, b); }
inline float vsum(Vec v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
inline Vec held(Vec v) {
  asm("" : "+x"(v));
  return v;
}
constexpr int kTallRows = 4, kTallVecs = 3, kShortRows = 2, kShortVecs = 6;
constexpr int kFilterRows = 3, kFilterTaps = 4;
#endif
constexpr int kTileFloats = std::max(kTallRows * kTallVecs, kShortRows * kShortVecs) * kLanes;
// Images whose planes backward-filter lays side by side: one horizontal sum per weight per batch.
constexpr int kFilterImages = 2;

std::size_t up(std::size_t n, std::size_t m) { return (n + m - 1) / m; }

// A stride-1 convolution of `src` (per group `in` planes h x w, padded by ph and pw) into `out`
// (per group `rows` planes oh x ow): the forward pass over x, or backward-data's over dy.
struct Implicit {
  int groups, in, rows, h, w, ph, pw, oh, ow, kh, kw, dilation;
  int wp() const { return w + 2 * pw; }
  std::size_t plane() const { return static_cast<std::size_t>(h + 2 * ph) * static_cast<std::size_t>(wp()); }
  std::size_t wide() const { return static_cast<std::size_t>(oh) * static_cast<std::size_t>(wp()); }
  std::size_t src_plane() const { return static_cast<std::size_t>(h) * static_cast<std::size_t>(w); }
  std::size_t out_plane() const { return static_cast<std::size_t>(oh) * static_cast<std::size_t>(ow); }
  int taps() const { return kh * kw; }
  std::size_t reach() const {  // the furthest tap's offset
    return static_cast<std::size_t>((kh - 1) * dilation) * static_cast<std::size_t>(wp()) +
           static_cast<std::size_t>((kw - 1) * dilation);
  }
};

Implicit forward_geometry(const Conv2dDesc& d, const Shape& x, const Shape& y) {
  const int dil = std::max(d.dilation, 1);
  return {d.groups, x[1] / d.groups, y[1] / d.groups, x[2], x[3], d.padding, d.padding, y[2], y[3],
          d.kernel_h, d.kernel_w, dil};
}

// dx is the stride-1 convolution of dy padded by dilation x (kernel - 1) - padding.
Implicit adjoint_geometry(const Conv2dDesc& d, const Shape& x, const Shape& y) {
  const int dil = std::max(d.dilation, 1);
  return {d.groups, y[1] / d.groups, x[1] / d.groups, y[2], y[3], (d.kernel_h - 1) * dil - d.padding,
          (d.kernel_w - 1) * dil - d.padding, x[2], x[3], d.kernel_h, d.kernel_w, dil};
}

struct Block {
  int rows, vecs;
  int chunk() const { return vecs * kLanes; }
};
Block block_for(const Implicit& g) {
  return g.rows >= kTallRows ? Block{kTallRows, kTallVecs} : Block{kShortRows, kShortVecs};
}
std::size_t row_blocks(const Implicit& g, Block b) { return up(static_cast<std::size_t>(g.rows), static_cast<std::size_t>(b.rows)); }
std::size_t chunks(const Implicit& g, Block b) { return up(g.wide(), static_cast<std::size_t>(b.chunk())); }

// Packed weights: per group and block of rows, [in][tap][rows of the block], rows past the
// group's zero.
std::size_t packed_floats(const Implicit& g) {
  const Block b = block_for(g);
  return aligned_floats(static_cast<std::size_t>(g.groups) * row_blocks(g, b) * static_cast<std::size_t>(b.rows) *
                        static_cast<std::size_t>(g.in) * static_cast<std::size_t>(g.taps()));
}

// One range's padded planes: `in` of them, with the slack the last chunk's taps read past them.
std::size_t slot_floats(const Implicit& g) {
  const Block b = block_for(g);
  const std::size_t read = chunks(g, b) * static_cast<std::size_t>(b.chunk()) + g.reach();
  return aligned_floats(static_cast<std::size_t>(g.in - 1) * g.plane() + std::max(g.plane(), read));
}

std::size_t implicit_floats(const Implicit& g, std::size_t n, int threads) {
  const auto slots = static_cast<std::size_t>(range_threads(threads, n * static_cast<std::size_t>(g.groups)));
  return packed_floats(g) + slots * slot_floats(g);
}

// `value(group, row, in, tap)` into the packed layout.
template <class Value>
void pack(const Implicit& g, float* packed, Value value) {
  const Block b = block_for(g);
  const std::size_t blocks = row_blocks(g, b);
  for (int gi = 0; gi < g.groups; ++gi)
    for (std::size_t rb = 0; rb < blocks; ++rb)
      for (int c = 0; c < g.in; ++c)
        for (int t = 0; t < g.taps(); ++t)
          for (int r = 0; r < b.rows; ++r) {
            const int row = static_cast<int>(rb) * b.rows + r;
            *packed++ = row < g.rows ? value(gi, row, c, t) : 0.f;
          }
}

// `channels` planes of src (h x w each, `src_plane` apart) into zero-padded planes `stride` apart.
void pad_planes(const Implicit& g, const float* src, float* dst, std::size_t stride) {
  const std::size_t wp = static_cast<std::size_t>(g.wp()), top = static_cast<std::size_t>(g.ph) * wp;
  for (int c = 0; c < g.in; ++c) {
    float* p = dst + static_cast<std::size_t>(c) * stride;
    const float* s = src + static_cast<std::size_t>(c) * g.src_plane();
    std::fill(p, p + top, 0.f);
    for (int r = 0; r < g.h; ++r) {
      float* row = p + top + static_cast<std::size_t>(r) * wp;
      std::fill(row, row + g.pw, 0.f);
      std::copy(s + static_cast<std::size_t>(r) * g.w, s + static_cast<std::size_t>(r + 1) * g.w, row + g.pw);
      std::fill(row + g.pw + g.w, row + wp, 0.f);
    }
    std::fill(p + top + static_cast<std::size_t>(g.h) * wp, p + g.plane(), 0.f);
  }
}

// One block of Rows outputs over Vecs * kLanes wide pixels from `src` (already at the first):
// every sum in the order channel, tap.
template <int Rows, int Vecs>
void implicit_tile(const Implicit& g, const float* src, const float* packed, float* tile) {
  Vec acc[Rows][Vecs];
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < Vecs; ++v) acc[r][v] = vzero();
  const std::size_t row_step = static_cast<std::size_t>(g.dilation) * static_cast<std::size_t>(g.wp());
  for (int c = 0; c < g.in; ++c, src += g.plane())
    for (int ki = 0; ki < g.kh; ++ki) {
      const float* line = src + static_cast<std::size_t>(ki) * row_step;
      for (int kj = 0; kj < g.kw; ++kj, packed += Rows) {
        const float* p = line + kj * g.dilation;
        Vec x[Vecs];
#pragma GCC unroll 8
        for (int v = 0; v < Vecs; ++v) x[v] = held(vload(p + v * kLanes));
#pragma GCC unroll 8
        for (int r = 0; r < Rows; ++r) {
          const Vec wv = vset(packed[r]);
#pragma GCC unroll 8
          for (int v = 0; v < Vecs; ++v) acc[r][v] = vfma(wv, x[v], acc[r][v]);
        }
      }
    }
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < Vecs; ++v) vstore(tile + (r * Vecs + v) * kLanes, acc[r][v]);
}

// Rows [0, count) of a tile (wide pixels from q0) into `out` (planes out_plane() apart): the
// pixels inside the output's width, added to what is there when accumulating, then the bias.
void store_tile(const Implicit& g, Block b, std::size_t q0, const float* tile, int count, float* out,
                const float* bias, bool accumulate) {
  const std::size_t wp = static_cast<std::size_t>(g.wp()), ow = static_cast<std::size_t>(g.ow);
  const std::size_t end = std::min(q0 + static_cast<std::size_t>(b.chunk()), g.wide());
  for (std::size_t q = q0; q < end;) {
    const std::size_t row = q / wp, col = q % wp, n = std::min(end - q, wp - col);
    if (col < ow) {
      const std::size_t valid = std::min(n, ow - col);
      for (int r = 0; r < count; ++r) {
        float* o = out + static_cast<std::size_t>(r) * g.out_plane() + row * ow + col;
        const float* s = tile + static_cast<std::size_t>(r) * static_cast<std::size_t>(b.chunk()) + (q - q0);
        if (accumulate)
          for (std::size_t j = 0; j < valid; ++j) o[j] += s[j];
        else
          std::copy(s, s + valid, o);
        if (bias)
          for (std::size_t j = 0; j < valid; ++j) o[j] += bias[r];
      }
    }
    q += n;
  }
}

// out = (or +=) the convolution of src (+ bias), (image, group) pairs spread over the ranges.
void run_implicit(int threads, const Implicit& g, std::size_t n, const float* src, const float* packed,
                  float* out, const float* bias, bool accumulate, float* scratch) {
  const Block b = block_for(g);
  const std::size_t slot = slot_floats(g), blocks = row_blocks(g, b), pieces = chunks(g, b);
  const std::size_t block_floats = static_cast<std::size_t>(b.rows) * static_cast<std::size_t>(g.in) *
                                   static_cast<std::size_t>(g.taps());
  const std::size_t groups = static_cast<std::size_t>(g.groups);
  const std::size_t in_floats = static_cast<std::size_t>(g.in) * g.src_plane();
  const std::size_t out_floats = static_cast<std::size_t>(g.rows) * g.out_plane();
  parallel_ranges(threads, n * groups, [&](int t, std::size_t begin, std::size_t end) {
    float* planes = scratch + static_cast<std::size_t>(t) * slot;
    std::fill(planes + static_cast<std::size_t>(g.in) * g.plane(), planes + slot, 0.f);  // the slack
    alignas(64) float tile[kTileFloats];
    for (std::size_t item = begin; item < end; ++item) {
      const std::size_t gi = item % groups;
      pad_planes(g, src + item * in_floats, planes, g.plane());  // (image, group) pairs are contiguous
      float* group_out = out + item * out_floats;
      const float* group_bias = bias ? bias + gi * static_cast<std::size_t>(g.rows) : nullptr;
      for (std::size_t piece = 0; piece < pieces; ++piece) {
        const std::size_t q0 = piece * static_cast<std::size_t>(b.chunk());
        for (std::size_t rb = 0; rb < blocks; ++rb) {
          const float* w = packed + (gi * blocks + rb) * block_floats;
          if (b.rows == kTallRows) implicit_tile<kTallRows, kTallVecs>(g, planes + q0, w, tile);
          else implicit_tile<kShortRows, kShortVecs>(g, planes + q0, w, tile);
          const int first = static_cast<int>(rb) * b.rows, count = std::min(b.rows, g.rows - first);
          store_tile(g, b, q0, tile, count, group_out + static_cast<std::size_t>(first) * g.out_plane(),
                     group_bias ? group_bias + first : nullptr, accumulate);
        }
      }
    }
  });
}

// Backward-filter: the forward geometry over batches of images laid side by side in each channel.
struct FilterPlan {
  Implicit g;
  std::size_t images;  // per batch
  std::size_t run;     // floats of a channel's batch of padded planes
  std::size_t lanes;   // the sums' length: run rounded up to whole vectors
  std::size_t per_group, chunk_rows;  // ranges of weight rows per group, and their most rows
  std::size_t x_floats() const {
    return aligned_floats(static_cast<std::size_t>(g.in - 1) * run + std::max(run, lanes + g.reach()));
  }
  std::size_t dy_floats() const { return chunk_rows * lanes; }
  std::size_t slot() const { return x_floats() + aligned_floats(dy_floats()); }
  std::size_t items() const { return static_cast<std::size_t>(g.groups) * per_group; }
};

FilterPlan filter_plan(const Conv2dDesc& d, const Shape& x, const Shape& y, int threads) {
  FilterPlan f;
  f.g = forward_geometry(d, x, y);
  f.images = static_cast<std::size_t>(std::clamp(x[0], 1, kFilterImages));
  f.run = f.images * f.g.plane();
  f.lanes = up(f.run, kLanes) * kLanes;
  const std::size_t blocks = up(static_cast<std::size_t>(f.g.rows), kFilterRows);
  f.per_group = std::min(blocks, up(static_cast<std::size_t>(std::max(threads, 1)), static_cast<std::size_t>(f.g.groups)));
  f.chunk_rows = std::min(up(blocks, f.per_group) * kFilterRows, static_cast<std::size_t>(f.g.rows));
  return f;
}

std::size_t filter_floats(const FilterPlan& f, int threads) {
  return static_cast<std::size_t>(range_threads(threads, f.items())) * f.slot();
}

// sums[r][j] = the sum of dy[r] * x[j] over `vectors` vectors: in kLanes fixed lanes, then a
// fixed horizontal sum.
template <int Rows, int Taps>
void filter_tile(const float* const* dy, const float* const* x, std::size_t vectors, float* sums) {
  Vec acc[Rows][Taps];
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < Taps; ++j) acc[r][j] = vzero();
  for (std::size_t q = 0; q < vectors * kLanes; q += kLanes) {
    Vec grad[Rows];
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) grad[r] = held(vload(dy[r] + q));
#pragma GCC unroll 8
    for (int j = 0; j < Taps; ++j) {
      const Vec xv = held(vload(x[j] + q));
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r) acc[r][j] = vfma(grad[r], xv, acc[r][j]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < Taps; ++j) sums[r * Taps + j] = vsum(acc[r][j]);
}

}  // namespace

std::size_t workspace_floats(const Conv2dDesc& d, const Shape& x, const Shape& y, ConvPass pass, int threads) {
  const auto n = static_cast<std::size_t>(std::max(x[0], 1));
  if (pass == ConvPass::forward) return implicit_floats(forward_geometry(d, x, y), n, threads);
  return std::max(implicit_floats(adjoint_geometry(d, x, y), n, threads), filter_floats(filter_plan(d, x, y, threads), threads));
}

void forward(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,
             bool accumulate, Workspace ws) {
  const Implicit g = forward_geometry(d, x.shape, y.shape);
  float* packed = static_cast<float*>(ws.data);
  const std::size_t in = static_cast<std::size_t>(g.in), taps = static_cast<std::size_t>(g.taps());
  pack(g, packed, [&](int gi, int row, int c, int t) {
    return w.data[((static_cast<std::size_t>(gi) * g.rows + row) * in + c) * taps + t];
  });
  run_implicit(threads, g, static_cast<std::size_t>(x.n()), x.data, packed, y.data, bias.empty() ? nullptr : bias.data,
               accumulate, packed + packed_floats(g));
}

void backward_data(int threads, const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor dx, bool accumulate,
                   Workspace ws) {
  const Implicit g = adjoint_geometry(d, dx.shape, dy.shape);
  float* packed = static_cast<float*>(ws.data);
  // w is [out][in / groups][kh][kw]: here the rows are dx's channels, `in` dy's.
  const std::size_t rows = static_cast<std::size_t>(g.rows), taps = static_cast<std::size_t>(g.taps());
  pack(g, packed, [&](int gi, int row, int c, int t) {
    const int turned = (g.kh - 1 - t / g.kw) * g.kw + (g.kw - 1 - t % g.kw);
    return w.data[((static_cast<std::size_t>(gi) * g.in + c) * rows + row) * taps + turned];
  });
  run_implicit(threads, g, static_cast<std::size_t>(dx.n()), dy.data, packed, dx.data, nullptr, accumulate,
               packed + packed_floats(g));
}

void backward_filter(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor dw, Tensor dbias,
                     Workspace ws) {
  const FilterPlan f = filter_plan(d, x.shape, dy.shape, threads);
  const Implicit& g = f.g;
  const std::size_t n = static_cast<std::size_t>(x.n());
  const std::size_t taps = static_cast<std::size_t>(g.taps()), K = static_cast<std::size_t>(g.in) * taps;
  const std::size_t rows = static_cast<std::size_t>(g.rows), blocks = up(rows, kFilterRows);
  const std::size_t x_sample = x.sample_elements(), dy_sample = dy.sample_elements();
  const std::size_t x_group = static_cast<std::size_t>(g.in) * g.src_plane(), dy_group = rows * g.out_plane();
  const std::size_t wp = static_cast<std::size_t>(g.wp()), vectors = f.lanes / kLanes;
  const std::size_t row_step = static_cast<std::size_t>(g.dilation) * wp;
  parallel_ranges(threads, f.items(), [&](int t, std::size_t begin, std::size_t end) {
    float* planes = static_cast<float*>(ws.data) + static_cast<std::size_t>(t) * f.slot();
    float* grads = planes + f.x_floats();
    float sums[kFilterRows * kFilterTaps];
    // The slack past the planes, and dy's dropped columns and rows, stay zero.
    std::fill(planes + static_cast<std::size_t>(g.in) * f.run, grads, 0.f);
    std::fill(grads, grads + f.dy_floats(), 0.f);
    const float* dy_rows[kFilterRows];
    const float* x_taps[kFilterTaps];
    for (std::size_t item = begin; item < end; ++item) {
      const std::size_t gi = item / f.per_group, part = item % f.per_group;
      const std::size_t r0 = blocks * part / f.per_group * kFilterRows;
      const std::size_t r1 = std::min(rows, blocks * (part + 1) / f.per_group * kFilterRows);
      for (std::size_t i0 = 0; i0 < n; i0 += f.images) {
        const std::size_t count = std::min(f.images, n - i0);
        for (std::size_t b = 0; b < count; ++b) {
          pad_planes(g, x.data + (i0 + b) * x_sample + gi * x_group, planes + b * g.plane(), f.run);
          for (std::size_t r = r0; r < r1; ++r) {
            const float* src = dy.data + (i0 + b) * dy_sample + gi * dy_group + r * g.out_plane();
            float* dst = grads + (r - r0) * f.lanes + b * g.plane();
            for (int oh = 0; oh < g.oh; ++oh)
              std::copy(src + static_cast<std::size_t>(oh) * g.ow, src + static_cast<std::size_t>(oh + 1) * g.ow,
                        dst + static_cast<std::size_t>(oh) * wp);
          }
        }
        for (std::size_t r = r0; r < r1 && count < f.images; ++r)  // a short last batch
          std::fill(grads + (r - r0) * f.lanes + count * g.plane(), grads + (r - r0) * f.lanes + f.run, 0.f);
        for (std::size_t rb = r0; rb < r1; rb += kFilterRows) {
          for (int r = 0; r < kFilterRows; ++r)
            dy_rows[r] = grads + (std::min(rb + static_cast<std::size_t>(r), r1 - 1) - r0) * f.lanes;
          const float* channel = planes;
          int ki = 0, kj = 0;
          for (std::size_t k0 = 0; k0 < K; k0 += kFilterTaps) {
            for (int j = 0; j < kFilterTaps; ++j) {  // taps in order; past the last, the last again
              x_taps[j] = channel + static_cast<std::size_t>(ki) * row_step + static_cast<std::size_t>(kj * g.dilation);
              if (k0 + static_cast<std::size_t>(j) + 1 >= K) continue;
              if (++kj == g.kw) {
                kj = 0;
                if (++ki == g.kh) ki = 0, channel += f.run;
              }
            }
            filter_tile<kFilterRows, kFilterTaps>(dy_rows, x_taps, vectors, sums);
            for (std::size_t r = rb; r < std::min(rb + kFilterRows, r1); ++r)
              for (std::size_t k = k0; k < std::min(k0 + kFilterTaps, K); ++k)
                dw.data[(gi * rows + r) * K + k] += sums[(r - rb) * kFilterTaps + (k - k0)];
          }
        }
        if (!dbias.empty())
          for (std::size_t r = r0; r < r1; ++r) {
            const float* row = grads + (r - r0) * f.lanes;
            Vec s = vzero();
            for (std::size_t v = 0; v < vectors; ++v) s = vadd(s, vload(row + v * kLanes));
            dbias.data[gi * rows + r] += vsum(s);
          }
      }
    }
  });
}

}  // namespace cnn::cpu::CNN_ISA::grouped
