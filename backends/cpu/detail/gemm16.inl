// The 16-bit products' packing and kernels, compiled once per instruction set they use
// (Note [Kernels for each instruction set], isa_region.hpp): the portable region emulates the
// instructions, the avx512 region has fp16's, the avx512_bf16 region bf16's too, the avx512_amx
// region bf16's on AMX's tiles (Note [bf16 products on AMX]). Included by gemm16.cpp, after the
// helpers every region shares.

namespace cnn::cpu::CNN_ISA::products16 {
namespace {

template <ValueFormat F>
std::uint16_t to_16bit(float value) {
  if constexpr (F == ValueFormat::bf16)
    return to_bf16(value);
  else
    return to_fp16(value);
}
template <ValueFormat F>
float from_16bit(std::uint16_t bits) {
  if constexpr (F == ValueFormat::bf16)
    return from_bf16(bits);
  else
    return from_fp16(bits);
}

template <ValueFormat F>
std::uint32_t pair_of(float even, float odd) {
  return std::uint32_t{to_16bit<F>(even)} | (std::uint32_t{to_16bit<F>(odd)} << 16);
}

#if CNN_ISA_LEVEL >= 2
// 32 floats (lo: the first 16) as 32 16-bit values in order, i.e. 16 words of adjacent pairs.
// Native bf16 is instantiated only in the AVX512-BF16 and AMX regions (in_format).
template <ValueFormat F>
__m512i narrowed(__m512 lo, __m512 hi) {
  if constexpr (F == ValueFormat::bf16) {
#if CNN_ISA_LEVEL >= 3
    return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
#else
    static_assert(F != ValueFormat::bf16, "bf16 packing on AVX-512 needs AVX512-BF16");
#endif
  } else {
    constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtps_ph(lo, kNearest)), _mm512_cvtps_ph(hi, kNearest),
                              1);
  }
}
#endif

// dst[c] = the pair (even[c], odd[c]) for c < count; odd null: zeros.
template <ValueFormat F, bool Native>
void interleave_rows(const float* even, const float* odd, std::size_t count, std::uint32_t* dst) {
  std::size_t c = 0;
#if CNN_ISA_LEVEL >= 2
  if constexpr (Native) {
    // Word 2j of the result is word j of the converted pair of vectors (the even row), word
    // 2j + 1 word 16 + j (the odd row).
    alignas(64) static constexpr std::uint16_t kInterleave[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                                  21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                                  11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    const __m512i order = _mm512_load_si512(kInterleave);
    for (; c < count; c += 16) {
      const std::size_t left = count - c;
      const __mmask16 mask = left >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
      const __m512 lo = _mm512_maskz_loadu_ps(mask, even + c);
      const __m512 hi = odd ? _mm512_maskz_loadu_ps(mask, odd + c) : _mm512_setzero_ps();
      const __m512i words = _mm512_permutexvar_epi16(order, narrowed<F>(lo, hi));
      _mm512_mask_storeu_epi32(dst + c, mask, words);
    }
  }
#endif
  for (; c < count; ++c) dst[c] = pair_of<F>(even[c], odd ? odd[c] : 0.f);
}

#if CNN_ISA_LEVEL >= 2
// GCC 12's headers define the unmasked shuffles over a deliberately uninitialised vector.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
// r[i][j] <-> r[j][i]: 16 x 16 words. Pairs of rows interleave their words, then pairs of those
// their 64-bit halves (each 128-bit lane then holds a 4 x 4 block transposed), then the lanes move.
void transpose_16x16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    r[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i + 0], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i + 0], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  // Lane L of r[4i + j] holds rows 4i..4i+3 of column 4L + j.
  for (int j = 0; j < 4; ++j) {
    const __m512i low01 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0x44), low23 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0x44);
    const __m512i high01 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0xEE), high23 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0xEE);
    t[j] = _mm512_shuffle_i32x4(low01, low23, 0x88);
    t[4 + j] = _mm512_shuffle_i32x4(low01, low23, 0xDD);
    t[8 + j] = _mm512_shuffle_i32x4(high01, high23, 0x88);
    t[12 + j] = _mm512_shuffle_i32x4(high01, high23, 0xDD);
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}
#pragma GCC diagnostic pop
#endif

// dst[p * width + l] = the pair (line l's value 2p, value 2p + 1) of `count` lines whose values
// along k are adjacent (line l at x.data + (first + l) * x.stride + k0), for the pairs of `depth`
// values (an odd depth's last pair has a zero for its odd value).
template <ValueFormat F, bool Native>
void pairs_along_lines(const GemmOperand& x, std::size_t first, std::size_t count, std::size_t k0, std::size_t depth,
                       std::uint32_t* dst, std::size_t width) {
  const std::size_t pairs = pairs_of(depth);
#if CNN_ISA_LEVEL >= 2
  if constexpr (Native) {
    // 16 lines by 16 pairs at a time: each line's 32 values become 16 words, transposed.
    for (std::size_t l0 = 0; l0 < count; l0 += 16) {
      const std::size_t lines = std::min<std::size_t>(16, count - l0);
      const auto store = static_cast<__mmask16>((1u << lines) - 1);
      for (std::size_t p0 = 0; p0 < pairs; p0 += 16) {
        const std::size_t values = std::min<std::size_t>(32, depth - 2 * p0);
        const auto lo = static_cast<__mmask16>(values >= 16 ? 0xFFFFu : (1u << values) - 1);
        const auto hi = static_cast<__mmask16>(values >= 32 ? 0xFFFFu : values > 16 ? (1u << (values - 16)) - 1 : 0u);
        __m512i r[16];
        for (std::size_t i = 0; i < 16; ++i) {
          if (i >= lines) {
            r[i] = _mm512_setzero_si512();
            continue;
          }
          const float* line = x.data + (first + l0 + i) * x.stride + k0 + 2 * p0;
          r[i] = narrowed<F>(_mm512_maskz_loadu_ps(lo, line), _mm512_maskz_loadu_ps(hi, line + 16));
        }
        transpose_16x16(r);
        for (std::size_t j = 0; j < 16 && p0 + j < pairs; ++j) _mm512_mask_storeu_epi32(dst + (p0 + j) * width + l0, store, r[j]);
      }
    }
    return;
  }
#endif
  for (std::size_t l = 0; l < count; ++l) {
    const float* line = x.data + (first + l) * x.stride + k0;
    for (std::size_t p = 0; p < pairs; ++p)
      dst[p * width + l] = pair_of<F>(line[2 * p], 2 * p + 1 < depth ? line[2 * p + 1] : 0.f);
  }
}

// Whether products run on AMX's tiles: A's panels are then stored line by line ([panel][row][pairs]:
// a row's pairs adjacent, as the tiles load A) rather than pair by pair ([panel][pairs][row]), and
// the product is cut as kTileBlocking says (gemm16.cpp).
template <ValueFormat F, bool Native>
constexpr bool on_tiles() {
  return CNN_ISA_LEVEL >= 4 && Native && F == ValueFormat::bf16;
}
template <ValueFormat F, bool Native>
constexpr const Blocking& blocking() {
  if constexpr (on_tiles<F, Native>())
    return kTileBlocking;
  else
    return kVectorBlocking;
}

#if CNN_ISA_LEVEL >= 4
// One panel of `valid` lines (the rest of the panel's 16 zeros) stored line by line:
// dst[l * pairs + p].
template <ValueFormat F>
void pack_panel_by_line(const GemmOperand& x, bool along_k, std::size_t line0, std::size_t valid, std::size_t k0,
                        std::size_t depth, std::uint32_t* dst) {
  static_assert(kTileBlocking.rows == 16, "a panel is transposed as 16 x 16 words");
  const std::size_t pairs = pairs_of(depth);
  for (std::size_t p0 = 0; p0 < pairs; p0 += 16) {
    const auto words = static_cast<__mmask16>(pairs - p0 >= 16 ? 0xFFFFu : (1u << (pairs - p0)) - 1);
    if (along_k) {  // a line's 32 values narrowed in order are its 16 pairs
      const std::size_t values = std::min<std::size_t>(32, depth - 2 * p0);
      const auto lo = static_cast<__mmask16>(values >= 16 ? 0xFFFFu : (1u << values) - 1);
      const auto hi = static_cast<__mmask16>(values >= 32 ? 0xFFFFu : values > 16 ? (1u << (values - 16)) - 1 : 0u);
      for (std::size_t l = 0; l < valid; ++l) {
        const float* line = x.data + (line0 + l) * x.stride + k0 + 2 * p0;
        _mm512_mask_storeu_epi32(dst + l * pairs + p0, words,
                                 narrowed<F>(_mm512_maskz_loadu_ps(lo, line), _mm512_maskz_loadu_ps(hi, line + 16)));
      }
      continue;
    }
    // 16 pairs of the lines' values paired along k, then transposed: line l's pairs.
    alignas(64) std::uint32_t by_pair[16][16] = {};
    for (std::size_t j = 0; j < 16 && p0 + j < pairs; ++j) {
      const std::size_t p = p0 + j;
      const float* even = x.data + (k0 + 2 * p) * x.stride + line0;
      interleave_rows<F, true>(even, 2 * p + 1 < depth ? even + x.stride : nullptr, valid, by_pair[j]);
    }
    __m512i r[16];
    for (std::size_t j = 0; j < 16; ++j) r[j] = _mm512_load_si512(by_pair[j]);
    transpose_16x16(r);
    for (std::size_t l = 0; l < valid; ++l) _mm512_mask_storeu_epi32(dst + l * pairs + p0, words, r[l]);
  }
  std::fill(dst + valid * pairs, dst + 16 * pairs, 0u);
}
#endif

// One block of k, [k0, k0 + depth), of `lines` rows of A (from row i0) or columns of B (from
// column j0), in panels of `width` lines: [panel][pairs][width], or with `by_line` (A on the
// tiles) [panel][width][pairs]. Lines past `last` are zeros. `along_k` says the operand's values
// along k are adjacent in memory (A stored [m x k], B stored [n x k]); otherwise its lines are (A
// stored [k x m], B stored [k x n]).
template <ValueFormat F, bool Native>
void pack_block(const GemmOperand& x, bool along_k, [[maybe_unused]] bool by_line, std::size_t first,
                std::size_t lines, std::size_t last, std::size_t k0, std::size_t depth, std::size_t width,
                std::uint32_t* dst) {
  const std::size_t pairs = pairs_of(depth);
  for (std::size_t panel = 0; panel * width < lines; ++panel) {
    std::uint32_t* out = dst + panel * pairs * width;
    const std::size_t line0 = first + panel * width;
    const std::size_t valid = line0 < last ? std::min(width, last - line0) : 0;
#if CNN_ISA_LEVEL >= 4
    if (by_line) {
      pack_panel_by_line<F>(x, along_k, line0, valid, k0, depth, out);
      continue;
    }
#endif
    if (along_k) {
      pairs_along_lines<F, Native>(x, line0, valid, k0, depth, out, width);
      for (std::size_t p = 0; p < pairs; ++p) std::fill(out + p * width + valid, out + (p + 1) * width, 0u);
      continue;
    }
    for (std::size_t p = 0; p < pairs; ++p) {
      const float* even = x.data + (k0 + 2 * p) * x.stride + line0;
      const float* odd = 2 * p + 1 < depth ? even + x.stride : nullptr;
      interleave_rows<F, Native>(even, odd, valid, out + p * width);
      std::fill(out + p * width + valid, out + (p + 1) * width, 0u);
    }
  }
}

// A is along k when stored [m x k] (not transposed); B when stored [n x k] (transposed).
template <ValueFormat F, bool Native>
void pack_a_block(const GemmOperand& a, std::size_t i0, std::size_t rows, std::size_t m, std::size_t k0,
                  std::size_t depth, std::uint32_t* dst) {
  pack_block<F, Native>(a, !a.transposed, on_tiles<F, Native>(), i0, rows, m, k0, depth, blocking<F, Native>().rows,
                        dst);
}
// B's block, from its storage or made by its rows (b_rows.row set).
template <ValueFormat F, bool Native>
void pack_b_block(const GemmOperand& b, const RowsOf16& b_rows, std::size_t j0, std::size_t cols, std::size_t n,
                  std::size_t k0, std::size_t depth, std::uint32_t* dst) {
  if (!b_rows.row) return pack_block<F, Native>(b, b.transposed, false, j0, cols, n, k0, depth, kGemm16Cols, dst);
  // Made by rows: two rows of k at a time, then paired and narrowed panel by panel.
  constexpr std::size_t kMostCols = blocking<F, Native>().block_cols;
  alignas(64) float even[kMostCols], odd[kMostCols];
  const std::size_t pairs = pairs_of(depth);
  for (std::size_t p = 0; p < pairs; ++p) {
    const bool has_odd = 2 * p + 1 < depth;
    b_rows.row(b_rows.context, k0 + 2 * p, j0, cols, even);
    if (has_odd) b_rows.row(b_rows.context, k0 + 2 * p + 1, j0, cols, odd);
    for (std::size_t c = 0; c < cols; c += kGemm16Cols) {
      const std::size_t valid = std::min(kGemm16Cols, cols - c);
      std::uint32_t* out = dst + c / kGemm16Cols * pairs * kGemm16Cols + p * kGemm16Cols;
      interleave_rows<F, Native>(even + c, has_odd ? odd + c : nullptr, valid, out);
      std::fill(out + valid, out + kGemm16Cols, 0u);
    }
  }
}

// Where a tile of C goes: element (r, j) at c[r * ldc + j], or c[j * ldc + r] when C^T is
// what is stored (gemm16 computing C^T = B^T A^T).
struct TileOut {
  float* c;
  std::size_t ldc;
  bool transposed;
};

// Adds (or, overwrite, writes) tile [rows x cols] to `out`, transposed.
void store_transposed(const float (&tile)[kGemm16Rows][kGemm16Cols], TileOut out, std::size_t rows, std::size_t cols,
                      bool overwrite) {
  for (std::size_t j = 0; j < cols; ++j) {
    float* column = out.c + j * out.ldc;
    for (std::size_t r = 0; r < rows; ++r) column[r] = overwrite ? tile[r][j] : column[r] + tile[r][j];
  }
}

// c[rows x cols] (+)= a panel x b panel over `pairs` (rows <= kGemm16Rows, cols <= kGemm16Cols), in
// plain C++ (Note [One 16-bit product on every host]).
template <ValueFormat F>
void kernel_emulated(const std::uint32_t* a, const std::uint32_t* b, std::size_t pairs, TileOut out, std::size_t rows,
                     std::size_t cols, bool overwrite) {
  float acc[kGemm16Rows][kGemm16Cols] = {};
  float b_even[kGemm16Cols], b_odd[kGemm16Cols];
  for (std::size_t p = 0; p < pairs; ++p) {
    for (std::size_t j = 0; j < kGemm16Cols; ++j) {
      const std::uint32_t word = b[p * kGemm16Cols + j];
      b_even[j] = from_16bit<F>(static_cast<std::uint16_t>(word));
      b_odd[j] = from_16bit<F>(static_cast<std::uint16_t>(word >> 16));
    }
    for (std::size_t r = 0; r < kGemm16Rows; ++r) {
      const std::uint32_t word = a[p * kGemm16Rows + r];
      const float a_even = from_16bit<F>(static_cast<std::uint16_t>(word));
      const float a_odd = from_16bit<F>(static_cast<std::uint16_t>(word >> 16));
      for (std::size_t j = 0; j < kGemm16Cols; ++j) acc[r][j] += a_odd * b_odd[j];
      for (std::size_t j = 0; j < kGemm16Cols; ++j) acc[r][j] += a_even * b_even[j];
    }
  }
  if (out.transposed) return store_transposed(acc, out, rows, cols, overwrite);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < cols; ++j) {
      float& value = out.c[r * out.ldc + j];
      value = overwrite ? acc[r][j] : value + acc[r][j];
    }
}

#if CNN_ISA_LEVEL == 2 || CNN_ISA_LEVEL == 3
// A tile's 24 accumulators (row r's columns 0-15, 16-31) to `out`. Every loop runs over the
// tile's 12 rows unrolled, so that each reads its accumulator by a constant index: a row chosen
// at run time keeps the array in memory, and GCC 12 then stores every accumulator at each step of
// the kernel's loop (Note [Accumulators in registers], cpu_direct_tiles_avx2.cpp).
void store_tile(const __m512 (&acc)[kGemm16Rows][2], TileOut out, std::size_t rows, std::size_t cols, bool overwrite) {
  const __mmask16 lo = cols >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << cols) - 1);
  const __mmask16 hi = cols >= 32 ? __mmask16(0xFFFF) : cols > 16 ? static_cast<__mmask16>((1u << (cols - 16)) - 1) : 0;
  if (out.transposed) {
    alignas(64) float tile[kGemm16Rows][kGemm16Cols];
#pragma GCC unroll 12
    for (std::size_t r = 0; r < kGemm16Rows; ++r) {
      _mm512_store_ps(tile[r], acc[r][0]);
      _mm512_store_ps(tile[r] + 16, acc[r][1]);
    }
    return store_transposed(tile, out, rows, cols, overwrite);
  }
  if (cols == kGemm16Cols) {  // a whole tile: plain loads and stores (masked ones are slower on some cores)
#pragma GCC unroll 12
    for (std::size_t r = 0; r < kGemm16Rows; ++r) {
      if (r == rows) return;
      float* row = out.c + r * out.ldc;
      _mm512_storeu_ps(row, overwrite ? acc[r][0] : _mm512_add_ps(_mm512_loadu_ps(row), acc[r][0]));
      _mm512_storeu_ps(row + 16, overwrite ? acc[r][1] : _mm512_add_ps(_mm512_loadu_ps(row + 16), acc[r][1]));
    }
    return;
  }
#pragma GCC unroll 12
  for (std::size_t r = 0; r < kGemm16Rows; ++r) {
    if (r == rows) return;
    float* row = out.c + r * out.ldc;
    if (overwrite) {
      _mm512_mask_storeu_ps(row, lo, acc[r][0]);
      if (hi) _mm512_mask_storeu_ps(row + 16, hi, acc[r][1]);
      continue;
    }
    _mm512_mask_storeu_ps(row, lo, _mm512_add_ps(_mm512_maskz_loadu_ps(lo, row), acc[r][0]));
    if (hi) _mm512_mask_storeu_ps(row + 16, hi, _mm512_add_ps(_mm512_maskz_loadu_ps(hi, row + 16), acc[r][1]));
  }
}
#endif

#if CNN_ISA_LEVEL == 2  // native fp16 runs in the AVX-512 region alone (in_format)
// The halves of 16 words: the even values (low halves) or the odd (high), widened.
__m512 even_halves(__m512i words) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words)); }
__m512 odd_halves(__m512i words) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(words, 16))); }

// fp16: B's pairs widened to four vectors, A's panel widened once a pair and broadcast, the odd
// k's product added first (as the emulation).
void kernel_avx512_fp16(const std::uint32_t* a, const std::uint32_t* b, std::size_t pairs, TileOut out,
                        std::size_t rows, std::size_t cols, bool overwrite) {
  static_assert(kGemm16Rows <= 16);
  __m512 acc[kGemm16Rows][2];
  for (auto& row : acc) row[0] = row[1] = _mm512_setzero_ps();
  alignas(64) float a_even[16], a_odd[16];
  constexpr auto kPanelRows = static_cast<__mmask16>((1u << kGemm16Rows) - 1);
  for (std::size_t p = 0; p < pairs; ++p) {
    const __m512i b0 = _mm512_loadu_si512(b + p * kGemm16Cols), b1 = _mm512_loadu_si512(b + p * kGemm16Cols + 16);
    const __m512 b0_even = even_halves(b0), b0_odd = odd_halves(b0);
    const __m512 b1_even = even_halves(b1), b1_odd = odd_halves(b1);
    const __m512i panel = _mm512_maskz_loadu_epi32(kPanelRows, a + p * kGemm16Rows);
    _mm512_store_ps(a_even, even_halves(panel));
    _mm512_store_ps(a_odd, odd_halves(panel));
#pragma GCC unroll 12
    for (std::size_t r = 0; r < kGemm16Rows; ++r) {
      const __m512 odd = _mm512_set1_ps(a_odd[r]), even = _mm512_set1_ps(a_even[r]);
      acc[r][0] = _mm512_fmadd_ps(odd, b0_odd, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(odd, b1_odd, acc[r][1]);
      acc[r][0] = _mm512_fmadd_ps(even, b0_even, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(even, b1_even, acc[r][1]);
    }
  }
  store_tile(acc, out, rows, cols, overwrite);
}
#endif

#if CNN_ISA_LEVEL == 3
// bf16 with vdpbf16ps: 24 accumulators, two vectors of B's pairs, A's pair broadcast.
void kernel_avx512_bf16(const std::uint32_t* a, const std::uint32_t* b, std::size_t pairs, TileOut out,
                        std::size_t rows, std::size_t cols, bool overwrite) {
  __m512 acc[kGemm16Rows][2];
  for (auto& row : acc) row[0] = row[1] = _mm512_setzero_ps();
  for (std::size_t p = 0; p < pairs; ++p) {
    const __m512bh b0 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + p * kGemm16Cols));
    const __m512bh b1 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + p * kGemm16Cols + 16));
#pragma GCC unroll 12
    for (std::size_t r = 0; r < kGemm16Rows; ++r) {
      const __m512bh ar = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(a[p * kGemm16Rows + r])));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], b0, ar);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], b1, ar);
    }
  }
  store_tile(acc, out, rows, cols, overwrite);
}
#endif

#if CNN_ISA_LEVEL >= 4
// Note [bf16 products on AMX]: AMX's tdpbf16ps multiplies a tile of A (16 rows by 16 pairs) by
// one of B (16 pairs by 16 columns of pairs) into a tile of float sums: 16 x 16 x 32 products an
// instruction, measured at 14 x fp32's fused multiply-adds' peak and 29 x vdpbf16ps's on a
// Sapphire Rapids-class host (conv_peak). The
// operands are gemm16.hpp's, but a row of A's pairs adjacent (on_tiles) and the product cut as
// kTileBlocking says: two 16-row panels of A by a 32-column panel of B a kernel call, tiles 0-3
// the sums (panel, half of the columns), 4-5 A's panels, 6-7 B's halves, one configuration for
// every call (TileConfig). The sums start from C's values (zeros where the call writes C) and go
// back to C through the tiles, in place where they cover whole rows of a row-major C, else through
// a copy, so every element of C is summed alike wherever it falls in a tile.
//
// Its sums are not vdpbf16ps's two rounded adds a pair: measured on that host, one pair's two
// products are added exactly and rounded once into the sum, and sixteen pairs in one instruction
// round otherwise still (the manual leaves the order to the implementation). So bf16 on AMX has
// bits of its own, within float's rounding of the rounded operands' exact product (its test), not
// the emulation's. They stay reproducible: a product is cut into the same blocks of k and
// instructions of 16 pairs, from a block's first, whatever the threads (which split C's rows at
// whole panels) and whether an operand comes packed, and a block's last pairs are padded to 16
// with zeros.
//
// The tiles' rate depends on the data and on the memory: zeros run twice as fast as a network's
// values, and tile rows that straddle two cache lines halve it again. The packing here is 64-byte
// aligned (checked) and a panel takes 64 bytes a pair (A) or 128 (B), so every tile row packed
// here starts a cache line; an operand packed whole should start one too.

constexpr std::size_t kTileRows = kTileBlocking.rows;

// GCC 12's tile loads and configuration tell the compiler they read no memory (or the first 8
// bytes of the configuration alone): the barrier keeps the stores before them where they are.
inline void memory_barrier() { __asm__ volatile("" ::: "memory"); }

struct alignas(64) TileShapes {
  std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {};
  std::uint8_t rows[16] = {};
};

// This thread's tiles configured for the products while one lives (one product call).
class TileConfig {
 public:
  TileConfig() {
    TileShapes shapes;
    for (int t = 0; t < 8; ++t) {
      shapes.bytes_per_row[t] = 64;
      shapes.rows[t] = 16;  // the sums and A: a panel's rows; B: 16 pairs
    }
    memory_barrier();
    _tile_loadconfig(&shapes);
  }
  ~TileConfig() { _tile_release(); }
  TileConfig(const TileConfig&) = delete;
  TileConfig& operator=(const TileConfig&) = delete;
};

// One instruction's worth (16 pairs, from pair p) of up to two panels of A (a row's pairs `stride`
// words apart) and a B panel (32 words a pair) into the sums.
template <std::size_t Panels>
void tile_products(const std::uint32_t* a, std::size_t a_stride, const std::uint32_t* b) {
  const long a_bytes = static_cast<long>(a_stride * 4), b_bytes = kGemm16Cols * 4;
  _tile_loadd(6, b, b_bytes);
  _tile_loadd(7, b + 16, b_bytes);
  _tile_loadd(4, a, a_bytes);
  _tile_dpbf16ps(0, 4, 6);
  _tile_dpbf16ps(1, 4, 7);
  if constexpr (Panels == 2) {
    _tile_loadd(5, a + kTileRows * a_stride, a_bytes);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
}

// The sum tiles (0-1, and 2-3 for a second panel) loaded from or stored to rows of floats
// `stride` floats apart; a tile's number is part of the instruction.
template <std::size_t Panels>
void load_sums(const float* sums, std::size_t stride) {
  const long bytes = static_cast<long>(stride * 4);
  _tile_loadd(0, sums, bytes);
  _tile_loadd(1, sums + 16, bytes);
  if constexpr (Panels == 2) {
    _tile_loadd(2, sums + kTileRows * stride, bytes);
    _tile_loadd(3, sums + kTileRows * stride + 16, bytes);
  }
}
template <std::size_t Panels>
void store_sums(float* sums, std::size_t stride) {
  const long bytes = static_cast<long>(stride * 4);
  _tile_stored(0, sums, bytes);
  _tile_stored(1, sums + 16, bytes);
  if constexpr (Panels == 2) {
    _tile_stored(2, sums + kTileRows * stride, bytes);
    _tile_stored(3, sums + kTileRows * stride + 16, bytes);
  }
}

// c[rows x cols] (+)= up to two panels of A (rows <= 2 kTileRows; stored by line) x a panel of B,
// on the tiles a TileConfig set. The tiles add the products to C's values (zeros where
// `overwrite`), read and written in place where the tiles cover whole rows of a row-major C, else
// through a copy: every element is summed alike wherever it falls.
template <std::size_t Panels>
void kernel_amx_bf16(const std::uint32_t* a, const std::uint32_t* b, std::size_t pairs, TileOut out, std::size_t rows,
                     std::size_t cols, bool overwrite) {
  constexpr std::size_t kRows = Panels * kTileRows;
  const bool in_place = !out.transposed && rows == kRows && cols == kGemm16Cols;
  alignas(64) float copy[kRows][kGemm16Cols];
  auto at = [&](std::size_t r, std::size_t j) -> float& {
    return out.transposed ? out.c[j * out.ldc + r] : out.c[r * out.ldc + j];
  };
  if (!in_place && !overwrite)
    for (std::size_t r = 0; r < kRows; ++r)
      for (std::size_t j = 0; j < kGemm16Cols; ++j) copy[r][j] = r < rows && j < cols ? at(r, j) : 0.f;
  float* sums = in_place ? out.c : &copy[0][0];
  const std::size_t stride = in_place ? out.ldc : kGemm16Cols;
  memory_barrier();
  if (overwrite) {
    _tile_zero(0);
    _tile_zero(1);
    if constexpr (Panels == 2) {
      _tile_zero(2);
      _tile_zero(3);
    }
  } else {
    load_sums<Panels>(sums, stride);
  }
  std::size_t p = 0;
  for (; p + 16 <= pairs; p += 16) tile_products<Panels>(a + p, pairs, b + p * kGemm16Cols);
  if (p < pairs) {  // the last pairs, padded to 16 with zeros
    const std::size_t left = pairs - p;
    alignas(64) std::uint32_t a_end[kRows][16] = {}, b_end[16][kGemm16Cols] = {};
    for (std::size_t r = 0; r < kRows; ++r) std::copy_n(a + r * pairs + p, left, a_end[r]);
    std::copy_n(b + p * kGemm16Cols, left * kGemm16Cols, &b_end[0][0]);
    memory_barrier();
    tile_products<Panels>(&a_end[0][0], 16, &b_end[0][0]);
  }
  store_sums<Panels>(sums, stride);
  if (!in_place)
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < cols; ++j) at(r, j) = copy[r][j];
}
#endif

// The rows one kernel call computes: two panels on AMX's tiles, else one.
template <ValueFormat F, bool Native>
constexpr std::size_t kernel_rows() {
  return on_tiles<F, Native>() ? 2 * blocking<F, Native>().rows : blocking<F, Native>().rows;
}

template <ValueFormat F, bool Native>
void kernel(const std::uint32_t* a, const std::uint32_t* b, std::size_t pairs, TileOut out, std::size_t rows,
            std::size_t cols, bool overwrite) {
  if constexpr (Native) {
#if CNN_ISA_LEVEL >= 4
    if constexpr (F == ValueFormat::bf16)
      return rows > kTileRows ? kernel_amx_bf16<2>(a, b, pairs, out, rows, cols, overwrite)
                              : kernel_amx_bf16<1>(a, b, pairs, out, rows, cols, overwrite);
#endif
#if CNN_ISA_LEVEL == 3
    if constexpr (F == ValueFormat::bf16) return kernel_avx512_bf16(a, b, pairs, out, rows, cols, overwrite);
#endif
#if CNN_ISA_LEVEL == 2
    if constexpr (F == ValueFormat::fp16) return kernel_avx512_fp16(a, b, pairs, out, rows, cols, overwrite);
#endif
  }
  kernel_emulated<F>(a, b, pairs, out, rows, cols, overwrite);
}

// Where block (k0, panel of `line`) of a whole packed operand starts: each block of k before k0
// holds half its depth in pairs of every line.
const std::uint32_t* packed_panel(const Operand16& x, std::size_t width, std::size_t k0, std::size_t line,
                                  std::size_t pairs) {
  const std::size_t lines = round_up(x.packed_lines, width);
  return x.packed + k0 / 2 * lines + (x.first_line + line) / width * pairs * width;
}

// A whole operand, A (a_operand) or B: its `count` lines (A's m rows, B's n columns) in panels,
// every block of k (the layout gemm16.hpp describes).
template <ValueFormat F, bool Native>
void pack_whole(int threads, const GemmOperand& x, bool a_operand, std::size_t count, std::size_t k,
                std::uint32_t* packed) {
  constexpr Blocking by = blocking<F, Native>();
  const bool along_k = a_operand ? !x.transposed : x.transposed, by_line = a_operand && on_tiles<F, Native>();
  const std::size_t width = a_operand ? by.rows : kGemm16Cols;
  const std::size_t panels = (count + width - 1) / width, lines = panels * width;
  parallel_ranges(threads, panels, [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t k0 = 0; k0 < k; k0 += by.depth) {
      const std::size_t depth = std::min(by.depth, k - k0);
      pack_block<F, Native>(x, along_k, by_line, begin * width, (end - begin) * width, count, k0, depth, width,
                            packed + k0 / 2 * lines + begin * width * pairs_of(depth));
    }
  });
}

// C = A B, or with `transposed` C^T stored (the caller swapped the operands).
template <ValueFormat F, bool Native>
void gemm_blocks(std::size_t m, std::size_t n, std::size_t k, Operand16 a, Operand16 b, const RowsOf16& b_rows,
                 GemmOutput c, bool transposed, Packing packing) {
  constexpr Blocking by = blocking<F, Native>();
  const std::size_t needed = blocks_words(by, m, n, k, a.packed, b.packed);
  if (packing.floats < needed || reinterpret_cast<std::uintptr_t>(packing.data) % 64 != 0)
    throw std::logic_error("gemm16: " + std::to_string(packing.floats) + " floats of packing, " +
                           std::to_string(needed) + " needed, 64-byte aligned");
  if ((a.packed && a.first_line % by.rows) || (b.packed && b.first_line % kGemm16Cols))
    throw std::logic_error("gemm16: a packed operand's first line is not a panel's");
  auto* a_block = reinterpret_cast<std::uint32_t*>(packing.data);
  std::uint32_t* b_block = a_block + (a.packed ? 0 : a_block_words(by, m, k));
  for (std::size_t j0 = 0; j0 < n; j0 += by.block_cols) {
    const std::size_t cols = std::min(by.block_cols, n - j0);
    for (std::size_t k0 = 0; k0 < k; k0 += by.depth) {
      const std::size_t depth = std::min(by.depth, k - k0), pairs = pairs_of(depth);
      const std::uint32_t* b_panels = b.packed ? packed_panel(b, kGemm16Cols, k0, j0, pairs) : b_block;
      if (!b.packed) pack_b_block<F, Native>(b.stored, b_rows, j0, cols, n, k0, depth, b_block);
      for (std::size_t i0 = 0; i0 < m; i0 += by.block_rows) {
        const std::size_t rows = std::min(by.block_rows, m - i0);
        const std::uint32_t* a_panels = a.packed ? packed_panel(a, by.rows, k0, i0, pairs) : a_block;
        if (!a.packed) pack_a_block<F, Native>(a.stored, i0, rows, m, k0, depth, a_block);
        for (std::size_t jr = 0; jr < cols; jr += kGemm16Cols)
          for (std::size_t ir = 0; ir < rows; ir += kernel_rows<F, Native>())
            kernel<F, Native>(
                a_panels + ir * pairs, b_panels + jr * pairs, pairs,
                TileOut{transposed ? c.data + (j0 + jr) * c.stride + i0 + ir : c.data + (i0 + ir) * c.stride + j0 + jr,
                        c.stride, transposed},
                std::min(kernel_rows<F, Native>(), rows - ir), std::min(kGemm16Cols, cols - jr),
                k0 == 0 && !c.accumulate);  // the first block of k writes C unless adding to it
      }
    }
  }
}

template <ValueFormat F, bool Native>
void product(std::size_t m, std::size_t n, std::size_t k, Operand16 a, Operand16 b, const RowsOf16& b_rows,
             GemmOutput c, Packing packing) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!c.accumulate)
      for (std::size_t i = 0; i < m; ++i) std::fill_n(c.data + i * c.stride, n, 0.f);
    return;
  }
#if CNN_ISA_LEVEL >= 4
  std::optional<TileConfig> tiles;
  if constexpr (on_tiles<F, Native>()) tiles.emplace();
#endif
  if (!swapped(blocking<F, Native>(), m, n, a.packed, b.packed))  // never with A packed
    return gemm_blocks<F, Native>(m, n, k, a, b, b_rows, c, false, packing);
  // op(B)^T is B's storage read the other way, and op(A)^T likewise.
  Operand16 b_as_a{{b.stored.data, b.stored.stride, !b.stored.transposed}};
  Operand16 a_as_b{{a.stored.data, a.stored.stride, !a.stored.transposed}};
  gemm_blocks<F, Native>(n, m, k, b_as_a, a_as_b, {}, c, true, packing);
}

// Runs run.operator()<F, Native>() for `format`: on this region's instructions where it has them
// for the format and `native` asks for them, else emulated. Native fp16 is the AVX-512 region's
// alone: AVX512-BF16 hosts run it there too (region_of in gemm16.cpp), as GCC 12 keeps a
// BF16-targeted copy's accumulators in memory (Note [Accumulators in registers]).
template <class Run>
void in_format(ValueFormat format, [[maybe_unused]] bool native, Run&& run) {
  if (format == ValueFormat::bf16) {
#if CNN_ISA_LEVEL >= 3
    if (native) return run.template operator()<ValueFormat::bf16, true>();
#endif
    return run.template operator()<ValueFormat::bf16, false>();
  }
#if CNN_ISA_LEVEL == 2
  if (native) return run.template operator()<ValueFormat::fp16, true>();
#endif
  run.template operator()<ValueFormat::fp16, false>();
}

}  // namespace

void multiply(ValueFormat format, bool native, std::size_t m, std::size_t n, std::size_t k, Operand16 a, Operand16 b,
              RowsOf16 b_rows, GemmOutput c, Packing packing) {
  in_format(format, native,
            [&]<ValueFormat F, bool Native>() { product<F, Native>(m, n, k, a, b, b_rows, c, packing); });
}

void pack(ValueFormat format, bool native, int threads, const GemmOperand& x, bool a_operand, std::size_t count,
          std::size_t k, std::uint32_t* packed) {
  in_format(format, native,
            [&]<ValueFormat F, bool Native>() { pack_whole<F, Native>(threads, x, a_operand, count, k, packed); });
}

}  // namespace cnn::cpu::CNN_ISA::products16
