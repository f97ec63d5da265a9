#include "backends/cpu/detail/gemm.hpp"

#include <immintrin.h>

#include <Eigen/Core>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "backends/cpu/detail/cpu_isa.hpp"
#include "backends/cpu/detail/parallel.hpp"
#include "backends/cpu/detail/transpose_8x8.hpp"

namespace cnn::cpu {

// Note [One product on every instruction set]: each element of C is summed the same way on every
// path: per block of k (kGemmDepth values, in order), a chain of fused multiply-adds from zero in
// the order of k, then added to C (the first block writes it, unless the product adds to C). The
// AVX-512 kernel keeps a tile's 8 x 48 sums in 24 vectors, the AVX2 kernel the same tile as four
// 4 x 24 quarters in 12 vectors each, the portable one in an array with std::fma, which rounds once
// as the instructions do. Packing, tiles and blocks are the same whatever runs, so a plan's bytes
// and a run's bits do not depend on the host's instruction set (subnormals aside: the vector
// paths flush them, Note [Flushed subnormals]; std::fma without the instruction may not). Where
// the rows or columns split (threads, tiles, blocks of rows or columns), no element's sum changes.

namespace {

constexpr std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// Rows of A packed at a time (12 tiles) and columns of B (16 tiles): the blocks stay in L2 while
// a B panel (kGemmDepth x kGemmCols floats, 36 KiB) stays in L1 across a column of tiles.
constexpr std::size_t kBlockRows = 12 * kGemmRows, kBlockCols = 16 * kGemmCols;

// ---- Tiles ----

// Where a tile of C goes: element (r, j) at c[r * ldc + j], or c[j * ldc + r] when C^T is what
// is stored (the product computed as C^T = B^T A^T).
struct TileOut {
  float* c;
  std::size_t ldc;
  bool transposed;
};

using Tile = float[kGemmRows][kGemmCols];

// Adds (or, overwrite, writes) the [rows x cols] corner of a tile to `out`.
void store_tile(const Tile& tile, TileOut out, std::size_t rows, std::size_t cols, bool overwrite) {
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < cols; ++j) {
      float& value = out.transposed ? out.c[j * out.ldc + r] : out.c[r * out.ldc + j];
      value = overwrite ? tile[r][j] : value + tile[r][j];
    }
}

using Kernel = void (*)(const float* a, const float* b, std::size_t depth, TileOut out, std::size_t rows,
                        std::size_t cols, bool overwrite);

// A swapped product (Note [The narrow side as B]) stores its tiles transposed: column j of a
// tile is C's row j, its tile rows adjacent there. Whole tiles turn their vectors in registers,
// squares of lanes transposed, and store each column as one vector; the same adds as store_tile.
__attribute__((target("avx2,fma"))) inline void store_column_avx(float* at, __m256 column, bool overwrite) {
  _mm256_storeu_ps(at, overwrite ? column : _mm256_add_ps(_mm256_loadu_ps(at), column));
}

__attribute__((target("avx2,fma"))) inline void store_column_avx(float* at, __m128 column, bool overwrite) {
  _mm_storeu_ps(at, overwrite ? column : _mm_add_ps(_mm_loadu_ps(at), column));
}

// rows[r] holds columns [0, 8) of tile row r: column j goes to out[j * ldc], rows 0..7.
__attribute__((target("avx2,fma"))) inline void store_transposed_8x8_avx(const __m256 (&rows)[8], float* out,
                                                                       std::size_t ldc, bool overwrite) {
  __m256 columns[8] = {rows[0], rows[1], rows[2], rows[3], rows[4], rows[5], rows[6], rows[7]};
  transpose_8x8_avx(columns);
  for (std::size_t j = 0; j < 8; ++j) store_column_avx(out + j * ldc, columns[j], overwrite);
}

// rows[r] holds columns [0, 8) of tile row r, 4 rows: column j goes to out[j * ldc], rows 0..3.
__attribute__((target("avx2,fma"))) inline void store_transposed_4x8_avx(const __m256 (&rows)[4], float* out,
                                                                       std::size_t ldc, bool overwrite) {
  for (int half = 0; half < 2; ++half) {
    __m128 c0 = half ? _mm256_extractf128_ps(rows[0], 1) : _mm256_castps256_ps128(rows[0]);
    __m128 c1 = half ? _mm256_extractf128_ps(rows[1], 1) : _mm256_castps256_ps128(rows[1]);
    __m128 c2 = half ? _mm256_extractf128_ps(rows[2], 1) : _mm256_castps256_ps128(rows[2]);
    __m128 c3 = half ? _mm256_extractf128_ps(rows[3], 1) : _mm256_castps256_ps128(rows[3]);
    _MM_TRANSPOSE4_PS(c0, c1, c2, c3);
    float* at = out + static_cast<std::size_t>(4 * half) * ldc;
    store_column_avx(at, c0, overwrite);
    store_column_avx(at + ldc, c1, overwrite);
    store_column_avx(at + 2 * ldc, c2, overwrite);
    store_column_avx(at + 3 * ldc, c3, overwrite);
  }
}

void kernel_portable(const float* a, const float* b, std::size_t depth, TileOut out, std::size_t rows, std::size_t cols,
                     bool overwrite) {
  alignas(64) Tile acc = {};
  for (std::size_t p = 0; p < depth; ++p)
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < cols; ++j)
        acc[r][j] = std::fma(a[p * kGemmRows + r], b[p * kGemmCols + j], acc[r][j]);
  store_tile(acc, out, rows, cols, overwrite);
}

// Note [Only the tile's valid part]: a tile at the product's edge holds fewer than 8 rows or 48
// columns of C (a 7 x 7 map's 49 pixels end in a tile of one row; 64 columns fill one and a third
// panels), and computing its padding was a sixth of resnet18's multiply-adds at 224 x 224. The
// AVX-512 kernel is one instance per count of rows and of 16-lane vectors, and computes those
// alone; the AVX2 kernel skips the quarters that hold no valid element (instances per quarter kept
// their sums in memory, GCC 12 storing them every step). Each element's sum is the same chain as in
// a whole tile, so the bits do not change.

// Four quarters of the tile, rows 4q.. and columns 24h.., each in 12 vectors of 8.
__attribute__((target("avx2,fma"))) void kernel_avx2(const float* a, const float* b, std::size_t depth, TileOut out,
                                                      std::size_t rows, std::size_t cols, bool overwrite) {
  constexpr std::size_t kRows = kGemmRows / 2, kCols = kGemmCols / 2, kVectors = kCols / 8;
  alignas(64) Tile tile;
  const bool whole = rows == kGemmRows && cols == kGemmCols, direct = whole && !out.transposed;
  for (std::size_t r0 = 0; r0 < rows; r0 += kRows)
    for (std::size_t c0 = 0; c0 < cols; c0 += kCols) {  // the quarters that hold valid elements
      __m256 acc[kRows][kVectors];
      for (auto& row : acc)
        for (auto& v : row) v = _mm256_setzero_ps();
      for (std::size_t p = 0; p < depth; ++p) {
        __m256 bv[kVectors];
        for (std::size_t v = 0; v < kVectors; ++v) bv[v] = _mm256_load_ps(b + p * kGemmCols + c0 + 8 * v);
#pragma GCC unroll 4
        for (std::size_t r = 0; r < kRows; ++r) {
          const __m256 ar = _mm256_broadcast_ss(a + p * kGemmRows + r0 + r);
          for (std::size_t v = 0; v < kVectors; ++v) acc[r][v] = _mm256_fmadd_ps(ar, bv[v], acc[r][v]);
        }
      }
      if (whole && out.transposed) {
        for (std::size_t v = 0; v < kVectors; ++v) {
          const __m256 quarter_rows[kRows] = {acc[0][v], acc[1][v], acc[2][v], acc[3][v]};
          store_transposed_4x8_avx(quarter_rows, out.c + (c0 + 8 * v) * out.ldc + r0, out.ldc, overwrite);
        }
        continue;
      }
      for (std::size_t r = 0; r < kRows; ++r)
        for (std::size_t v = 0; v < kVectors; ++v) {
          if (!direct) {
            _mm256_store_ps(tile[r0 + r] + c0 + 8 * v, acc[r][v]);
            continue;
          }
          float* at = out.c + (r0 + r) * out.ldc + c0 + 8 * v;
          _mm256_storeu_ps(at, overwrite ? acc[r][v] : _mm256_add_ps(_mm256_loadu_ps(at), acc[r][v]));
        }
    }
  if (!whole) store_tile(tile, out, rows, cols, overwrite);
}

// Rows x Vectors of the tile, Rows of A's values broadcast and Vectors of B's row a step; the
// last vector's lanes past `cols` computed but not stored.
template <std::size_t Rows, std::size_t Vectors>
__attribute__((target("avx512f"))) void tile_avx512(const float* a, const float* b, std::size_t depth, TileOut out,
                                                   std::size_t cols, bool overwrite) {
  __m512 acc[Rows][Vectors];
  for (auto& row : acc)
    for (auto& v : row) v = _mm512_setzero_ps();
  for (std::size_t p = 0; p < depth; ++p) {
    __m512 bv[Vectors];
    for (std::size_t v = 0; v < Vectors; ++v) bv[v] = _mm512_load_ps(b + p * kGemmCols + 16 * v);
#pragma GCC unroll 8
    for (std::size_t r = 0; r < Rows; ++r) {
      const __m512 ar = _mm512_set1_ps(a[p * kGemmRows + r]);
      for (std::size_t v = 0; v < Vectors; ++v) acc[r][v] = _mm512_fmadd_ps(ar, bv[v], acc[r][v]);
    }
  }
  if (!out.transposed) {
    const __mmask16 last = static_cast<__mmask16>((1u << (cols - 16 * (Vectors - 1))) - 1u);  // cols > 16 (V - 1)
    for (std::size_t r = 0; r < Rows; ++r)
      for (std::size_t v = 0; v < Vectors; ++v) {
        float* at = out.c + r * out.ldc + 16 * v;
        const __mmask16 lanes = v + 1 < Vectors ? static_cast<__mmask16>(0xffff) : last;
        _mm512_mask_storeu_ps(at, lanes,
                              overwrite ? acc[r][v] : _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, at), acc[r][v]));
      }
    return;
  }
  if (Rows == kGemmRows && cols == kGemmCols) {
    for (std::size_t v = 0; v < Vectors; ++v)
      for (int half = 0; half < 2; ++half) {
        __m256 eight[kGemmRows];
        for (std::size_t r = 0; r < kGemmRows; ++r)
          eight[r] = half ? _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r][v]), 1))  // AVX512F alone
                          : _mm512_castps512_ps256(acc[r][v]);
        store_transposed_8x8_avx(eight, out.c + (16 * v + 8 * static_cast<std::size_t>(half)) * out.ldc, out.ldc,
                                 overwrite);
      }
    return;
  }
  alignas(64) Tile tile;
  for (std::size_t r = 0; r < Rows; ++r)
    for (std::size_t v = 0; v < Vectors; ++v) _mm512_store_ps(tile[r] + 16 * v, acc[r][v]);
  store_tile(tile, out, Rows, cols, overwrite);
}

using TileKernel = void (*)(const float* a, const float* b, std::size_t depth, TileOut out, std::size_t cols,
                            bool overwrite);

template <std::size_t... Rows>
constexpr std::array<std::array<TileKernel, 3>, kGemmRows> tiles_avx512(std::index_sequence<Rows...>) {
  return {{{tile_avx512<Rows + 1, 1>, tile_avx512<Rows + 1, 2>, tile_avx512<Rows + 1, 3>}...}};
}
constexpr auto kTilesAvx512 = tiles_avx512(std::make_index_sequence<kGemmRows>());
static_assert(kGemmCols == 3 * 16);

void kernel_avx512(const float* a, const float* b, std::size_t depth, TileOut out, std::size_t rows, std::size_t cols,
                   bool overwrite) {
  kTilesAvx512[rows - 1][(cols + 15) / 16 - 1](a, b, depth, out, cols, overwrite);
}

Kernel kernel_for(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::avx512_amx:
    case CpuIsa::avx512_bf16:
    case CpuIsa::avx512: return kernel_avx512;
    case CpuIsa::avx2: return kernel_avx2;
    case CpuIsa::portable: break;
  }
  return kernel_portable;
}

// ---- Packing ----

// transpose_lines on AVX2 and up: squares of 8 x 8 (Width a multiple of 8).
__attribute__((target("avx2,fma"))) void transpose_lines_avx2(const float* lines, std::size_t stride, std::size_t depth,
                                                               std::size_t width, float* out) {
  std::size_t p0 = 0;
  for (; p0 + 8 <= depth; p0 += 8)
    for (std::size_t l0 = 0; l0 < width; l0 += 8) {
      __m256 square[8];
      for (std::size_t r = 0; r < 8; ++r) square[r] = _mm256_loadu_ps(lines + (l0 + r) * stride + p0);
      store_transposed_8x8_avx(square, out + p0 * width + l0, width, true);
    }
  for (; p0 < depth; ++p0)
    for (std::size_t l = 0; l < width; ++l) out[p0 * width + l] = lines[l * stride + p0];
}

// Lines [0, L) of `width`-wide panel `out`, values [0, depth) along k, from lines each `stride`
// apart whose values along k are adjacent: squares of vector lanes transposed (Eigen's
// ptranspose, at the build's width, or 8 x 8 where the host has AVX2), the last values of k one by
// one.
template <std::size_t Width>
void transpose_lines(const float* lines, std::size_t stride, std::size_t depth, float* out) {
  if constexpr (Width % 8 == 0)
    if (isa() >= CpuIsa::avx2) return transpose_lines_avx2(lines, stride, depth, Width, out);
  using Packet = Eigen::internal::packet_traits<float>::type;
  constexpr std::size_t L = sizeof(Packet) / sizeof(float);
  static_assert(Width % L == 0);
  std::size_t p0 = 0;
  for (; p0 + L <= depth; p0 += L)
    for (std::size_t l0 = 0; l0 < Width; l0 += L) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"  // a vector type as a template argument, as Eigen's own
      Eigen::internal::PacketBlock<Packet, static_cast<int>(L)> square;
#pragma GCC diagnostic pop
      for (std::size_t r = 0; r < L; ++r)
        square.packet[r] = Eigen::internal::ploadu<Packet>(lines + (l0 + r) * stride + p0);
      Eigen::internal::ptranspose(square);
      for (std::size_t r = 0; r < L; ++r) Eigen::internal::pstoreu(out + (p0 + r) * Width + l0, square.packet[r]);
    }
  for (; p0 < depth; ++p0)
    for (std::size_t l = 0; l < Width; ++l) out[p0 * Width + l] = lines[l * stride + p0];
}

// `lines` rows of A (from row i0) or columns of B (from column j0), values [k0, k0 + depth) along
// k, in panels of Width lines: [panel][depth][Width]; lines at or past `last` are zeros.
// `along_k`: the operand's values along k are adjacent in memory (A stored [m x k], B stored
// [n x k]); otherwise its lines are (A stored [k x m], B stored [k x n]). Whole panels take the
// vector paths (fixed-count copies, transposed squares), the last partial one plain loops.
template <std::size_t Width>
void pack_block(const GemmOperand& x, bool along_k, std::size_t first, std::size_t lines, std::size_t last,
                std::size_t k0, std::size_t depth, float* dst) {
  using Packet = Eigen::internal::packet_traits<float>::type;
  constexpr bool kTransposes = Width % (sizeof(Packet) / sizeof(float)) == 0;
  for (std::size_t panel = 0; panel * Width < lines; ++panel) {
    float* out = dst + panel * depth * Width;
    const std::size_t line0 = first + panel * Width;
    const std::size_t valid = line0 < last ? std::min(Width, last - line0) : 0;
    if (along_k) {
      if constexpr (kTransposes)
        if (valid == Width) {
          transpose_lines<Width>(x.data + line0 * x.stride + k0, x.stride, depth, out);
          continue;
        }
      for (std::size_t l = 0; l < valid; ++l) {
        const float* line = x.data + (line0 + l) * x.stride + k0;
        for (std::size_t p = 0; p < depth; ++p) out[p * Width + l] = line[p];
      }
      for (std::size_t p = 0; p < depth; ++p) std::fill(out + p * Width + valid, out + (p + 1) * Width, 0.f);
      continue;
    }
    for (std::size_t p = 0; p < depth; ++p) {
      const float* row = x.data + (k0 + p) * x.stride + line0;
      float* to = out + p * Width;
      if (valid == Width) {
        for (std::size_t j = 0; j < Width; ++j) to[j] = row[j];  // a fixed count: vector moves, no memmove call
        continue;
      }
      for (std::size_t j = 0; j < valid; ++j) to[j] = row[j];
      for (std::size_t j = valid; j < Width; ++j) to[j] = 0.f;
    }
  }
}

// Note [Operands packed once]: a product's operand packed whole before the product, in the
// layout its blocks read: for each block of k (kGemmDepth values, the last one shorter), every
// panel of the operand's lines, [block][panel][depth][width], lines past the last zeros. Block
// k0's panels start at padded lines x k0, and a block of lines from line l0 at l0 x depth within
// them, whatever the product's blocks of rows or columns. A layer's weights packed so serve every
// image of a micro-batch, where each image's product packed them again.
std::size_t whole_packing_floats(std::size_t lines, std::size_t width, std::size_t k) {
  return aligned_floats(round_up(lines, width) * k);
}

template <std::size_t Width>
const float* packed_lines(const float* whole, std::size_t lines, std::size_t k0, std::size_t first, std::size_t depth) {
  return whole + round_up(lines, Width) * k0 + first * depth;
}

template <std::size_t Width>
void pack_whole(int threads, const GemmOperand& x, bool along_k, std::size_t lines, std::size_t k, float* dst) {
  const std::size_t panels = (lines + Width - 1) / Width;
  for (std::size_t k0 = 0; k0 < k; k0 += kGemmDepth) {
    const std::size_t depth = std::min(kGemmDepth, k - k0);
    parallel_ranges(threads, panels, [&](int, std::size_t begin, std::size_t end) {
      pack_block<Width>(x, along_k, begin * Width, (end - begin) * Width, lines, k0, depth,
                        dst + round_up(lines, Width) * k0 + begin * Width * depth);
    });
  }
}

// A as stored, or packed whole (Note [Operands packed once]).
struct ASource {
  GemmOperand stored;
  const float* packed = nullptr;
};

// B as stored, as its packer gives it, or packed whole.
struct BSource {
  GemmOperand stored;
  GemmPanels panels;
  const float* packed = nullptr;
  void pack(std::size_t k0, std::size_t depth, std::size_t j0, std::size_t cols, std::size_t n, float* dst) const {
    if (panels.pack != nullptr) return panels.pack(panels.context, k0, depth, j0, cols, dst);
    pack_block<kGemmCols>(stored, stored.transposed, j0, cols, n, k0, depth, dst);
  }
};

// Note [C fetched a tile ahead]: a layer's output is written once and is rarely in cache (resnet50's
// 64 -> 256 1x1 layer at 56 x 56 writes 3.2 MB an image), and a tile's stores of 24 lines that miss
// stalled the kernel at the end of every tile: that layer's forward pass ran at 61% of the peak on
// a batch, 84% on one image whose output stayed cached. So the lines of the next tile's C are
// fetched before the current tile runs, and arrive while it sums (a tile of depth 64 is about 1,500
// multiply-adds). A read hint: any x86-64 has it, and measured as fast as the write one. Inlined:
// GCC finds a function that only prefetches free of effects and drops the calls to it.
[[gnu::always_inline]] inline void fetch_tile(const TileOut& out, std::size_t rows, std::size_t cols) {
  if (out.transposed) {  // column j of the tile is a stored row of up to 8 values
    for (std::size_t j = 0; j < cols; ++j) __builtin_prefetch(out.c + j * out.ldc, 0, 3);
    return;
  }
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < cols; j += 16) __builtin_prefetch(out.c + r * out.ldc + j, 0, 3);
}

// ---- Blocks ----

struct Blocks {
  std::size_t rows, cols, depth;
  bool pack_a = true, pack_b = true;  // false: that operand comes packed whole

  static Blocks whole(std::size_t m, std::size_t n, std::size_t k, bool pack_a = true, bool pack_b = true) {
    return {round_up(std::min(m, kBlockRows), kGemmRows), round_up(std::min(n, kBlockCols), kGemmCols),
            std::min(k, kGemmDepth), pack_a, pack_b};
  }
  std::size_t a_floats() const { return pack_a ? aligned_floats(rows * depth) : 0; }
  std::size_t floats() const { return a_floats() + (pack_b ? aligned_floats(cols * depth) : 0); }

  // Smaller blocks until they fit `packing`: columns, then rows, then (other sums) depth.
  void fit(const Packing& packing) {
    if (reinterpret_cast<std::uintptr_t>(packing.data) % 64 != 0)
      throw std::logic_error("gemm: packing at " + std::to_string(reinterpret_cast<std::uintptr_t>(packing.data)) +
                             " is not 64-byte aligned");
    while (floats() > packing.floats && cols > kGemmCols) cols = round_up(cols / 2, kGemmCols);
    while (floats() > packing.floats && rows > kGemmRows) rows = round_up(rows / 2, kGemmRows);
    // An operand packed whole has its blocks of k as they are.
    while (floats() > packing.floats && depth > 1 && pack_a && pack_b) depth = (depth + 1) / 2;
    if (floats() > packing.floats)
      throw std::logic_error("gemm: " + std::to_string(packing.floats) + " floats of packing, " +
                             std::to_string(floats()) + " needed");
  }
};

// C = A B, or with `transposed` C^T stored (the caller swapped the operands).
void gemm_blocks(std::size_t m, std::size_t n, std::size_t k, const ASource& a, const BSource& b, GemmOutput c,
                 bool transposed, Packing packing) {
  Blocks blocks = Blocks::whole(m, n, k, a.packed == nullptr, b.packed == nullptr);
  blocks.fit(packing);
  const Kernel kernel = kernel_for(isa());
  float* a_block = packing.data;
  float* b_block = packing.data + blocks.a_floats();
  for (std::size_t j0 = 0; j0 < n; j0 += blocks.cols) {
    const std::size_t cols = std::min(blocks.cols, n - j0);
    for (std::size_t k0 = 0; k0 < k; k0 += blocks.depth) {
      const std::size_t depth = std::min(blocks.depth, k - k0);
      const float* b_panels = b.packed ? packed_lines<kGemmCols>(b.packed, n, k0, j0, depth) : b_block;
      if (!b.packed) b.pack(k0, depth, j0, cols, n, b_block);
      for (std::size_t i0 = 0; i0 < m; i0 += blocks.rows) {
        const std::size_t rows = std::min(blocks.rows, m - i0);
        const float* a_panels = a.packed ? packed_lines<kGemmRows>(a.packed, m, k0, i0, depth) : a_block;
        if (!a.packed) pack_block<kGemmRows>(a.stored, !a.stored.transposed, i0, rows, m, k0, depth, a_block);
        auto tile_at = [&](std::size_t ir, std::size_t jr) {
          return TileOut{transposed ? c.data + (j0 + jr) * c.stride + i0 + ir : c.data + (i0 + ir) * c.stride + j0 + jr,
                         c.stride, transposed};
        };
        fetch_tile(tile_at(0, 0), std::min(kGemmRows, rows), std::min(kGemmCols, cols));
        for (std::size_t jr = 0; jr < cols; jr += kGemmCols)
          for (std::size_t ir = 0; ir < rows; ir += kGemmRows) {
            // The tiles go down a column of the block, then to the next column (Note [C fetched a tile ahead]).
            const bool down = ir + kGemmRows < rows;
            const std::size_t next_ir = down ? ir + kGemmRows : 0, next_jr = down ? jr : jr + kGemmCols;
            if (next_jr < cols)
              fetch_tile(tile_at(next_ir, next_jr), std::min(kGemmRows, rows - next_ir),
                         std::min(kGemmCols, cols - next_jr));
            kernel(a_panels + ir * depth, b_panels + jr * depth, depth, tile_at(ir, jr), std::min(kGemmRows, rows - ir),
                   std::min(kGemmCols, cols - jr),
                   k0 == 0 && !c.accumulate);  // the first block of k writes C unless adding to it
          }
      }
    }
  }
}

// Note [The narrow side as B]: the tile is 8 rows by 48 columns, so a product with fewer
// columns than rows (a 3x3 convolution of one channel: dw[32 x 9] += dy col^T; a late ResNet
// layer's 7 x 7 = 49 pixels) computes mostly padding. Where B is stored, C^T = B^T A^T gives the
// same bits (every element sums the same products in the same order); it is taken where it
// computes under three quarters of the padded tiles.
bool swapped(std::size_t m, std::size_t n, const BSource& b) { return b.panels.pack == nullptr && gemm_swaps(m, n); }

void product(std::size_t m, std::size_t n, std::size_t k, const ASource& a, const BSource& b, GemmOutput c,
             Packing packing) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!c.accumulate)
      for (std::size_t i = 0; i < m; ++i) std::fill_n(c.data + i * c.stride, n, 0.f);
    return;
  }
  if (!swapped(m, n, b)) return gemm_blocks(m, n, k, a, b, c, false, packing);
  // op(B)^T is B's storage read the other way, and op(A)^T likewise; an A packed whole was packed
  // as this B (pack_shared_a).
  const ASource b_as_a{GemmOperand{b.stored.data, b.stored.stride, !b.stored.transposed}};
  const BSource a_as_b{GemmOperand{a.stored.data, a.stored.stride, !a.stored.transposed}, {}, a.packed};
  gemm_blocks(n, m, k, b_as_a, a_as_b, c, true, packing);
}

// Whether the products a SharedA was packed for are these.
void check_shared(const SharedA& a, std::size_t m, std::size_t n, std::size_t k, bool b_from_panels) {
  if (a.packed == nullptr || a.m != m || a.n != n || a.k != k || a.b_from_panels != b_from_panels)
    throw std::logic_error("gemm: an A packed for " + std::to_string(a.m) + " x " + std::to_string(a.n) + " x " +
                           std::to_string(a.k) + " products, used in a " + std::to_string(m) + " x " +
                           std::to_string(n) + " x " + std::to_string(k) + " one");
}

}  // namespace

bool gemm_swaps(std::size_t m, std::size_t n) {
  return 4 * round_up(n, kGemmRows) * round_up(m, kGemmCols) < 3 * round_up(m, kGemmRows) * round_up(n, kGemmCols);
}

std::size_t gemm_packing_floats(std::size_t m, std::size_t n, std::size_t k) {
  return gemm_swaps(m, n) ? Blocks::whole(n, m, k).floats() : Blocks::whole(m, n, k).floats();
}

std::size_t gemm_panels_packing_floats(std::size_t m, std::size_t n, std::size_t k) {
  return Blocks::whole(m, n, k).floats();  // never swapped
}

std::size_t shared_a_floats(std::size_t m, std::size_t n, std::size_t k, bool b_from_panels) {
  return !b_from_panels && gemm_swaps(m, n) ? whole_packing_floats(m, kGemmCols, k)
                                            : whole_packing_floats(m, kGemmRows, k);
}

std::size_t gemm_shared_a_packing_floats(std::size_t m, std::size_t n, std::size_t k, bool b_from_panels) {
  return !b_from_panels && gemm_swaps(m, n) ? Blocks::whole(n, m, k, true, false).floats()
                                            : Blocks::whole(m, n, k, false, true).floats();
}

SharedA pack_shared_a(int threads, std::size_t m, std::size_t n, std::size_t k, bool b_from_panels, GemmOperand a,
                      float* dst) {
  if (!b_from_panels && gemm_swaps(m, n))  // A^T as the products' B: lines along op(A)'s rows still
    pack_whole<kGemmCols>(threads, a, !a.transposed, m, k, dst);
  else
    pack_whole<kGemmRows>(threads, a, !a.transposed, m, k, dst);
  return SharedA(dst, m, n, k, b_from_panels);
}

void transpose_into_panel(const float* lines, std::size_t stride, std::size_t depth, float* panel) {
  transpose_lines<kGemmCols>(lines, stride, depth, panel);
}

void gemm(std::size_t m, std::size_t n, std::size_t k, GemmOperand a, GemmOperand b, GemmOutput c, Packing packing) {
  product(m, n, k, ASource{a}, BSource{b, {}}, c, packing);
}

void gemm(std::size_t m, std::size_t n, std::size_t k, GemmOperand a, GemmPanels b, GemmOutput c, Packing packing) {
  if (b.pack == nullptr) throw std::logic_error("gemm: B's packer is missing");
  product(m, n, k, ASource{a}, BSource{{}, b}, c, packing);
}

void gemm(std::size_t m, std::size_t n, std::size_t k, SharedA a, GemmOperand b, GemmOutput c, Packing packing) {
  check_shared(a, m, n, k, false);
  product(m, n, k, ASource{{}, a.packed}, BSource{b, {}}, c, packing);
}

void gemm(std::size_t m, std::size_t n, std::size_t k, SharedA a, GemmPanels b, GemmOutput c, Packing packing) {
  if (b.pack == nullptr) throw std::logic_error("gemm: B's packer is missing");
  check_shared(a, m, n, k, true);
  product(m, n, k, ASource{{}, a.packed}, BSource{{}, b}, c, packing);
}

std::size_t parallel_gemm_packing_floats(int threads, std::size_t m, std::size_t n, std::size_t k) {
  const int count = range_threads(threads, m);
  std::size_t per_thread = 0;  // for the rows parallel_ranges gives each thread
  for (int t = 0; t < count; ++t)
    per_thread = std::max(per_thread, gemm_packing_floats(range_begin(m, t + 1, count) - range_begin(m, t, count), n, k));
  return per_thread * static_cast<std::size_t>(count);
}

void parallel_gemm(int threads, std::size_t m, std::size_t n, std::size_t k, GemmOperand a, GemmOperand b,
                   GemmOutput c, Packing packing) {
  const int count = range_threads(threads, m);
  const std::size_t per_thread = packing.floats / static_cast<std::size_t>(count) / 16 * 16;  // aligned slices
  parallel_ranges(count, m, [&](int t, std::size_t begin, std::size_t end) {
    GemmOperand rows_of_a = a;
    rows_of_a.data += a.transposed ? begin : begin * a.stride;  // A^T stored [k x m]: a column offset
    GemmOutput rows_of_c = c;
    rows_of_c.data += begin * c.stride;
    gemm(end - begin, n, k, rows_of_a, b, rows_of_c, Packing{packing.data + static_cast<std::size_t>(t) * per_thread, per_thread});
  });
}

}  // namespace cnn::cpu
