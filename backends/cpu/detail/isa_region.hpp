// Compiles a file of kernels once more for one instruction set, in its own namespace. No include
// guard: a kernel file includes this once per instruction set it is built for.
//
// Note [Kernels for each instruction set]: the library is built for the x86-64 baseline (SSE2),
// and a kernel whose speed depends on wider vectors is compiled again for each instruction set
// it uses and chosen when it runs (cpu_isa.hpp's isa()). A kernel source ("*.inl", which no
// target compiles on its own) is included once per instruction set by the .cpp that dispatches
// it, after every header that .cpp needs:
//
//   #define CNN_ISA_KERNELS "backends/cpu/detail/depthwise_blocked.inl"
//   #define CNN_ISA_REGION 0      // portable: namespace isa_portable, CNN_ISA_LEVEL 0
//   #include "backends/cpu/detail/isa_region.hpp"
//   #define CNN_ISA_REGION 2      // avx512: namespace isa_avx512, CNN_ISA_LEVEL 2
//   #include "backends/cpu/detail/isa_region.hpp"
//
// Inside, CNN_ISA names the region's namespace and CNN_ISA_LEVEL is the CpuIsa it is built for
// (the compiler's __AVX512F__ and the like say nothing there: they describe the build). Every
// function the kernel file defines, lambdas included, is compiled for that instruction set
// (#pragma GCC target), and only those: the headers were read before the region began, so no
// inline function of the standard library or Eigen is compiled with instructions a host may lack
// (an -mavx512f translation unit would emit such copies, and the linker may keep them for every
// caller). Clang reads neither the pragma nor the region: its builds (the fuzzers) get the
// portable kernels alone (CNN_ISA_REGIONS is 0). The CPU backend is compiled without identical
// code folding (GCC 12 merged a kernel's copies, then dropped one's stores) and without
// contractions into fused multiply-adds (so that the copies of a kernel round alike unless their
// source says otherwise).
#if !defined(CNN_ISA_KERNELS) || !defined(CNN_ISA_REGION)
#error "isa_region.hpp: define CNN_ISA_KERNELS and CNN_ISA_REGION first"
#endif

#if !defined(CNN_ISA_REGIONS)
#error "isa_region.hpp: include backends/cpu/detail/cpu_isa.hpp first"
#endif

#if CNN_ISA_REGION == 0
#define CNN_ISA isa_portable
#elif CNN_ISA_REGIONS && CNN_ISA_REGION == 1
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#define CNN_ISA isa_avx2
#elif CNN_ISA_REGIONS && CNN_ISA_REGION == 2
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl")
#define CNN_ISA isa_avx512
#elif CNN_ISA_REGIONS && CNN_ISA_REGION == 3
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")
#define CNN_ISA isa_avx512_bf16
#elif CNN_ISA_REGIONS && CNN_ISA_REGION == 4
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,amx-tile,amx-bf16")
#define CNN_ISA isa_avx512_amx
#endif

#if defined(CNN_ISA)
#define CNN_ISA_LEVEL CNN_ISA_REGION
#include CNN_ISA_KERNELS
#undef CNN_ISA_LEVEL
#undef CNN_ISA
#if CNN_ISA_REGION > 0
#pragma GCC pop_options
#endif
#endif
#undef CNN_ISA_REGION
