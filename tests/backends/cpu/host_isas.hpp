#pragma once
// The instruction sets a test runs the CPU kernels on: each one this host can execute, lowest first
// (a test holds each with cpu::IsaLimit). avx512_bf16 changes only the 16-bit products, so it is
// left to their own tests.
#include <vector>

#include "backends/cpu/detail/cpu_isa.hpp"

namespace cnn::testing {

inline std::vector<cpu::CpuIsa> host_isas() {
  std::vector<cpu::CpuIsa> isas;
  for (cpu::CpuIsa isa : {cpu::CpuIsa::portable, cpu::CpuIsa::avx2, cpu::CpuIsa::avx512})
    if (isa <= cpu::isa()) isas.push_back(isa);
  return isas;
}

}  // namespace cnn::testing
