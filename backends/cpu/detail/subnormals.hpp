#pragma once
// Note [Flushed subnormals]: the CPU kernels run with subnormal floats flushed to zero, as
// oneDNN's kernels and PyTorch's set_flush_denormal(True) do. As a run goes on, values below
// 2^-126 appear in what training computes: AdamW's first moment decays by beta1 each step where
// a gradient is zero (a ReLU that stays off), the softmax of a sample the network is sure of
// gives probabilities below 2^-126, and backward carries them on. An x86 core takes a microcode
// assist for each such operand or result (on Intel some 100 cycles), so a run slowed down after
// its first epoch, more with AdamW than with SGD (benchmarks/cpu_profile counts them:
// benchmarks/results/cpu_profile_*.json).
//
// FTZ writes zero for a subnormal result, DAZ reads a subnormal operand as zero. The setting is
// per thread (MXCSR): the kernels' worker threads set it for good, the calling thread for the
// duration of a kernel's work, after which its own mode is restored. The values differ from IEEE
// arithmetic only where a subnormal would have been, by less than 2^-126.
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define CNN_HAVE_MXCSR 1
#endif

namespace cnn::cpu {

// Sets FTZ and DAZ on this thread for its lifetime, then puts back what was there.
class FlushSubnormals {
 public:
#if defined(CNN_HAVE_MXCSR)
  static constexpr unsigned kFtzDaz = 0x8040;  // bit 15 flush-to-zero, bit 6 denormals-are-zero
  FlushSubnormals() : saved_(_mm_getcsr()) {
    if ((saved_ & kFtzDaz) != kFtzDaz) _mm_setcsr(saved_ | kFtzDaz);
  }
  ~FlushSubnormals() {
    if ((saved_ & kFtzDaz) != kFtzDaz) _mm_setcsr(saved_);
  }
#else
  FlushSubnormals() {}  // other architectures: IEEE subnormals
#endif
  FlushSubnormals(const FlushSubnormals&) = delete;
  FlushSubnormals& operator=(const FlushSubnormals&) = delete;

 private:
  [[maybe_unused]] unsigned saved_ = 0;
};

}  // namespace cnn::cpu
