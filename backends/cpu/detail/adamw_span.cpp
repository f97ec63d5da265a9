// AdamW's update over a span (adamw_span.hpp): the loop of adamw_span.inl on the host's widest
// vectors (the x86-64 baseline's 4 lanes were a twentieth of small's training step).
#include "backends/cpu/detail/adamw_span.hpp"

#include <immintrin.h>

#include <cmath>

#include "backends/cpu/detail/cpu_isa.hpp"

#define CNN_ISA_KERNELS "backends/cpu/detail/adamw_span.inl"
#define CNN_ISA_REGION 0
#include "backends/cpu/detail/isa_region.hpp"
#define CNN_ISA_REGION 1
#include "backends/cpu/detail/isa_region.hpp"
#define CNN_ISA_REGION 2
#include "backends/cpu/detail/isa_region.hpp"

namespace cnn::cpu {

void adamw_span(const AdamWStep& s, float* p, const float* g, float* m, float* v, std::size_t begin, std::size_t end) {
  switch (region_for(CpuIsa::avx512)) {
#if CNN_ISA_REGIONS
    case CpuIsa::avx512: return isa_avx512::adamw_span(s, p, g, m, v, begin, end);
    case CpuIsa::avx2: return isa_avx2::adamw_span(s, p, g, m, v, begin, end);
#endif
    default: return isa_portable::adamw_span(s, p, g, m, v, begin, end);
  }
}

}  // namespace cnn::cpu
