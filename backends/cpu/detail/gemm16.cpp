#include "backends/cpu/detail/gemm16.hpp"

#include <immintrin.h>

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>

#include "backends/cpu/detail/cpu_isa.hpp"
#include "backends/cpu/detail/parallel.hpp"

namespace cnn::cpu {

// Note [One 16-bit product on every host]: vdpbf16ps adds a pair's two products to a float lane
// one after the other, the odd k's first: acc += a[2p+1] b[2p+1]; acc += a[2p] b[2p]. A product of
// two bfloat16 values has at most 16 significant bits, so it is exact in float and each step rounds
// once, in the add. The emulation does the same two adds in the same order (a fused multiply-add
// gives the same bits, the product being exact), and rounds floats to bfloat16 as
// vcvtne2ps2bf16 does; the instruction reads subnormals as zero and writes zero for a subnormal,
// as the CPU kernels' FTZ and DAZ do (Note [Flushed subnormals]). So a run trains to the same bits
// with or without the instructions; the test "gemm16: the bf16 instructions and their
// emulation give the same bits" holds it where a host has them. fp16 follows the same order:
// its AVX-512 kernel widens the halves (vcvtph2ps, exact) and adds the odd k's product, then the
// even's, with fused multiply-adds; a product of two halves has at most 22 significant bits, so
// it too is exact in float. Halves are rounded as vcvtps2ph rounds (to nearest, ties to even; a
// float subnormal is far below half's range and becomes zero either way).

std::uint16_t to_fp16(float value) { return Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(value)); }
float from_fp16(std::uint16_t bits) { return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits)); }

namespace {

constexpr std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }
constexpr std::size_t pairs_of(std::size_t depth) { return (depth + 1) / 2; }

std::atomic<bool> emulating{false};

// How a product is cut: panels of `rows` rows of A by panels of kGemm16Cols columns of B, a kernel
// call for each; blocks of `depth` values of k, `block_rows` rows and `block_cols` columns packed
// at a time. The vector kernels' 12 x 32 tile; AMX's tiles take 16 rows, and longer blocks of k keep
// their sums in the tiles longer (Note [bf16 products on AMX], gemm16.inl).
struct Blocking {
  std::size_t rows, depth, block_rows, block_cols;
};
constexpr Blocking kVectorBlocking{kGemm16Rows, kGemm16Depth, 8 * kGemm16Rows, 16 * kGemm16Cols};
constexpr Blocking kTileBlocking{16, 1024, 64, 128};

std::size_t a_block_words(const Blocking& by, std::size_t m, std::size_t k) {
  return aligned_floats(round_up(std::min(m, by.block_rows), by.rows) * pairs_of(std::min(k, by.depth)));
}
std::size_t b_block_words(const Blocking& by, std::size_t n, std::size_t k) {
  return aligned_floats(round_up(std::min(n, by.block_cols), kGemm16Cols) * pairs_of(std::min(k, by.depth)));
}

std::size_t blocks_words(const Blocking& by, std::size_t m, std::size_t n, std::size_t k, bool a_packed,
                         bool b_packed) {
  return (a_packed ? 0 : a_block_words(by, m, k)) + (b_packed ? 0 : b_block_words(by, n, k));
}

// Note [The narrow side as B]: the kernel's tile is 12 (or 16) rows by 32 columns, so a product
// with fewer columns than rows (a 3x3 convolution of one channel: dw[32 x 9] += dy col^T)
// computes mostly padding. Where neither operand comes packed, C^T = B^T A^T gives the same bits
// (every element sums the same products in the same order); it is taken where it computes under
// three quarters of the padded tiles, since C^T's tiles are stored element by element.
bool swapped(const Blocking& by, std::size_t m, std::size_t n, bool a_packed, bool b_packed) {
  return !a_packed && !b_packed &&
         4 * round_up(n, by.rows) * round_up(m, kGemm16Cols) < 3 * round_up(m, by.rows) * round_up(n, kGemm16Cols);
}

std::size_t packing_words(const Blocking& by, std::size_t m, std::size_t n, std::size_t k, bool a_packed,
                          bool b_packed) {
  return swapped(by, m, n, a_packed, b_packed) ? blocks_words(by, n, m, k, a_packed, b_packed)
                                               : blocks_words(by, m, n, k, a_packed, b_packed);
}

}  // namespace

}  // namespace cnn::cpu

#define CNN_ISA_KERNELS "backends/cpu/detail/gemm16.inl"
#define CNN_ISA_REGION 0
#include "backends/cpu/detail/isa_region.hpp"
#define CNN_ISA_REGION 2
#include "backends/cpu/detail/isa_region.hpp"
#define CNN_ISA_REGION 3
#include "backends/cpu/detail/isa_region.hpp"
#define CNN_ISA_REGION 4
#include "backends/cpu/detail/isa_region.hpp"

namespace cnn::cpu {

bool bf16_instructions() { return region_for(CpuIsa::avx512_amx) >= CpuIsa::avx512_bf16; }
bool bf16_tiles() { return region_for(CpuIsa::avx512_amx) >= CpuIsa::avx512_amx; }
bool fp16_instructions() { return region_for(CpuIsa::avx512_amx) >= CpuIsa::avx512; }

namespace {

// One region's entry points (gemm16.inl). pack packs A (a_operand) or B whole.
struct Region {
  void (*multiply)(ValueFormat format, bool native, std::size_t m, std::size_t n, std::size_t k, Operand16 a,
                   Operand16 b, RowsOf16 b_rows, GemmOutput c, Packing packing);
  void (*pack)(ValueFormat format, bool native, int threads, const GemmOperand& x, bool a_operand, std::size_t count,
               std::size_t k, std::uint32_t* packed);
};

// The region for the host's instructions and the format: fp16's native kernel is AVX-512F's, in
// the AVX-512 region alone (in_format, gemm16.inl).
Region region_of(ValueFormat format) {
  const CpuIsa host = region_for(CpuIsa::avx512_amx);
  switch (format == ValueFormat::fp16 && host >= CpuIsa::avx512_bf16 ? CpuIsa::avx512 : host) {
#if CNN_ISA_REGIONS
    case CpuIsa::avx512_amx: return {isa_avx512_amx::products16::multiply, isa_avx512_amx::products16::pack};
    case CpuIsa::avx512_bf16: return {isa_avx512_bf16::products16::multiply, isa_avx512_bf16::products16::pack};
    case CpuIsa::avx512: return {isa_avx512::products16::multiply, isa_avx512::products16::pack};
#endif
    default: return {isa_portable::products16::multiply, isa_portable::products16::pack};
  }
}

// On the region's instructions, unless a Gemm16Emulation lives.
bool native() { return !emulating.load(std::memory_order_relaxed); }

// How the region cuts a product in `format` (on_tiles, gemm16.inl).
const Blocking& blocking_of(ValueFormat format) {
  return format == ValueFormat::bf16 && native() && bf16_tiles() ? kTileBlocking : kVectorBlocking;
}

// The most of words(blocking) over the blockings this host's products may run on: a size that
// holds for either format, with or without the emulation.
template <class Words>
std::size_t most_words(Words&& words) {
  const std::size_t vectors = words(kVectorBlocking);
  return bf16_tiles() ? std::max(vectors, words(kTileBlocking)) : vectors;
}

}  // namespace

Gemm16Emulation::Gemm16Emulation() { emulating = true; }
Gemm16Emulation::~Gemm16Emulation() { emulating = false; }

std::size_t packed16_a_words(std::size_t m, std::size_t k) {
  return most_words([&](const Blocking& by) { return round_up(m, by.rows) * pairs_of(k); });
}
std::size_t packed16_b_words(std::size_t k, std::size_t n) { return round_up(n, kGemm16Cols) * pairs_of(k); }

void pack16_a(ValueFormat format, int threads, std::size_t m, std::size_t k, GemmOperand a, std::uint32_t* packed) {
  require_16bit("pack16_a", format);
  region_of(format).pack(format, native(), threads, a, true, m, k, packed);
}
void pack16_b(ValueFormat format, int threads, std::size_t k, std::size_t n, GemmOperand b, std::uint32_t* packed) {
  require_16bit("pack16_b", format);
  region_of(format).pack(format, native(), threads, b, false, n, k, packed);
}

std::size_t gemm16_packing_floats(std::size_t m, std::size_t n, std::size_t k, bool a_packed, bool b_packed) {
  return most_words([&](const Blocking& by) { return packing_words(by, m, n, k, a_packed, b_packed); });
}

void gemm16(ValueFormat format, std::size_t m, std::size_t n, std::size_t k, Operand16 a, Operand16 b, GemmOutput c,
            Packing packing) {
  require_16bit("gemm16", format);
  region_of(format).multiply(format, native(), m, n, k, a, b, {}, c, packing);
}
void gemm16(ValueFormat format, std::size_t m, std::size_t n, std::size_t k, Operand16 a, RowsOf16 b, GemmOutput c,
            Packing packing) {
  require_16bit("gemm16", format);
  if (!a.packed || !b.row) throw std::logic_error("gemm16: B by rows needs its rows and an A packed whole");
  region_of(format).multiply(format, native(), m, n, k, a, {}, b, c, packing);
}

namespace {

// How parallel_gemm16 splits C's rows: at whole panels, so that a packed A's panels stay whole.
struct RowSplit {
  std::size_t panels;
  int count;
  RowSplit(const Blocking& by, int threads, std::size_t m)
      : panels((m + by.rows - 1) / by.rows), count(range_threads(threads, panels)) {}
};

// Each thread's packing for the rows parallel_gemm16 gives it (which may be swapped apart).
std::size_t per_thread_packing(const Blocking& by, const RowSplit& split, std::size_t m, std::size_t n, std::size_t k,
                               bool a_packed, bool b_packed) {
  std::size_t most = 0;
  for (int t = 0; t < split.count; ++t) {
    const std::size_t row0 = range_begin(split.panels, t, split.count) * by.rows;
    const std::size_t rows = std::min(m, range_begin(split.panels, t + 1, split.count) * by.rows) - row0;
    most = std::max(most, packing_words(by, rows, n, k, a_packed, b_packed));
  }
  return most;
}

}  // namespace

std::size_t parallel_gemm16_packing_floats(int threads, std::size_t m, std::size_t n, std::size_t k, bool a_packed,
                                           bool b_packed) {
  return most_words([&](const Blocking& by) {
    const RowSplit split(by, threads, m);
    return static_cast<std::size_t>(split.count) * per_thread_packing(by, split, m, n, k, a_packed, b_packed);
  });
}

void parallel_gemm16(ValueFormat format, int threads, std::size_t m, std::size_t n, std::size_t k, Operand16 a,
                     Operand16 b, GemmOutput c, Packing packing) {
  const Blocking& by = blocking_of(format);
  const RowSplit split(by, threads, m);
  const std::size_t per_thread = per_thread_packing(by, split, m, n, k, a.packed, b.packed);
  parallel_ranges(split.count, split.panels, [&](int t, std::size_t begin, std::size_t end) {
    const std::size_t row0 = begin * by.rows, rows = std::min(m, end * by.rows) - row0;
    Operand16 rows_of_a = a;
    if (a.packed) rows_of_a.first_line += row0;
    else rows_of_a.stored.data += a.stored.transposed ? row0 : row0 * a.stored.stride;
    GemmOutput rows_of_c = c;
    rows_of_c.data += row0 * c.stride;
    gemm16(format, rows, n, k, rows_of_a, b, rows_of_c,
           Packing{packing.data + static_cast<std::size_t>(t) * per_thread, per_thread});
  });
}

}  // namespace cnn::cpu
