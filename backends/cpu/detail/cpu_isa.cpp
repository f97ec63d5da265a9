#include "backends/cpu/detail/cpu_isa.hpp"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace cnn::cpu {
namespace {

constexpr CpuIsa kBest = CpuIsa::avx512_amx;
std::atomic<int> isa_limit{static_cast<int>(kBest)};

// CPUID leaf 1, ECX bit 29 (Clang's __builtin_cpu_supports does not know "f16c").
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
}

// AMX-TILE and AMX-BF16 (CPUID leaf 7, EDX bits 24 and 22), the operating system saving the tiles
// (XCR0 bits 17 and 18: read where AVX-512 runs, so XGETBV does), and Linux's leave for this
// process to use them: the tiles' 8 KiB of state are saved only for processes that ask (arch_prctl
// ARCH_REQ_XCOMP_PERM for XTILEDATA); one that uses them without it dies of SIGILL. Linux refuses
// a process whose alternate signal stacks are too small for that state; asking again once it is
// granted is harmless.
bool has_amx() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || (edx & (1u << 24)) == 0 || (edx & (1u << 22)) == 0)
    return false;
  unsigned xcr0_low = 0, xcr0_high = 0;
  __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  if ((xcr0_low & (3u << 17)) != (3u << 17)) return false;
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr long kRequestPermission = 0x1023, kTileData = 18;  // ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
  return syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
#else
  return false;
#endif
}

CpuIsa host_isa() {
  static const CpuIsa isa = [] {
    __builtin_cpu_init();
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    if (avx512 && __builtin_cpu_supports("avx512bf16")) return has_amx() ? CpuIsa::avx512_amx : CpuIsa::avx512_bf16;
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
    for (CpuIsa candidate : {CpuIsa::portable, CpuIsa::avx2, CpuIsa::avx512, CpuIsa::avx512_bf16, CpuIsa::avx512_amx})
      if (std::strcmp(named, isa_name(candidate)) == 0) return candidate;
    throw std::invalid_argument(std::string("CNN_CPU_ISA is '") + named +
                                "': portable, avx2, avx512, avx512_bf16 or avx512_amx");
  }();
  return isa;
}

}  // namespace

const char* isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::avx512_amx: return "avx512_amx";
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
