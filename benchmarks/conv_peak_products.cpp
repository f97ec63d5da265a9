#include "conv_peak_products.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "aligned_floats.hpp"
#include "backends/cpu/detail/cpu_isa.hpp"
#include "backends/cpu/detail/gemm.hpp"
#include "backends/cpu/detail/gemm16.hpp"

namespace cnn::bench {

ProductSize parse_product_size(const std::string& text) {
  ProductSize size;
  std::size_t* dims[] = {&size.m, &size.n, &size.k};
  std::size_t at = 0;
  for (int d = 0; d < 3; ++d) {
    const std::size_t end = d < 2 ? text.find('x', at) : text.size();
    const std::string part = end == std::string::npos ? std::string() : text.substr(at, end - at);
    if (part.empty() || part.size() > 7 || part.find_first_not_of("0123456789") != std::string::npos ||
        std::stoul(part) == 0)
      throw std::invalid_argument("--products: \"" + text + "\" is not MxNxK with each between 1 and 9999999");
    *dims[d] = std::stoul(part);
    at = end + 1;
  }
  constexpr std::size_t kMostFloats = std::size_t{1} << 28;  // 1 GiB an operand
  if (size.m * size.k > kMostFloats || size.k * size.n > kMostFloats || size.m * size.n > kMostFloats)
    throw std::invalid_argument("--products: \"" + text + "\" has an operand over 1 GiB");
  return size;
}

namespace {

template <class Run>
double median_seconds(int warmup, int repeat, Run&& run) {
  for (int i = 0; i < warmup; ++i) run();
  std::vector<double> seconds;
  for (int i = 0; i < repeat; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace

std::vector<ProductTime> time_product(const ProductSize& size, int warmup, int repeat) {
  const auto [m, n, k] = size;
  const Floats a = aligned_floats(m * k, 1.f), b = aligned_floats(k * n, 1.f), c = aligned_floats(m * n, 1.f);
  const std::size_t packing_floats = cpu::gemm_packing_floats(m, n, k);
  const std::size_t packing16_floats = cpu::gemm16_packing_floats(m, n, k, false, false);
  const Floats packing = aligned_floats(std::max(packing_floats, packing16_floats), 1.f);
  std::vector<ProductTime> times;
  for (cpu::CpuIsa isa : {cpu::CpuIsa::avx2, cpu::CpuIsa::avx512}) {
    if (isa > cpu::isa()) continue;
    const cpu::IsaLimit limit(isa);
    times.push_back({"fp32", cpu::isa_name(isa), median_seconds(warmup, repeat, [&] {
                       cpu::gemm(m, n, k, cpu::GemmOperand{a.get(), k}, cpu::GemmOperand{b.get(), n},
                                 cpu::GemmOutput{c.get(), n}, cpu::Packing{packing.get(), packing_floats});
                     })});
  }
  for (cpu::CpuIsa isa : {cpu::CpuIsa::avx512_bf16, cpu::CpuIsa::avx512_amx}) {
    if (isa > cpu::isa()) continue;
    const cpu::IsaLimit limit(isa);
    times.push_back({"bf16", cpu::isa_name(isa), median_seconds(warmup, repeat, [&] {
                       cpu::gemm16(ValueFormat::bf16, m, n, k, {cpu::GemmOperand{a.get(), k}},
                                   {cpu::GemmOperand{b.get(), n}}, cpu::GemmOutput{c.get(), n},
                                   cpu::Packing{packing.get(), packing16_floats});
                     })});
  }
  return times;
}

}  // namespace cnn::bench
