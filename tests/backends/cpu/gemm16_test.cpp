// The 16-bit products (bfloat16 and half operands) against a plain loop over the rounded operands:
// every layout, operands packed whole or block by block, sizes around the blocks; the roundings
// themselves; the vector instructions against their emulation, to the bit, where the host has
// them; and AMX's tiles against the exact product of the rounded operands, where it has those.
#include "backends/cpu/detail/gemm16.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "backends/cpu/detail/cpu_isa.hpp"
#include "backends/cpu/detail/subnormals.hpp"
#include "memory/buffer.hpp"
#include "memory/host_resource.hpp"
#include "tests/engine/test_networks.hpp"
#include "tests/heap_counter.hpp"
#include "tests/relative_error.hpp"
#include "tests/rounded16.hpp"

using namespace cnn;
using cnn::testing::random_vector;
using cnn::testing::relative_error;
using cnn::testing::rounded16;

namespace {

constexpr ValueFormat kFormats[] = {ValueFormat::bf16, ValueFormat::fp16};

bool instructions(ValueFormat format) {
  return format == ValueFormat::bf16 ? cpu::bf16_instructions() : cpu::fp16_instructions();
}
std::uint32_t bits_of(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
float from_bits(std::uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

struct Case {
  std::size_t m, n, k;
  bool a_transposed, b_transposed, accumulate;
  bool a_packed = false, b_packed = false;
  ValueFormat format = ValueFormat::bf16;
};

// C = (or +=) op(A) op(B) over the operands rounded to the case's format, in double.
std::vector<float> reference(const Case& c, const std::vector<float>& a, const std::vector<float>& b, std::vector<float> out) {
  // The operands rounded once, then read through pointers and strides: the test programs may be
  // unoptimised (the sanitizers' build), where this loop is most of the test's time.
  std::vector<double> a16(a.size()), b16(b.size());
  std::transform(a.begin(), a.end(), a16.begin(), [&](float v) { return double{rounded16(c.format, v)}; });
  std::transform(b.begin(), b.end(), b16.begin(), [&](float v) { return double{rounded16(c.format, v)}; });
  const std::size_t a_row = c.a_transposed ? 1 : c.k, a_step = c.a_transposed ? c.m : 1;  // op(A)[i][p]
  const std::size_t b_col = c.b_transposed ? c.k : 1, b_step = c.b_transposed ? 1 : c.n;  // op(B)[p][j]
  for (std::size_t i = 0; i < c.m; ++i)
    for (std::size_t j = 0; j < c.n; ++j) {
      const double* a_i = a16.data() + i * a_row;
      const double* b_j = b16.data() + j * b_col;
      double sum = c.accumulate ? out[i * c.n + j] : 0.0;
      for (std::size_t p = 0; p < c.k; ++p) sum += a_i[p * a_step] * b_j[p * b_step];
      out[i * c.n + j] = static_cast<float>(sum);
    }
  return out;
}

struct Product {
  std::vector<float> out;
  long heap_allocations = 0;
};

Product run(const Case& c, const std::vector<float>& a, const std::vector<float>& b, std::vector<float> out, int threads = 1) {
  const cpu::GemmOperand stored_a{a.data(), c.a_transposed ? c.m : c.k, c.a_transposed};
  const cpu::GemmOperand stored_b{b.data(), c.b_transposed ? c.k : c.n, c.b_transposed};
  std::vector<std::uint32_t> packed_a(cpu::packed16_a_words(c.m, c.k)), packed_b(cpu::packed16_b_words(c.k, c.n));
  cpu::Operand16 op_a{stored_a}, op_b{stored_b};
  if (c.a_packed) {
    cpu::pack16_a(c.format, threads, c.m, c.k, stored_a, packed_a.data());
    op_a = {stored_a, packed_a.data(), c.m, 0};
  }
  if (c.b_packed) {
    cpu::pack16_b(c.format, threads, c.k, c.n, stored_b, packed_b.data());
    op_b = {stored_b, packed_b.data(), c.n, 0};
  }
  const std::size_t floats = cpu::parallel_gemm16_packing_floats(threads, c.m, c.n, c.k, c.a_packed, c.b_packed);
  const memory::Buffer packing(memory::host_resource(), std::max<std::size_t>(floats, 1) * sizeof(float),
                               memory::Category::workspace);
  const cpu::FlushSubnormals flush;
  const long before = testing::heap_allocations();
  cpu::parallel_gemm16(c.format, threads, c.m, c.n, c.k, op_a, op_b, cpu::GemmOutput{out.data(), c.n, c.accumulate},
                       cpu::Packing{packing.floats(), floats});
  const long allocations = testing::heap_allocations() - before;
  return {out, allocations};
}

}  // namespace

TEST_CASE("to_bf16 rounds to nearest with ties to even, keeps NaN and infinity, flushes subnormals", "[bf16]") {
  CHECK(cpu::to_bf16(1.0f) == 0x3F80);
  CHECK(cpu::to_bf16(from_bits(0x3F808000u)) == 0x3F80);  // a tie, to the even below
  CHECK(cpu::to_bf16(from_bits(0x3F818000u)) == 0x3F82);  // a tie, to the even above
  CHECK(cpu::to_bf16(from_bits(0x3F808001u)) == 0x3F81);  // past the tie
  CHECK(cpu::to_bf16(-2.5f) == 0xC020);
  CHECK(cpu::to_bf16(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(cpu::to_bf16(std::numeric_limits<float>::max()) == 0x7F80);  // rounds up past the largest bf16
  CHECK(std::isnan(cpu::from_bf16(cpu::to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isnan(cpu::from_bf16(cpu::to_bf16(from_bits(0x7F800001u)))));  // a NaN whose payload rounds away
  CHECK(cpu::to_bf16(from_bits(0x00000001u)) == 0x0000);
  CHECK(cpu::to_bf16(from_bits(0x80400000u)) == 0x8000);
  CHECK(cpu::from_bf16(0x4049) == 3.140625f);
}

TEST_CASE("to_fp16 rounds to nearest with ties to even, overflows to infinity, keeps half's subnormals", "[gemm16]") {
  CHECK(cpu::to_fp16(1.0f) == 0x3C00);
  CHECK(cpu::to_fp16(from_bits(0x3F801000u)) == 0x3C00);  // 1 + 2^-11, a tie, to the even below
  CHECK(cpu::to_fp16(from_bits(0x3F803000u)) == 0x3C02);  // 1 + 3 x 2^-11, a tie, to the even above
  CHECK(cpu::to_fp16(65504.f) == 0x7BFF);                 // the largest half
  CHECK(cpu::to_fp16(65519.f) == 0x7BFF);
  CHECK(cpu::to_fp16(65520.f) == 0x7C00);  // halfway to 2^16: to even, which is infinity
  CHECK(cpu::to_fp16(-1e6f) == 0xFC00);
  CHECK(cpu::to_fp16(std::ldexp(1.f, -24)) == 0x0001);  // half's smallest subnormal
  CHECK(cpu::to_fp16(std::ldexp(1.f, -26)) == 0x0000);  // below half of it: zero
  CHECK(cpu::from_fp16(0x0001) == std::ldexp(1.f, -24));
  CHECK(std::isnan(cpu::from_fp16(cpu::to_fp16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(cpu::from_fp16(0x4248) == 3.140625f);
}

TEST_CASE("gemm16: every layout, packed or not, matches a plain loop over the rounded operands, to the same bits",
          "[bf16][gemm16]") {
  for (ValueFormat format : kFormats)
    for (bool at : {false, true})
      for (bool bt : {false, true})
        for (bool acc : {false, true})
          // Around a panel, past a block of rows (96), of columns (512) and of k (256), and narrow
          // enough to be computed as C^T (Note [The narrow side as B]).
          for (auto [m, n, k] : {std::tuple<std::size_t, std::size_t, std::size_t>{1, 1, 1},
                                 {3, 5, 7},
                                 {13, 33, 9},
                                 {64, 196, 288},
                                 {100, 40, 20},
                                 {25, 517, 530},
                                 {40, 9, 300}}) {
            const auto a = random_vector(m * k, 1), b = random_vector(k * n, 2), start = random_vector(m * n, 3);
            const std::vector<float> want = reference(Case{m, n, k, at, bt, acc, false, false, format}, a, b, start);
            std::vector<float> unpacked;  // computed as C^T where that pads less: the same bits
            for (int packed = 0; packed < 4; ++packed) {
              const Case c{m, n, k, at, bt, acc, (packed & 1) != 0, (packed & 2) != 0, format};
              INFO(to_string(format) << " m " << m << " n " << n << " k " << k << " A^T " << at << " B^T " << bt
                                     << " accumulate " << acc << " A packed " << c.a_packed << " B packed "
                                     << c.b_packed);
              const Product got = run(c, a, b, start);
              CHECK(got.heap_allocations == 0);
              CHECK(relative_error(got.out, want) < 1e-5);
              if (packed == 0)
                unpacked = got.out;
              else
                CHECK(got.out == unpacked);
            }
          }
}

TEST_CASE("gemm16: rows spread over threads, a packed A's panels whole, give the single-thread product",
          "[bf16][gemm16]") {
  for (ValueFormat format : kFormats) {
    const Case c{101, 70, 530, false, true, false, true, true, format};
    const auto a = random_vector(c.m * c.k, 4), b = random_vector(c.k * c.n, 5);
    const std::vector<float> zeros(c.m * c.n);
    const Product one = run(c, a, b, zeros, 1), three = run(c, a, b, zeros, 3);
    CHECK(one.out == three.out);
    Case unpacked = c;
    unpacked.a_packed = unpacked.b_packed = false;
    CHECK(run(unpacked, a, b, zeros, 3).out == one.out);
  }
}

TEST_CASE("gemm16: stays within its format's rounding of the fp32 product", "[bf16][gemm16]") {
  for (ValueFormat format : kFormats) {
    const Case c{48, 300, 1152, false, false, false, false, false, format};
    const auto a = random_vector(c.m * c.k, 6), b = random_vector(c.k * c.n, 7);
    const std::vector<float> got = run(c, a, b, std::vector<float>(c.m * c.n)).out;
    // Each bfloat16 operand moves by at most 2^-9 of itself, so each product by about 2^-8: the sum
    // by 2^-8 of the sum of the products' magnitudes. A half moves by 2^-12 (11 significant bits),
    // so the products by about 2^-11; under 2^-14 a half is subnormal and moves by 2^-25 at most.
    const double relative = std::ldexp(1.0, format == ValueFormat::bf16 ? -8 : -11);
    for (std::size_t i = 0; i < c.m; ++i)
      for (std::size_t j = 0; j < c.n; j += 7) {
        double exact = 0, magnitude = 0;
        for (std::size_t p = 0; p < c.k; ++p) {
          exact += double(a[i * c.k + p]) * b[p * c.n + j];
          magnitude += std::fabs(double(a[i * c.k + p]) * b[p * c.n + j]);
        }
        REQUIRE(std::fabs(got[i * c.n + j] - exact) <= magnitude * relative + 1e-6);
      }
  }
}

TEST_CASE("gemm16: the instructions and their emulation give the same bits", "[bf16][gemm16]") {
  // AMX's tiles round otherwise (Note [bf16 products on AMX]; their own test below): vdpbf16ps here.
  const cpu::IsaLimit vectors(cpu::CpuIsa::avx512_bf16);
  for (ValueFormat format : kFormats) {
    INFO(to_string(format));
    if (!instructions(format)) {
      WARN("this build has no " << to_string(format)
                                << " instructions (AVX512-BF16; AVX-512 for fp16): only the emulation runs");
      continue;
    }
    // Rounding: ties, NaN, infinity, subnormals, past half's range and ordinary values, packed both
    // ways. (NaNs are left out for fp16, whose emulation may keep another payload: both are NaN.)
    std::vector<float> values = random_vector(4096, 8);
    for (std::uint32_t special : {0x3F808000u, 0x3F818000u, 0x7F800001u, 0x7FC00000u, 0x7F800000u, 0xFF800000u,
                                  0x7F7FFFFFu, 0x00000001u, 0x80400000u, 0x00800000u, 0x3F7FFFFFu, 0x3F801000u,
                                  0x3F803000u, 0x477FF000u, 0x477FEF00u, 0x33800000u, 0x32800000u, 0x38800000u})
      if (format == ValueFormat::bf16 || !std::isnan(from_bits(special))) values.push_back(from_bits(special));
    if (values.size() % 2) values.push_back(0.5f);
    const std::size_t n = values.size() / 2;
    std::vector<std::uint32_t> native(cpu::packed16_b_words(2, n)), emulated(native.size());
    cpu::pack16_b(format, 1, 2, n, cpu::GemmOperand{values.data(), n}, native.data());
    {
      const cpu::Gemm16Emulation emulation;
      cpu::pack16_b(format, 1, 2, n, cpu::GemmOperand{values.data(), n}, emulated.data());
    }
    CHECK(native == emulated);
    // Products: every layout, with large and small magnitudes mixed so that the order of the adds
    // shows.
    for (bool at : {false, true})
      for (bool bt : {false, true}) {
        const Case c{29, 70, 515, at, bt, true, at, !bt, format};
        auto a = random_vector(c.m * c.k, 9), b = random_vector(c.k * c.n, 10);
        for (std::size_t i = 0; i < a.size(); i += 3) a[i] *= 4096.f;
        const auto start = random_vector(c.m * c.n, 11);
        const Product fast = run(c, a, b, start);
        Product slow;
        {
          const cpu::Gemm16Emulation emulation;
          slow = run(c, a, b, start);
        }
        CHECK(fast.out == slow.out);
      }
  }
}

TEST_CASE("gemm16: bf16 on AMX's tiles is the rounded operands' product within float's rounding of its sums, "
          "the same bits packed or not and on any thread count", "[bf16][gemm16]") {
  if (!cpu::bf16_tiles()) {
    WARN("this host has no AMX tiles (AMX-TILE and AMX-BF16, allowed by the operating system): not run");
    return;
  }
  // Every layout, sizes around a panel, a pair of panels (24 rows), 16 pairs and a block of k, large
  // and small magnitudes mixed.
  for (bool at : {false, true})
    for (bool bt : {false, true})
      for (auto [m, n, k] : {std::tuple<std::size_t, std::size_t, std::size_t>{1, 1, 1},
                             {13, 33, 31},
                             {25, 40, 33},
                             {24, 32, 512},
                             {37, 70, 515},
                             {100, 9, 300}}) {
        auto a = random_vector(m * k, 12), b = random_vector(k * n, 13);
        for (std::size_t i = 0; i < a.size(); i += 3) a[i] *= 4096.f;
        const auto start = random_vector(m * n, 14);
        const Case c{m, n, k, at, bt, true};
        INFO("m " << m << " n " << n << " k " << k << " A^T " << at << " B^T " << bt);
        // The exact sum of the rounded operands' products, and a bound on float's rounding of it: a
        // rounding of up to the sum's magnitude per pair (vdpbf16ps's sums round twice a pair).
        const std::vector<float> exact = reference(c, a, b, start);
        const std::size_t a_row = at ? 1 : k, a_step = at ? m : 1, b_col = bt ? k : 1, b_step = bt ? 1 : n;
        const Product tiles = run(c, a, b, start);
        CHECK(tiles.heap_allocations == 0);
        for (std::size_t i = 0; i < m; ++i)
          for (std::size_t j = 0; j < n; ++j) {
            double magnitude = std::fabs(start[i * n + j]);
            for (std::size_t p = 0; p < k; ++p)
              magnitude += std::fabs(double{cpu::from_bf16(cpu::to_bf16(a[i * a_row + p * a_step]))} *
                                     cpu::from_bf16(cpu::to_bf16(b[j * b_col + p * b_step])));
            const double bound = magnitude * std::ldexp(1.0, -24) * static_cast<double>(k + 2);
            REQUIRE(std::fabs(double{tiles.out[i * n + j]} - exact[i * n + j]) <= bound);
          }
        for (int packed = 1; packed < 4; ++packed) {
          Case p = c;
          p.a_packed = (packed & 1) != 0;
          p.b_packed = (packed & 2) != 0;
          CHECK(run(p, a, b, start).out == tiles.out);
          CHECK(run(p, a, b, start, 3).out == tiles.out);
        }
      }
  // A NaN or an infinity among the operands reaches the sums as in float.
  const Case c{13, 20, 40, false, false, false};
  auto a = random_vector(c.m * c.k, 15), b = random_vector(c.k * c.n, 16);
  a[3] = std::numeric_limits<float>::quiet_NaN();               // row 0
  a[2 * c.k + 5] = std::numeric_limits<float>::infinity();     // row 2, k 5
  const std::vector<float> out = run(c, a, b, std::vector<float>(c.m * c.n)).out;
  for (std::size_t j = 0; j < c.n; ++j) {
    CHECK(std::isnan(out[j]));
    CHECK(std::isinf(out[2 * c.n + j]) == (b[5 * c.n + j] != 0.f && cpu::to_bf16(b[5 * c.n + j]) != 0));
    CHECK(std::isfinite(out[c.n + j]));
  }
}
