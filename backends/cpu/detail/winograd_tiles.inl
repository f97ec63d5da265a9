// The Winograd convolution's tile transforms (winograd_tiles.hpp, Note [Winograd tiles]),
// compiled once per instruction set (Note [Kernels for each instruction set], isa_region.hpp).
// Each transform applies a matrix of constants down a tile's columns, then along its rows, as
// loops over a tile row's tiles; a constant's zero terms drop out at compile time and the rest
// are added in the order of the matrix's row, so every region gives the same bits. Included by
// cpu_winograd_conv.cpp.

namespace cnn::cpu::CNN_ISA::winograd {

using namespace cnn::cpu::winograd;

namespace {

// The coefficients a transform combines, row `r`'s term `l`: B^T's and A^T's rows, A^T's columns.
template <int M>
struct BTRows {
  static constexpr float at(int r, int l) { return Tiles<M>::BT[r][l]; }
};
template <int M>
struct ATRows {
  static constexpr float at(int r, int l) { return Tiles<M>::AT[r][l]; }
};
template <int M>
struct ATColumns {
  static constexpr float at(int r, int l) { return Tiles<M>::AT[l][r]; }
};

template <int N, class F>
[[gnu::always_inline]] inline void static_for(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) { (f.template operator()<I>(), ...); }(std::make_integer_sequence<int, N>{});
}

// sum + Coefficients::at(Row, L) * x, with no multiply for +-1 and nothing for 0: the same
// operations on a float or on a vector of them.
template <class Coefficients, int Row, int L, class Value>
[[gnu::always_inline]] inline Value add_term(Value sum, Value x) {
  constexpr float c = Coefficients::at(Row, L);
  if constexpr (c == 0.f) return sum;
  else if constexpr (c == 1.f) return sum + x;
  else if constexpr (c == -1.f) return sum - x;
  else return sum + c * x;
}

// The sum over l < N of Coefficients::at(Row, l) * load(l), from zero, in l's order (a recursion
// of always-inlined calls: GCC left a lambda's fold of it out of line in some copies).
template <class Coefficients, int Row, int N, class Value, int L = 0, class Load>
[[gnu::always_inline]] inline Value row_sum(Load&& load, Value sum = Value{}) {
  if constexpr (L == N) return sum;
  else return row_sum<Coefficients, Row, N, Value, L + 1>(load, add_term<Coefficients, Row, L>(sum, load(L)));
}

// out[t] = the sum over l of Coefficients::at(Row, l) * source[l][t], for t < n. A tile row is
// short (4 tiles of F(4x4) on 14 pixels, 28 of F(2x2) on 56): the AVX-512 region takes its last,
// partial vector with masked loads and stores, the AVX2 region with a 4-wide step, rather than
// value by value.
template <class Coefficients, int Row, int N>
[[gnu::always_inline]] inline void combine(const float* const (&source)[N], float* __restrict out, std::size_t n) {
  std::size_t t = 0;
#if CNN_ISA_LEVEL >= 2
  for (; t + 16 <= n; t += 16)
    _mm512_storeu_ps(out + t,
                     row_sum<Coefficients, Row, N, __m512>([&](int l) { return _mm512_loadu_ps(source[l] + t); }));
  if (t < n) {
    const auto lanes = static_cast<__mmask16>((1u << (n - t)) - 1);
    _mm512_mask_storeu_ps(out + t, lanes, row_sum<Coefficients, Row, N, __m512>([&](int l) {
                            return _mm512_maskz_loadu_ps(lanes, source[l] + t);
                          }));
  }
#elif CNN_ISA_LEVEL == 1  // not AVX's masked stores: microcoded on AMD's cores (vendors' tables; not measured here)
  for (; t + 8 <= n; t += 8)
    _mm256_storeu_ps(out + t,
                     row_sum<Coefficients, Row, N, __m256>([&](int l) { return _mm256_loadu_ps(source[l] + t); }));
  if (t + 4 <= n) {
    _mm_storeu_ps(out + t, row_sum<Coefficients, Row, N, __m128>([&](int l) { return _mm_loadu_ps(source[l] + t); }));
    t += 4;
  }
  for (; t < n; ++t) out[t] = row_sum<Coefficients, Row, N, float>([&](int l) { return source[l][t]; });
#else
  for (; t < n; ++t) out[t] = row_sum<Coefficients, Row, N, float>([&](int l) { return source[l][t]; });
#endif
}

// Row `row` of the plane split into its M phases: out[q * count + t] = plane[row][col0 + t M + q],
// zero outside the plane. Where a tile's M values lie inside, four tiles at a time are
// transposed (M = 4) or deinterleaved (M = 2) in SSE registers (the x86-64 baseline: every
// region has them).
template <int M>
void split_row(const TileRow& r, int row, float* out, std::size_t count) {
  static_assert(M == 2 || M == 4);
  if (row < 0 || row >= r.h) {
    std::fill(out, out + M * count, 0.f);
    return;
  }
  std::size_t lo = 0, hi = 0;  // the tiles whose M values all lie inside the row
  if (r.col0 + M <= r.w) {
    lo = r.col0 >= 0 ? 0 : static_cast<std::size_t>((-r.col0 + M - 1) / M);
    hi = std::min(count, static_cast<std::size_t>((r.w - r.col0) / M));
    lo = std::min(lo, hi);
  }
  const float* line = r.plane + static_cast<std::size_t>(row) * static_cast<std::size_t>(r.w);
  auto edge = [&](std::size_t t) {
    for (int q = 0; q < M; ++q) {
      const int col = r.col0 + static_cast<int>(t) * M + q;
      out[static_cast<std::size_t>(q) * count + t] = col >= 0 && col < r.w ? line[col] : 0.f;
    }
  };
  auto inside = [&](std::size_t t) { return line + (r.col0 + static_cast<std::ptrdiff_t>(t) * M); };  // t in [lo, hi)
  for (std::size_t t = 0; t < lo; ++t) edge(t);
  std::size_t t = lo;
  for (; t + 4 <= hi; t += 4) {
    const float* at = inside(t);
    if constexpr (M == 4) {
      __m128 a = _mm_loadu_ps(at), b = _mm_loadu_ps(at + 4), c = _mm_loadu_ps(at + 8), d = _mm_loadu_ps(at + 12);
      _MM_TRANSPOSE4_PS(a, b, c, d);
      _mm_storeu_ps(out + t, a);
      _mm_storeu_ps(out + count + t, b);
      _mm_storeu_ps(out + 2 * count + t, c);
      _mm_storeu_ps(out + 3 * count + t, d);
    } else {
      const __m128 a = _mm_loadu_ps(at), b = _mm_loadu_ps(at + 4);
      _mm_storeu_ps(out + t, _mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
      _mm_storeu_ps(out + count + t, _mm_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
    }
  }
  for (; t < hi; ++t)
    for (int q = 0; q < M; ++q) out[static_cast<std::size_t>(q) * count + t] = inside(t)[q];
  for (t = std::max(t, lo); t < count; ++t) edge(t);
}

// The inverse for an output row: to[t M + b] (+)= phases[b * n + t] (+ bias) for columns < cols,
// four tiles at a time in SSE registers where their values all lie inside.
template <int M>
void join_row(const float* phases, std::size_t n, float* to, int cols, bool accumulate, const float* bias) {
  static_assert(M == 2 || M == 4);
  const std::size_t whole = static_cast<std::size_t>(cols) / M;  // tiles whose values all lie inside
  const __m128 shift = _mm_set1_ps(bias != nullptr ? *bias : 0.f);
  auto put = [&](float* at, __m128 v) {
    __m128 sum = accumulate ? _mm_add_ps(_mm_loadu_ps(at), v) : v;
    if (bias != nullptr) sum = _mm_add_ps(sum, shift);
    _mm_storeu_ps(at, sum);
  };
  std::size_t t = 0;
  for (; t + 4 <= whole; t += 4) {
    if constexpr (M == 4) {
      __m128 v[4] = {_mm_loadu_ps(phases + t), _mm_loadu_ps(phases + n + t), _mm_loadu_ps(phases + 2 * n + t),
                     _mm_loadu_ps(phases + 3 * n + t)};
      _MM_TRANSPOSE4_PS(v[0], v[1], v[2], v[3]);
      for (int k = 0; k < 4; ++k) put(to + (t + static_cast<std::size_t>(k)) * 4, v[k]);
    } else {
      const __m128 even = _mm_loadu_ps(phases + t), odd = _mm_loadu_ps(phases + n + t);
      put(to + 2 * t, _mm_unpacklo_ps(even, odd));
      put(to + 2 * t + 4, _mm_unpackhi_ps(even, odd));
    }
  }
  for (std::size_t col = t * M; col < static_cast<std::size_t>(cols); ++col) {
    const float value = phases[col % M * n + col / M];
    float sum = accumulate ? to[col] + value : value;
    if (bias != nullptr) sum += *bias;
    to[col] = sum;
  }
}

// V = B^T d B of every tile of `rows` tile rows from r down (tile row j's tiles at v.data + j x
// r.tiles). The input rows are split into phases once: tile rows overlap by two rows.
template <int M>
void input_tiles(const TileRow& r, int rows, PointRows v, float* scratch) {
  constexpr int m = M, a = M + 2;
  const std::size_t count = static_cast<std::size_t>(r.tiles) + 1;  // the last tile reaches into one more phase
  const int split_rows = (rows - 1) * m + a;
  float* split = scratch;                                // [split_rows][m phases][count]
  float* down = scratch + split_rows * m * count;        // B^T applied down the columns: [a][m phases][count]
  for (int k = 0; k < split_rows; ++k) split_row<M>(r, r.row0 + k, split + k * m * count, count);
  for (int j = 0; j < rows; ++j) {
    const float* first = split + j * m * m * count;  // tile row j's first input row
    static_for<a>([&]<int I>() {  // a row's phases lie end to end: one loop over them all
      const float* source[a];
      for (int k = 0; k < a; ++k) source[k] = first + k * m * count;
      combine<BTRows<M>, I, a>(source, down + I * m * count, m * count);
    });
    float* out = v.data + static_cast<std::size_t>(j) * static_cast<std::size_t>(r.tiles);
    static_for<a>([&]<int I>() {
      const float* source[a];
      for (int l = 0; l < a; ++l) source[l] = down + (I * m + l % m) * count + l / m;
      static_for<a>([&]<int J>() {
        combine<BTRows<M>, J, a>(source, out + (I * a + J) * v.stride, static_cast<std::size_t>(r.tiles));
      });
    });
  }
}

// y = A^T M A of every tile of the row, into `out`.
template <int M>
void output_tiles(const float* points, std::size_t stride, int tiles, OutputRows out, float* scratch) {
  constexpr int m = M, a = M + 2;
  const auto n = static_cast<std::size_t>(tiles);
  float* down = scratch;                // A^T applied down the columns: [m][a][n]
  float* result = scratch + m * a * n;  // [m rows][m phases][n]
  static_for<m>([&]<int I>() {
    for (int j = 0; j < a; ++j) {
      const float* source[a];
      for (int i = 0; i < a; ++i) source[i] = points + (i * a + j) * stride;
      combine<ATRows<M>, I, a>(source, down + (I * a + j) * n, n);
    }
  });
  for (int row = 0; row < m; ++row) {
    const float* source[a];
    for (int j = 0; j < a; ++j) source[j] = down + (row * a + j) * n;
    static_for<m>([&]<int B>() { combine<ATRows<M>, B, a>(source, result + (row * m + B) * n, n); });
  }
  for (int row = 0; row < out.rows; ++row)
    join_row<M>(result + static_cast<std::size_t>(row) * m * n, n, out.data + static_cast<std::size_t>(row) * out.stride,
                out.cols, out.accumulate, out.bias);
}

}  // namespace

void forward_input_tiles(const TileRow& r, int rows, PointRows v, float* scratch) { input_tiles<4>(r, rows, v, scratch); }
void forward_output_tiles(const float* points, std::size_t stride, int tiles, OutputRows out, float* scratch) {
  output_tiles<4>(points, stride, tiles, out, scratch);
}
void accurate_input_tiles(const TileRow& r, int rows, PointRows v, float* scratch) { input_tiles<2>(r, rows, v, scratch); }
void accurate_output_tiles(const float* points, std::size_t stride, int tiles, OutputRows out, float* scratch) {
  output_tiles<2>(points, stride, tiles, out, scratch);
}

// dM = A dy A^T of every F(2x2) tile of the row (tile t: rows [row0, row0 + 2), columns from
// col0 + 2 t).
void accurate_gradient_tiles(const TileRow& r, PointRows dm, float* scratch) {
  constexpr int m = 2, a = 4;
  const auto n = static_cast<std::size_t>(r.tiles);
  float* split = scratch;             // [m rows][m phases][n]
  float* down = scratch + m * m * n;  // A applied down the columns: [a][m phases][n]
  for (int row = 0; row < m; ++row) split_row<2>(r, r.row0 + row, split + row * m * n, n);
  static_for<a>([&]<int I>() {  // a row's phases lie end to end: one loop over them all
    const float* source[m];
    for (int row = 0; row < m; ++row) source[row] = split + row * m * n;
    combine<ATColumns<2>, I, m>(source, down + I * m * n, m * n);
  });
  static_for<a>([&]<int I>() {
    const float* source[m];
    for (int q = 0; q < m; ++q) source[q] = down + (I * m + q) * n;
    static_for<a>([&]<int J>() { combine<ATColumns<2>, J, m>(source, dm.data + (I * a + J) * dm.stride, n); });
  });
}

}  // namespace cnn::cpu::CNN_ISA::winograd
