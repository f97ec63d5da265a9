#pragma once
// Which vector instructions the CPU kernels run on, chosen at run time: one build runs at full
// speed on every x86-64 host (Note [Kernels for each instruction set] in isa_region.hpp).

namespace cnn::cpu {

// Lowest first; each has the instructions of the ones before it. avx2 is AVX2 with FMA and F16C;
// avx512 is AVX-512 F, BW, DQ and VL; avx512_bf16 adds AVX512-BF16; avx512_amx adds AMX's tiles and
// their bf16 products (AMX-TILE, AMX-BF16), where the operating system lets the process use them.
enum class CpuIsa { portable, avx2, avx512, avx512_bf16, avx512_amx };
const char* isa_name(CpuIsa isa);

// What the kernels run on now: the best the host has, at most what the environment variable
// CNN_CPU_ISA names (portable, avx2, avx512, avx512_bf16 or avx512_amx: a lower path on purpose;
// any other word is refused with std::invalid_argument), at most a live IsaLimit's.
CpuIsa isa();

// The region (isa_region.hpp) of a family of kernels built for instruction sets up to `most` that
// runs on this host: isa(), at most `most`; portable where the compiler built no regions.
CpuIsa region_for(CpuIsa most);

// While one lives, the kernels run on at most `most` (tests compare the paths). One at a time, and
// around whole runs: a plan's workspaces depend on the kernels chosen.
class IsaLimit {
 public:
  explicit IsaLimit(CpuIsa most);
  ~IsaLimit();
  IsaLimit(const IsaLimit&) = delete;
  IsaLimit& operator=(const IsaLimit&) = delete;
};

}  // namespace cnn::cpu

// 1 where the kernels of isa_region.hpp's regions are built for each instruction set (GCC), 0
// where only the portable ones are (Clang reads neither the regions' pragmas nor their macros).
#if defined(__GNUC__) && !defined(__clang__)
#define CNN_ISA_REGIONS 1
#else
#define CNN_ISA_REGIONS 0
#endif

// One function compiled for an instruction set, called only where isa() reaches it (the same
// instructions as isa_region.hpp's regions).
#define CNN_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define CNN_TARGET_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl")))
#define CNN_TARGET_AVX512_BF16 \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))
#define CNN_TARGET_AVX512_AMX \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,amx-tile,amx-bf16")))
