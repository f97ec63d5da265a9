#pragma once
// conv_peak's oneDNN side (conv_peak --onednn): one pass of one convolution on oneDNN's CPU
// engine, fp32, made once and then run as often as conv_peak times it. Compiled only where CMake
// found oneDNN (CNN_BENCH_ONEDNN); nothing of oneDNN's headers shows here.
#include <cstddef>
#include <memory>
#include <string>

#include <cnnengine/engine/core/backend.hpp>

namespace cnn::bench {

enum class OnednnPass { forward, backward_data, backward_filter };

// How oneDNN's convolution meets tensors stored as our engine stores them (NCHW, weights OIHW).
enum class OnednnLayout {
  nchw,       // a primitive made for NCHW src/dst and OIHW weights, run on them as they are
  reordered,  // a primitive in the layouts it prefers (format_tag::any), the reorders from and to
              // NCHW/OIHW inside each call: what running it on our tensors would cost
  any,        // the same primitive, its inputs reordered once beforehand and its output left in
              // its own layout: oneDNN's best case
};

// The pass's primitive(s), user-mode scratchpad and buffers, all made in the constructor; run()
// is the call conv_peak times. The inputs are ours, read in place: for forward `a` is x and `b`
// the weights; for backward-data `a` is dy and `b` the weights; for backward-filter `a` is x and
// `b` dy. No bias, as in the networks' ordinary convolutions.
class OnednnConv {
 public:
  OnednnConv(const Conv2dDesc& d, const Shape& x, const Shape& y, OnednnPass pass, OnednnLayout layout,
             const float* a, const float* b);
  ~OnednnConv();
  OnednnConv(const OnednnConv&) = delete;
  OnednnConv& operator=(const OnednnConv&) = delete;

  void run();
  // The last run's output (y, dx or dw) in our layout, written into `nchw` (its elements).
  void output(float* nchw) const;
  std::size_t output_elements() const;
  // The convolution primitive's scratchpad (user mode: allocated once, here), in bytes.
  std::size_t scratchpad_bytes() const;
  // oneDNN's name for the implementation it chose (e.g. "brg:avx512_core", "gemm:jit").
  std::string implementation() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// OpenMP's thread count, which oneDNN's CPU engine (Debian's is built on OpenMP) runs on.
void onednn_set_threads(int threads);
// "oneDNN 2.6.3 (commit ...), CPU ISA ..., OpenMP, fpmath strict".
std::string onednn_description();

}  // namespace cnn::bench
