#pragma once
// Matrix products with 16-bit operands and float sums: the CPU's half of --precision bf16 and
// fp16. Each operand value is rounded to the format (bfloat16 or IEEE half, to nearest, ties to
// even) as it is packed; the products, exact in float (bfloat16's 8 significant bits, half's 11:
// at most 22 in a product), are summed in float, as a GPU's tensor cores do. bf16: with
// AVX512-BF16 the inner loop is vdpbf16ps (32 products an instruction, twice what an fp32 FMA
// does), with AMX the tiles' tdpbf16ps (16 x 16 x 32 an instruction; its own bits: Note [bf16
// products on AMX], gemm16.inl). fp16: AVX-512 widens the halves (vcvtph2ps) and multiplies them
// in float, so it is slower than fp32 (a packing and a widening more); it is there to train on the
// CPU as a GPU's fp16 would round, loss scaling included. Without the instructions the same loops
// in plain C++ give vdpbf16ps's bits (Note [One 16-bit product on every host], gemm16.cpp).
//
// Operands as gemm.hpp's: row-major, C[m x n] (+)= op(A)[m x k] * op(B)[k x n]. Packed operands
// are 32-bit words, each two 16-bit values adjacent along k (the even k in the low half), the
// pairs vdpbf16ps multiplies:
//   A: per block of k, per panel of rows:  [pairs][rows], on AMX's tiles [rows][pairs]
//   B: per block of k, per panel of kGemm16Cols columns: [pairs][kGemm16Cols]
// The blocks of k and the panels of A are kGemm16Depth values and kGemm16Rows rows, on AMX's tiles
// 1,024 and 16 (gemm16.cpp's blockings). An operand that many products share (a layer's weights,
// used for every sample) is packed once with pack16_a or pack16_b and passed packed, in the
// product's format and on the same instruction set; the others are packed block by block into
// the product's own packing. `format` is bf16 or fp16 (fp32: a ConfigError).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/cpu/detail/gemm.hpp"
#include <cnnengine/engine/core/backend.hpp>

namespace cnn::cpu {

constexpr std::size_t kGemm16Rows = 12, kGemm16Cols = 32, kGemm16Depth = 256;

// Whether bf16 products run on the processor's bf16 instructions (AVX512-BF16's or AMX's tiles), on
// AMX's tiles, and fp16 ones on AVX-512 (else on their emulation).
bool bf16_instructions();
bool bf16_tiles();
bool fp16_instructions();

// float -> bfloat16 bits, to nearest with ties to even, as vcvtne2ps2bf16 rounds: NaN stays a
// (quiet) NaN, a subnormal becomes a zero of its sign.
inline std::uint16_t to_bf16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0)
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // NaN: kept, made quiet
  if ((bits & 0x7F800000u) == 0) return static_cast<std::uint16_t>((bits >> 16) & 0x8000u);  // zero, subnormal
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}
inline float from_bf16(std::uint16_t bits) {
  const std::uint32_t wide = std::uint32_t{bits} << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

// float -> IEEE half bits, to nearest with ties to even (beyond half's range: infinity of the
// sign), as vcvtps2ph rounds; and back, exactly. Eigen's conversions (F16C where compiled for it).
std::uint16_t to_fp16(float value);
float from_fp16(std::uint16_t bits);

// B made where it is packed, a stretch of one of its rows at a time (a convolution's im2col matrix,
// made from the image): values [first, first + count) of row k of op(B) into `out`.
struct RowsOf16 {
  void (*row)(const void* context, std::size_t k, std::size_t first, std::size_t count, float* out) = nullptr;
  const void* context = nullptr;
};

// An operand given as it is stored (packed here, a block at a time) or packed whole beforehand.
struct Operand16 {
  GemmOperand stored;
  const std::uint32_t* packed = nullptr;  // pack16_a's (A) or pack16_b's (B) words, whole
  std::size_t packed_lines = 0;           // the rows (A) or columns (B) packed: the m or n packed
  std::size_t first_line = 0;             // this product's first row (A) or column (B) in them: a panel's first
};

// The words a whole operand packs into, and the packing. `threads` share the work.
std::size_t packed16_a_words(std::size_t m, std::size_t k);
std::size_t packed16_b_words(std::size_t k, std::size_t n);
void pack16_a(ValueFormat format, int threads, std::size_t m, std::size_t k, GemmOperand a, std::uint32_t* packed);
void pack16_b(ValueFormat format, int threads, std::size_t k, std::size_t n, GemmOperand b, std::uint32_t* packed);

// Words (4 bytes each, as a float) of packing one product needs for the operands not given packed.
std::size_t gemm16_packing_floats(std::size_t m, std::size_t n, std::size_t k, bool a_packed, bool b_packed);

// One thread. `packing` holds at least gemm16_packing_floats(...) floats, 64-byte aligned.
void gemm16(ValueFormat format, std::size_t m, std::size_t n, std::size_t k, Operand16 a, Operand16 b, GemmOutput c,
            Packing packing);
// The same with B made by its rows as it is packed, beside an A packed whole (the packing a B not
// packed takes).
void gemm16(ValueFormat format, std::size_t m, std::size_t n, std::size_t k, Operand16 a, RowsOf16 b, GemmOutput c,
            Packing packing);

// The rows of C split over `threads` threads, each with its own packing, as parallel_gemm.
std::size_t parallel_gemm16_packing_floats(int threads, std::size_t m, std::size_t n, std::size_t k, bool a_packed,
                                              bool b_packed);
void parallel_gemm16(ValueFormat format, int threads, std::size_t m, std::size_t n, std::size_t k, Operand16 a,
                     Operand16 b, GemmOutput c, Packing packing);

// While one lives, every thread's products (and packing) run on the emulation (tests compare it with the
// instructions). One at a time.
class Gemm16Emulation {
 public:
  Gemm16Emulation();
  ~Gemm16Emulation();
  Gemm16Emulation(const Gemm16Emulation&) = delete;
  Gemm16Emulation& operator=(const Gemm16Emulation&) = delete;
};

}  // namespace cnn::cpu
