#include "backends/cpu/detail/cpu_isa.hpp"

#include <cpuid.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace cnn::cpu {
namespace {

constexpr CpuIsa kBest = CpuIsa::avx512_bf16;
std::atomic<int> isa_limit{static_cast<int>(kBest)};

// CPUID leaf 1, ECX bit 29 (Clang's __builtin_cpu_supports does not know "f16c").
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
}

CpuIsa host_isa() {
  static const CpuIsa isa = [] {
    __builtin_cpu_init();
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    if (avx512 && __builtin_cpu_supports("avx512bf16")) return CpuIsa::avx512_bf16;
    if (avx512) return CpuIsa::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c()) return CpuIsa::avx2;
    return CpuIsa::portable;
  }();
  return isa;
}

// CNN_CPU_ISA, read once: the most the environment allows.
CpuIsa environment_isa() {
  static const CpuIsa isa = [] {
    const char* named = std::getenv("CNN_CPU_ISA");
    if (named == nullptr || *named == '\0') return kBest;
    for (CpuIsa candidate : {CpuIsa::portable, CpuIsa::avx2, CpuIsa::avx512, CpuIsa::avx512_bf16})
      if (std::strcmp(named, isa_name(candidate)) == 0) return candidate;
    throw std::invalid_argument(std::string("CNN_CPU_ISA is '") + named + "': portable, avx2, avx512 or avx512_bf16");
  }();
  return isa;
}

}  // namespace

const char* isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::avx512_bf16: return "avx512_bf16";
    case CpuIsa::avx512: return "avx512";
    case CpuIsa::avx2: return "avx2";
    case CpuIsa::portable: break;
  }
  return "portable";
}

CpuIsa isa() {
  const auto limit = static_cast<CpuIsa>(isa_limit.load(std::memory_order_relaxed));
  return std::min({host_isa(), environment_isa(), limit});
}

CpuIsa region_for(CpuIsa most) { return CNN_ISA_REGIONS ? std::min(isa(), most) : CpuIsa::portable; }

IsaLimit::IsaLimit(CpuIsa most) { isa_limit = static_cast<int>(most); }
IsaLimit::~IsaLimit() { isa_limit = static_cast<int>(kBest); }

}  // namespace cnn::cpu
