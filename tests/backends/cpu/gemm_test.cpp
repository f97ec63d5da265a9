// The CPU backend's matrix products against a plain triple loop: every layout, overwrite and
// accumulate, sizes around and above the kernels' tiles and blocks, less packing than asked for,
// B given by its packer, no heap allocation on the way, and the same bits on every instruction
// set the host can run.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cpu/detail/cpu_isa.hpp"
#include "backends/cpu/detail/gemm.hpp"
#include "memory/buffer.hpp"
#include "memory/host_resource.hpp"
#include "tests/engine/test_networks.hpp"
#include "tests/heap_counter.hpp"
#include "tests/relative_error.hpp"

using namespace cnn;
using cnn::testing::random_vector;
using cnn::testing::relative_error;

namespace {

struct Case {
  std::size_t m, n, k;
  bool a_transposed, b_transposed, accumulate;
};

// C = (or +=) op(A) op(B), in double. Pointers and strides, not the vectors' indexing: the test
// programs may be unoptimised (the sanitizers' build), and this loop is most of the test's time there.
std::vector<float> reference(const Case& c, const std::vector<float>& a, const std::vector<float>& b, std::vector<float> out) {
  const std::size_t a_row = c.a_transposed ? 1 : c.k, a_step = c.a_transposed ? c.m : 1;  // op(A)[i][p]
  const std::size_t b_col = c.b_transposed ? c.k : 1, b_step = c.b_transposed ? 1 : c.n;  // op(B)[p][j]
  for (std::size_t i = 0; i < c.m; ++i)
    for (std::size_t j = 0; j < c.n; ++j) {
      const float* a_i = a.data() + i * a_row;
      const float* b_j = b.data() + j * b_col;
      double sum = c.accumulate ? out[i * c.n + j] : 0.0;
      for (std::size_t p = 0; p < c.k; ++p) sum += double{a_i[p * a_step]} * b_j[p * b_step];
      out[i * c.n + j] = static_cast<float>(sum);
    }
  return out;
}

void check(const Case& c, std::size_t packing_floats) {
  INFO("m " << c.m << " n " << c.n << " k " << c.k << " A^T " << c.a_transposed << " B^T " << c.b_transposed
            << " accumulate " << c.accumulate << " packing " << packing_floats);
  const auto a = random_vector(c.m * c.k, 1), b = random_vector(c.k * c.n, 2), start = random_vector(c.m * c.n, 3);
  const memory::Buffer packing(memory::host_resource(), packing_floats * sizeof(float), memory::Category::workspace);
  std::vector<float> got = start;
  const long heap_before = testing::heap_allocations();
  cpu::gemm(c.m, c.n, c.k, cpu::GemmOperand{a.data(), c.a_transposed ? c.m : c.k, c.a_transposed},
            cpu::GemmOperand{b.data(), c.b_transposed ? c.k : c.n, c.b_transposed},
            cpu::GemmOutput{got.data(), c.n, c.accumulate}, cpu::Packing{packing.floats(), packing_floats});
  CHECK(testing::heap_allocations() == heap_before);
  CHECK(relative_error(got, reference(c, a, b, start)) < 1e-5);
}

}  // namespace

TEST_CASE("gemm: every layout, overwrite or accumulate, matches a plain loop", "[gemm]") {
  for (bool at : {false, true})
    for (bool bt : {false, true})
      for (bool acc : {false, true})
        for (auto [m, n, k] : {std::tuple<std::size_t, std::size_t, std::size_t>{1, 1, 1}, {3, 5, 7}, {32, 784, 9},
                               {64, 128, 3136}, {300, 517, 700}}) {
          const Case c{m, n, k, at, bt, acc};
          check(c, cpu::gemm_packing_floats(m, n, k));
        }
}

TEST_CASE("gemm: with less packing than it asks for, smaller blocks give the same product", "[gemm]") {
  const Case c{300, 517, 700, false, true, false};
  const std::size_t asked = cpu::gemm_packing_floats(c.m, c.n, c.k);
  check(c, asked / 7 / 16 * 16);
  check(c, 2 * 16 * 16);
}

TEST_CASE("gemm: rows spread over threads give the single-thread product", "[gemm]") {
  const std::size_t m = 67, n = 129, k = 300;
  const auto a = random_vector(m * k, 4), b = random_vector(n * k, 5);
  std::vector<float> one(m * n), four(m * n);
  for (auto [threads, out] : {std::pair{1, &one}, std::pair{4, &four}}) {
    const std::size_t floats = cpu::parallel_gemm_packing_floats(threads, m, n, k);
    const memory::Buffer packing(memory::host_resource(), floats * sizeof(float), memory::Category::workspace);
    cpu::parallel_gemm(threads, m, n, k, cpu::GemmOperand{a.data(), k}, cpu::GemmOperand{b.data(), k, true},
                       cpu::GemmOutput{out->data(), n}, cpu::Packing{packing.floats(), floats});
  }
  CHECK(relative_error(four, one) < 1e-6);
  const Case c{m, n, k, false, true, false};
  CHECK(relative_error(one, reference(c, a, b, std::vector<float>(m * n))) < 1e-5);
}

TEST_CASE("gemm: misaligned packing is refused", "[gemm]") {
  const memory::Buffer packing(memory::host_resource(), 4096, memory::Category::workspace);
  std::vector<float> a(4, 1.f), b(4, 1.f), c(4);
  CHECK_THROWS_AS(cpu::gemm(2, 2, 2, cpu::GemmOperand{a.data(), 2}, cpu::GemmOperand{b.data(), 2},
                            cpu::GemmOutput{c.data(), 2}, cpu::Packing{packing.floats() + 1, 500}),
                  std::logic_error);
}

namespace {

// C = op(A) op(B) on one instruction set, B stored or, with `panels`, packed by a GemmPanels
// that reads the same storage.
struct StoredB {
  cpu::GemmOperand b;
  std::size_t n;
};

void pack_stored(const void* context, std::size_t k0, std::size_t depth, std::size_t j0, std::size_t cols, float* dst) {
  const auto& [b, n] = *static_cast<const StoredB*>(context);
  constexpr std::size_t W = cpu::kGemmCols;
  for (std::size_t c = 0; c < (cols + W - 1) / W * W; ++c)
    for (std::size_t p = 0; p < depth; ++p) {
      const std::size_t j = j0 + c, kk = k0 + p;
      dst[c / W * depth * W + p * W + c % W] =
          j >= n ? 0.f : b.transposed ? b.data[j * b.stride + kk] : b.data[kk * b.stride + j];
    }
}

std::vector<float> product_on(cpu::CpuIsa isa, const Case& c, bool panels) {
  const cpu::IsaLimit limit(isa);
  const auto a = random_vector(c.m * c.k, 6), b = random_vector(c.k * c.n, 7);
  std::vector<float> out = random_vector(c.m * c.n, 8);
  const std::size_t floats = panels ? cpu::gemm_panels_packing_floats(c.m, c.n, c.k) : cpu::gemm_packing_floats(c.m, c.n, c.k);
  const memory::Buffer packing(memory::host_resource(), floats * sizeof(float), memory::Category::workspace);
  const cpu::GemmOperand a_op{a.data(), c.a_transposed ? c.m : c.k, c.a_transposed};
  const cpu::GemmOperand b_op{b.data(), c.b_transposed ? c.k : c.n, c.b_transposed};
  const cpu::GemmOutput c_out{out.data(), c.n, c.accumulate};
  const StoredB stored{b_op, c.n};
  if (panels) cpu::gemm(c.m, c.n, c.k, a_op, cpu::GemmPanels{pack_stored, &stored}, c_out, cpu::Packing{packing.floats(), floats});
  else cpu::gemm(c.m, c.n, c.k, a_op, b_op, c_out, cpu::Packing{packing.floats(), floats});
  return out;
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("gemm: every instruction set the host has gives the portable kernel's bits", "[gemm]") {
  INFO("host: " << cpu::isa_name(cpu::isa()));
  for (auto [m, n, k] : {std::tuple<std::size_t, std::size_t, std::size_t>{1, 1, 1}, {9, 47, 193}, {64, 3136 / 4, 576},
                         {97, 49, 700}})
    for (bool at : {false, true})
      for (bool bt : {false, true})
        for (bool acc : {false, true}) {
          const Case c{m, n, k, at, bt, acc};
          INFO("m " << m << " n " << n << " k " << k << " A^T " << at << " B^T " << bt << " accumulate " << acc);
          const std::vector<float> portable = product_on(cpu::CpuIsa::portable, c, false);
          CHECK(relative_error(portable, reference(c, random_vector(m * k, 6), random_vector(k * n, 7),
                                                   random_vector(m * n, 8))) < 1e-5);
          for (cpu::CpuIsa isa : {cpu::CpuIsa::avx2, cpu::CpuIsa::avx512}) {
            if (isa > cpu::isa()) continue;
            INFO("on " << cpu::isa_name(isa));
            CHECK(same_bits(product_on(isa, c, false), portable));
          }
        }
}

namespace {

// C = (or +=) A B^T on one instruction set into C's rows `stride` floats apart, the floats past
// each row's n and past the last row holding `sentinel`.
std::vector<float> product_in_wider_c(cpu::CpuIsa isa, std::size_t m, std::size_t n, std::size_t k, bool accumulate,
                                      float sentinel) {
  const cpu::IsaLimit limit(isa);
  const std::size_t stride = n + 17;
  const auto a = random_vector(m * k, 9), b = random_vector(n * k, 10);
  std::vector<float> out((m + 1) * stride, sentinel);
  const auto start = random_vector(m * n, 11);
  for (std::size_t i = 0; i < m; ++i) std::copy_n(start.data() + i * n, n, out.data() + i * stride);
  const std::size_t floats = cpu::gemm_packing_floats(m, n, k);
  const memory::Buffer packing(memory::host_resource(), floats * sizeof(float), memory::Category::workspace);
  cpu::gemm(m, n, k, cpu::GemmOperand{a.data(), k}, cpu::GemmOperand{b.data(), k, true},
            cpu::GemmOutput{out.data(), stride, accumulate}, cpu::Packing{packing.floats(), floats});
  return out;
}

}  // namespace

TEST_CASE("gemm: edge tiles write C's elements alone, with every instruction set's bits", "[gemm]") {
  // Every count of a tile's rows (1 to 8) and of its 16-lane vectors (1 to 3, the last one whole or
  // not), C stored or (m far past n: Note [The narrow side as B]) its transpose; what lies around
  // C in memory keeps its value.
  const float sentinel = -123.25f;
  for (std::size_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 100})
    for (std::size_t n : {1, 15, 16, 17, 31, 32, 33, 47, 48, 49, 95})
      for (bool accumulate : {false, true}) {
        const std::size_t k = 5, stride = n + 17;
        INFO("m " << m << " n " << n << " accumulate " << accumulate);
        const std::vector<float> portable = product_in_wider_c(cpu::CpuIsa::portable, m, n, k, accumulate, sentinel);
        std::vector<float> packed_c(m * n);
        for (std::size_t i = 0; i < m; ++i) std::copy_n(portable.data() + i * stride, n, packed_c.data() + i * n);
        CHECK(relative_error(packed_c, reference(Case{m, n, k, false, true, accumulate}, random_vector(m * k, 9),
                                                 random_vector(n * k, 10), random_vector(m * n, 11))) < 1e-5);
        std::size_t untouched = 0;
        for (std::size_t i = 0; i < portable.size(); ++i) untouched += (i % stride >= n || i >= m * stride) &&
                                                                       portable[i] == sentinel;
        CHECK(untouched == portable.size() - m * n);
        for (cpu::CpuIsa isa : {cpu::CpuIsa::avx2, cpu::CpuIsa::avx512}) {
          if (isa > cpu::isa()) continue;
          INFO("on " << cpu::isa_name(isa));
          CHECK(same_bits(product_in_wider_c(isa, m, n, k, accumulate, sentinel), portable));
        }
      }
}

TEST_CASE("gemm: B given by its packer gives the bits of B stored, unswapped", "[gemm]") {
  // 300 x 20 would be swapped with B stored (Note [The narrow side as B]); a packer is never
  // swapped, which sums the same products in the same order.
  for (auto [m, n, k] : {std::tuple<std::size_t, std::size_t, std::size_t>{13, 100, 385}, {300, 20, 50}})
    for (bool bt : {false, true}) {
      const Case c{m, n, k, false, bt, true};
      CHECK(same_bits(product_on(cpu::isa(), c, true), product_on(cpu::isa(), c, false)));
    }
}

TEST_CASE("gemm: the instruction sets are named as CNN_CPU_ISA takes them", "[gemm]") {
  CHECK(std::string(cpu::isa_name(cpu::CpuIsa::portable)) == "portable");
  CHECK(std::string(cpu::isa_name(cpu::CpuIsa::avx2)) == "avx2");
  CHECK(std::string(cpu::isa_name(cpu::CpuIsa::avx512)) == "avx512");
  CHECK(std::string(cpu::isa_name(cpu::CpuIsa::avx512_bf16)) == "avx512_bf16");
  CHECK(std::string(cpu::isa_name(cpu::CpuIsa::avx512_amx)) == "avx512_amx");
  {
    const cpu::IsaLimit limit(cpu::CpuIsa::portable);
    CHECK(cpu::isa() == cpu::CpuIsa::portable);
  }
  CHECK(cpu::isa() >= cpu::CpuIsa::portable);
}

namespace {

// product_on's product with A packed once (pack_shared_a on `threads` threads) and read by the
// SharedA overloads, each with the packing they ask for.
std::vector<float> product_with_shared_a(const Case& c, bool panels, int threads) {
  const auto a = random_vector(c.m * c.k, 6), b = random_vector(c.k * c.n, 7);
  std::vector<float> out = random_vector(c.m * c.n, 8);
  const std::size_t shared = cpu::shared_a_floats(c.m, c.n, c.k, panels),
                    floats = cpu::gemm_shared_a_packing_floats(c.m, c.n, c.k, panels);
  const memory::Buffer packed(memory::host_resource(), shared * sizeof(float), memory::Category::workspace);
  const memory::Buffer packing(memory::host_resource(), floats * sizeof(float), memory::Category::workspace);
  const cpu::GemmOperand a_op{a.data(), c.a_transposed ? c.m : c.k, c.a_transposed};
  const cpu::GemmOperand b_op{b.data(), c.b_transposed ? c.k : c.n, c.b_transposed};
  const cpu::GemmOutput c_out{out.data(), c.n, c.accumulate};
  const StoredB stored{b_op, c.n};
  cpu::pack_shared_a(threads, c.m, c.n, c.k, panels, a_op, packed.floats());  // the first use of `threads` threads starts them
  const long heap_before = testing::heap_allocations();
  const cpu::SharedA shared_a = cpu::pack_shared_a(threads, c.m, c.n, c.k, panels, a_op, packed.floats());
  if (panels)
    cpu::gemm(c.m, c.n, c.k, shared_a, cpu::GemmPanels{pack_stored, &stored}, c_out, cpu::Packing{packing.floats(), floats});
  else cpu::gemm(c.m, c.n, c.k, shared_a, b_op, c_out, cpu::Packing{packing.floats(), floats});
  CHECK(testing::heap_allocations() == heap_before);
  return out;
}

}  // namespace

TEST_CASE("gemm: A packed once gives the bits of A packed by each product", "[gemm]") {
  // Sizes around the tiles, blocks of rows and columns, and blocks of k (192): 97 x 49 and
  // 2048 x 49 are swapped, so A is packed as the products' B.
  for (auto [m, n, k] : {std::tuple<std::size_t, std::size_t, std::size_t>{1, 1, 1}, {9, 47, 193}, {97, 49, 700},
                         {2048, 49, 512}, {130, 3136 / 4, 64}, {300, 20, 385}})
    for (bool at : {false, true})
      for (bool bt : {false, true})
        for (bool panels : {false, true})
          for (int threads : {1, 3}) {
            const Case c{m, n, k, at, bt, bt};
            INFO("m " << m << " n " << n << " k " << k << " A^T " << at << " B^T " << bt << " panels " << panels
                      << " threads " << threads);
            CHECK(same_bits(product_with_shared_a(c, panels, threads), product_on(cpu::isa(), c, panels)));
          }
}

TEST_CASE("gemm: an A packed for other products is refused", "[gemm]") {
  const std::size_t m = 20, n = 30, k = 40;
  const auto a = random_vector(m * k, 1), b = random_vector(k * n, 2);
  std::vector<float> c(m * n);
  const memory::Buffer packed(memory::host_resource(), cpu::shared_a_floats(m, n, k, false) * sizeof(float),
                              memory::Category::workspace);
  const memory::Buffer packing(memory::host_resource(), 1 << 20, memory::Category::workspace);
  const cpu::SharedA shared_a = cpu::pack_shared_a(1, m, n, k, false, cpu::GemmOperand{a.data(), k}, packed.floats());
  const cpu::Packing room{packing.floats(), (1 << 20) / sizeof(float)};
  CHECK_THROWS_WITH(cpu::gemm(m, n + 1, k, shared_a, cpu::GemmOperand{b.data(), n + 1}, cpu::GemmOutput{c.data(), n + 1}, room),
                    Catch::Contains("an A packed for 20 x 30 x 40 products, used in a 20 x 31 x 40 one"));
  const StoredB stored{cpu::GemmOperand{b.data(), n}, n};
  CHECK_THROWS_AS(cpu::gemm(m, n, k, shared_a, cpu::GemmPanels{pack_stored, &stored}, cpu::GemmOutput{c.data(), n}, room),
                  std::logic_error);
}
