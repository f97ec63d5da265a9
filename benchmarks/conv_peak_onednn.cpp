// conv_peak's oneDNN side: see conv_peak_onednn.hpp. oneDNN 2.x's API (operation descriptor, then
// primitive descriptor, then primitive).
#include "conv_peak_onednn.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <stdexcept>
#include <unordered_map>

namespace cnn::bench {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

memory::desc plain(const Shape& s, tag format) {
  return memory::desc({s[0], s[1], s[2], s[3]}, memory::data_type::f32, format);
}
memory::desc any(const Shape& s) { return plain(s, tag::any); }

// A reorder of `from` into `to`, with its scratchpad in user mode too; none where the layouts agree.
std::optional<dnnl::reorder> reorder_between(const dnnl::engine& engine, const memory& from, const memory& to,
                                             std::size_t& scratch_bytes) {
  if (from.get_desc() == to.get_desc()) return std::nullopt;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::reorder::primitive_desc pd(engine, from.get_desc(), engine, to.get_desc(), attr);
  scratch_bytes = std::max(scratch_bytes, pd.scratchpad_desc().get_size());
  return dnnl::reorder(pd);
}

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

}  // namespace

struct OnednnConv::State {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  OnednnLayout layout{};
  dnnl::primitive conv;
  std::string impl;
  std::size_t conv_scratch_bytes = 0;
  memory scratch;
  // Ours (user_*, NCHW/OIHW; user_out owned here) and the primitive's (a, b, out): the same
  // memory where the layouts agree.
  memory user_a, user_b, user_out, a, b, out;
  std::optional<dnnl::reorder> to_a, to_b, from_out;
  std::unordered_map<int, memory> conv_args;
  int arg_a = 0, arg_b = 0, arg_out = 0;

  // The primitive's memory for `user` in `wanted`'s layout, and the reorder into it.
  memory layout_for(const memory& user, const memory::desc& wanted, std::optional<dnnl::reorder>& into,
                    std::size_t& scratch_bytes) {
    if (user.get_desc() == wanted) return user;
    memory m(wanted, engine);
    into = reorder_between(engine, user, m, scratch_bytes);
    return m;
  }

  void reorder(const std::optional<dnnl::reorder>& r, const memory& from, const memory& to) {
    if (r) r->execute(stream, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}, {DNNL_ARG_SCRATCHPAD, scratch}});
  }
};

OnednnConv::OnednnConv(const Conv2dDesc& d, const Shape& x, const Shape& y, OnednnPass pass, OnednnLayout layout,
                       const float* a, const float* b)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.layout = layout;
  const Shape w{d.out_channels, d.in_channels, d.kernel_h, d.kernel_w};
  const bool is_plain = layout == OnednnLayout::nchw;
  const memory::desc x_md = is_plain ? plain(x, tag::nchw) : any(x), y_md = is_plain ? plain(y, tag::nchw) : any(y),
                     w_md = is_plain ? plain(w, tag::oihw) : any(w);
  const memory::dims strides{d.stride, d.stride}, dilates{d.dilation - 1, d.dilation - 1},
      padding{d.padding, d.padding};
  const auto algo = dnnl::algorithm::convolution_direct;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);

  // Backward passes are made with the forward primitive descriptor as their hint, as oneDNN asks.
  const dnnl::convolution_forward::primitive_desc forward(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, x_md, w_md, y_md, strides, dilates,
                                      padding, padding),
      attr, s.engine);
  // The pass's two inputs and output in our layouts, and in the primitive's.
  memory::desc a_md, b_md, out_md;
  const memory::desc x_plain = plain(x, tag::nchw), y_plain = plain(y, tag::nchw), w_plain = plain(w, tag::oihw);
  memory::desc a_user = x_plain, b_user = w_plain, out_user = y_plain;
  if (pass == OnednnPass::forward) {
    s.conv = dnnl::convolution_forward(forward);
    s.impl = forward.impl_info_str();
    s.conv_scratch_bytes = forward.scratchpad_desc().get_size();
    a_md = forward.src_desc(), b_md = forward.weights_desc(), out_md = forward.dst_desc();
    s.arg_a = DNNL_ARG_SRC, s.arg_b = DNNL_ARG_WEIGHTS, s.arg_out = DNNL_ARG_DST;
  } else if (pass == OnednnPass::backward_data) {
    const dnnl::convolution_backward_data::primitive_desc pd(
        dnnl::convolution_backward_data::desc(algo, x_md, w_md, y_md, strides, dilates, padding, padding), attr,
        s.engine, forward);
    s.conv = dnnl::convolution_backward_data(pd);
    s.impl = pd.impl_info_str();
    s.conv_scratch_bytes = pd.scratchpad_desc().get_size();
    a_md = pd.diff_dst_desc(), b_md = pd.weights_desc(), out_md = pd.diff_src_desc();
    a_user = y_plain, b_user = w_plain, out_user = x_plain;
    s.arg_a = DNNL_ARG_DIFF_DST, s.arg_b = DNNL_ARG_WEIGHTS, s.arg_out = DNNL_ARG_DIFF_SRC;
  } else {
    const dnnl::convolution_backward_weights::primitive_desc pd(
        dnnl::convolution_backward_weights::desc(algo, x_md, w_md, y_md, strides, dilates, padding, padding), attr,
        s.engine, forward);
    s.conv = dnnl::convolution_backward_weights(pd);
    s.impl = pd.impl_info_str();
    s.conv_scratch_bytes = pd.scratchpad_desc().get_size();
    a_md = pd.src_desc(), b_md = pd.diff_dst_desc(), out_md = pd.diff_weights_desc();
    a_user = x_plain, b_user = y_plain, out_user = w_plain;
    s.arg_a = DNNL_ARG_SRC, s.arg_b = DNNL_ARG_DIFF_DST, s.arg_out = DNNL_ARG_DIFF_WEIGHTS;
  }

  s.user_a = memory(a_user, s.engine, const_cast<float*>(a));
  s.user_b = memory(b_user, s.engine, const_cast<float*>(b));
  s.user_out = memory(out_user, s.engine);
  std::size_t scratch_bytes = s.conv_scratch_bytes;
  s.a = s.layout_for(s.user_a, a_md, s.to_a, scratch_bytes);
  s.b = s.layout_for(s.user_b, b_md, s.to_b, scratch_bytes);
  if (out_md == out_user) {
    s.out = s.user_out;
  } else {
    s.out = memory(out_md, s.engine);
    s.from_out = reorder_between(s.engine, s.out, s.user_out, scratch_bytes);
  }
  s.scratch = memory(memory::desc({static_cast<memory::dim>(std::max<std::size_t>(scratch_bytes, 1))},
                                  memory::data_type::u8, tag::x),
                     s.engine);
  s.conv_args = {{s.arg_a, s.a}, {s.arg_b, s.b}, {s.arg_out, s.out}, {DNNL_ARG_SCRATCHPAD, s.scratch}};
  if (layout == OnednnLayout::any) {  // its best case: the inputs in its layouts before the clock starts
    s.reorder(s.to_a, s.user_a, s.a);
    s.reorder(s.to_b, s.user_b, s.b);
    s.stream.wait();
  }
}

OnednnConv::~OnednnConv() = default;

void OnednnConv::run() {
  State& s = *s_;
  const bool reorders = s.layout == OnednnLayout::reordered;
  if (reorders) {
    s.reorder(s.to_a, s.user_a, s.a);
    s.reorder(s.to_b, s.user_b, s.b);
  }
  s.conv.execute(s.stream, s.conv_args);
  if (reorders) s.reorder(s.from_out, s.out, s.user_out);
  s.stream.wait();
}

void OnednnConv::output(float* nchw) const {
  State& s = *s_;
  if (s.layout == OnednnLayout::any) {  // its output is still in its own layout
    s.reorder(s.from_out, s.out, s.user_out);
    s.stream.wait();
  }
  std::memcpy(nchw, s.user_out.get_data_handle(), output_elements() * sizeof(float));
}

std::size_t OnednnConv::output_elements() const { return s_->user_out.get_desc().get_size() / sizeof(float); }
std::size_t OnednnConv::scratchpad_bytes() const { return s_->conv_scratch_bytes; }
std::string OnednnConv::implementation() const { return s_->impl; }

void onednn_set_threads(int threads) { omp_set_num_threads(threads); }

std::string onednn_description() {
  const dnnl_version_t* v = dnnl::version();
  const bool strict = dnnl::get_default_fpmath_mode() == dnnl::fpmath_mode::strict;
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
         " (commit " + (v->hash != nullptr ? v->hash : "?") + "), CPU ISA " + isa_name(dnnl::get_effective_cpu_isa()) +
         (v->cpu_runtime == DNNL_RUNTIME_OMP ? ", OpenMP" : ", not OpenMP") + ", " +
         std::to_string(omp_get_max_threads()) + " threads, fpmath " + (strict ? "strict" : "NOT strict");
}

}  // namespace cnn::bench
