#include "conv_peak_products.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "aligned_floats.hpp"
#include "backends/cpu/detail/cpu_isa.hpp"
#include "backends/cpu/detail/gemm.hpp"

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

std::vector<ProductTime> time_product(const ProductSize& size, int warmup, int repeat) {
  const auto [m, n, k] = size;
  const Floats a = aligned_floats(m * k, 1.f), b = aligned_floats(k * n, 1.f), c = aligned_floats(m * n, 1.f);
  const std::size_t packing_floats = cpu::gemm_packing_floats(m, n, k);
  const Floats packing = aligned_floats(packing_floats, 1.f);
  std::vector<ProductTime> times;
  for (cpu::CpuIsa isa : {cpu::CpuIsa::avx2, cpu::CpuIsa::avx512}) {
    if (isa > cpu::isa()) continue;
    const cpu::IsaLimit limit(isa);
    auto run = [&] {
      cpu::gemm(m, n, k, cpu::GemmOperand{a.get(), k}, cpu::GemmOperand{b.get(), n}, cpu::GemmOutput{c.get(), n},
                cpu::Packing{packing.get(), packing_floats});
    };
    for (int i = 0; i < warmup; ++i) run();
    std::vector<double> seconds;
    for (int i = 0; i < repeat; ++i) {
      const auto start = std::chrono::steady_clock::now();
      run();
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(seconds.begin(), seconds.end());
    times.push_back({cpu::isa_name(isa), seconds[seconds.size() / 2]});
  }
  return times;
}

}  // namespace cnn::bench
