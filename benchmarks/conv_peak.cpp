// conv_peak: the CPU's convolutions of real networks against the host's measured peak, and,
// with --onednn, against oneDNN's.
//
// First measures the peak of the multiply-add instructions on --threads threads: fp32 fused
// multiply-adds (AVX-512, else AVX2 + FMA), where the host has AVX512-BF16 bf16 dot products
// (vdpbf16ps), and where it has AMX the tiles' (tdpbf16ps), each thread running independent chains
// in registers. Then takes each
// distinct ordinary convolution (not depthwise or grouped) of the presets named, at the inputs
// and batches given, and times its forward, backward-data and backward-filter passes on the CPU
// backend in fp32 (median of --repeat runs after --warmup), as the network's layers call them.
// GFLOP/s are those of the definition, 2 x out x in x taps x output pixels a pass, whatever the
// algorithm does (Winograd does fewer, and the direct kernels skip the taps on the padding, so
// either can pass the peak); "of peak" divides by the fp32 peak. Each pass is labelled with the
// kernel it runs (direct, winograd or gemm). With --compare, the convolutions that run direct or
// Winograd passes are timed again with both off (im2col + GEMM). One JSON line per pass and per
// peak (--json-out).
//
// --onednn (where CMake found oneDNN: CNN_BENCH_ONEDNN) times oneDNN's convolution primitive
// (fp32, direct, no bias, forward_training / backward_data / backward_weights, its scratchpad in
// user mode, allocated once) on the same inputs and the same number of threads, three ways
// (conv_peak_onednn.hpp): made for NCHW/OIHW tensors as ours are stored ("nchw"); in the layouts
// it prefers with the reorders from and to ours inside each timed call ("reordered"); and its
// best case, the same primitive with its inputs reordered before the clock starts and its output
// left in its layout ("any"). Ours and oneDNN's runs take turns within each repeat (ours, nchw,
// reordered, any, ours, ...) so that another process's load falls on all alike; each is the
// median of --repeat. Each pass's output is checked against ours once (max |oneDNN - ours| /
// max |ours|, ours computed again from a zeroed output: our backward-filter adds into dw) and
// against oneDNN's next run (the same bits?). The pass's JSON line gains onednn_* fields (ms,
// over_ours, impl, scratchpad_bytes, max_rel_diff, repeatable); JSON lines are appended to
// --json-out. oneDNN's OpenMP workers are made to spin no longer than ours before they sleep
// (conv_peak runs itself again with GOMP_SPINCOUNT=2000 unless the caller set a policy), so that
// one left spinning does not take a core from our next run.
//
// --products MxNxK,... times our matrix products alone instead of the networks' convolutions: C =
// A B stored row-major, one thread, in fp32 on each instruction set from AVX2 up that the host has
// and in bf16 on AVX512-BF16 and AMX (conv_peak_products.hpp), "of peak" against one thread's share
// of the fp32 peak.
#include <CLI/CLI.hpp>
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <stdexcept>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <unistd.h>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/cpu_isa.hpp"
#include "backends/cpu/detail/direct_conv.hpp"
#include "backends/cpu/detail/winograd_conv.hpp"
#include "aligned_floats.hpp"
#include "conv_peak_onednn.hpp"
#include "conv_peak_products.hpp"
#include "layers/conv2d.hpp"
#include <cnnengine/cnnengine.hpp>

namespace {

using namespace cnn;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

// ---- The peak ----

constexpr long kPeakSteps = 1 << 22;

// The sum of a vector's lanes (GCC 12's _mm512_reduce_add_ps trips -Wuninitialized in its own header).
CNN_TARGET_AVX512 float lane_sum(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float sum = 0;
  for (const float lane : lanes) sum += lane;
  return sum;
}

// 12 independent chains of fused multiply-adds (more than latency x throughput) per thread.
CNN_TARGET_AVX512 float fp32_chains_avx512(long steps) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-4f);
  for (long s = 0; s < steps; ++s)
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  for (int i = 1; i < 12; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  return lane_sum(acc[0]);
}
CNN_TARGET_AVX2 float fp32_chains_avx2(long steps) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-4f);
  for (long s = 0; s < steps; ++s)
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  for (int i = 1; i < 12; ++i) acc[0] = _mm256_add_ps(acc[0], acc[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc[0]);
  return lanes[0];
}
// vdpbf16ps: 32 bf16 products added pairwise into 16 floats, 64 flops an instruction.
CNN_TARGET_AVX512_BF16 float bf16_chains(long steps) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.25f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-4f), _mm512_set1_ps(1e-4f));
  for (long s = 0; s < steps; ++s)
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  for (int i = 1; i < 12; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  return lane_sum(acc[0]);
}
// AMX's tdpbf16ps: a 16 x 16 tile of floats += 16 rows x 32 bf16 by 32 x 16, 16,384 flops an
// instruction, on four sums from two tiles of each operand (a product's tile kernel's shape).
struct alignas(64) AmxShapes {
  std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  std::uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
CNN_TARGET_AVX512_AMX float amx_chains(long steps) {
  static const AmxShapes shapes;
  // Operands of every sign and significand: the tiles run faster on zeros or repeated values (up to
  // 2x on a Sapphire Rapids-class host) than on a network's.
  alignas(64) std::uint16_t operand[16 * 32];
  std::uint32_t state = 12345;
  for (std::uint16_t& value : operand) {
    state = state * 1664525u + 1013904223u;
    value = static_cast<std::uint16_t>(0x3E00u + ((state >> 16) & 0x1FFu) + ((state >> 8) & 0x8000u));
  }
  alignas(64) float sums[16 * 16];
  __asm__ volatile("" ::: "memory");
  _tile_loadconfig(&shapes);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  for (long s = 0; s < steps / 16; ++s) {  // 16 x 12 vdpbf16ps's flops a step, as bf16_chains's
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, sums, 64);
  _tile_release();
  return sums[0];
}

// GFLOP/s of `chains` (flops_per_step a step) on `threads` threads: the best of three runs.
double peak_gflops(int threads, float (*chains)(long), double flops_per_step) {
  double best = 0;
  for (int run = 0; run < 3; ++run) {
    std::vector<std::thread> workers;
    std::vector<float> sink(static_cast<std::size_t>(threads));
    const auto start = Clock::now();
    for (int t = 0; t < threads; ++t) workers.emplace_back([&, t] { sink[static_cast<std::size_t>(t)] = chains(kPeakSteps); });
    for (auto& w : workers) w.join();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, flops_per_step * kPeakSteps * threads / seconds / 1e9);
    if (sink[0] == 12345.f) std::puts("");  // keeps the chains
  }
  return best;
}

// ---- The convolutions ----

using bench::aligned_floats;
using bench::Floats;

// A convolution as a network calls it: its description and the batch's input shape.
struct ConvCall {
  Conv2dDesc d;
  Shape x;
  bool operator<(const ConvCall& o) const {
    return std::make_tuple(d.in_channels, d.out_channels, d.kernel_h, d.stride, d.padding, x[0], x[2], x[3]) <
           std::make_tuple(o.d.in_channels, o.d.out_channels, o.d.kernel_h, o.d.stride, o.d.padding, o.x[0], o.x[2], o.x[3]);
  }
};

// The preset's ordinary convolutions, each with the number of times the network has it.
std::map<ConvCall, int> network_convolutions(const std::string& model, const Shape& input, int batch) {
  std::map<ConvCall, int> calls;
  const Network net = make_network(model, input, 10);
  for (int id = 1; id < net.size(); ++id) {
    const auto* conv = dynamic_cast<const Conv2D*>(net.node(id).layer.get());
    if (conv == nullptr || conv->is_depthwise() || conv->desc().groups > 1) continue;
    const Shape& in = net.node(net.node(id).inputs.at(0)).shape;
    ++calls[ConvCall{conv->desc(), Shape{batch, in[0], in[1], in[2]}}];
  }
  return calls;
}

// Median seconds of each of `fns` over `repeat` rounds, after `warmup` rounds: within a round
// the fns take turns (ours, then oneDNN's), so that another process's load falls on all alike.
std::vector<double> median_seconds(int warmup, int repeat, const std::vector<std::function<void()>>& fns) {
  for (int i = 0; i < warmup; ++i)
    for (const auto& fn : fns) fn();
  std::vector<std::vector<double>> times(fns.size());
  for (int i = 0; i < repeat; ++i)
    for (std::size_t f = 0; f < fns.size(); ++f) {
      const auto start = Clock::now();
      fns[f]();
      times[f].push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
  std::vector<double> medians;
  for (auto& t : times) {
    std::sort(t.begin(), t.end());
    medians.push_back(t[t.size() / 2]);
  }
  return medians;
}

// oneDNN's run of a pass in one of its layouts (--onednn), and how far its output is from ours.
struct OnednnRun {
  double seconds = 0;
  std::size_t scratchpad_bytes = 0;
  std::string impl;
  double max_rel_diff = 0;  // max |oneDNN - ours| / max |ours|
  bool repeatable = false;  // the same bits from a run after the timed ones
};
// The JSON names of the layouts (bench::OnednnLayout), in its order.
constexpr const char* kOnednnLayouts[] = {"onednn", "onednn_reordered", "onednn_any"};

struct PassTime {
  double seconds = 0;              // ours
  std::vector<OnednnRun> onednn;  // one a layout, with --onednn
};
struct PassTimes {
  PassTime forward, backward_data, backward_filter;
};

// max |got - want| / max |want| over n values.
[[maybe_unused]] double max_rel_diff(const float* got, const float* want, std::size_t n) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

PassTimes time_passes(CpuBackend& cpu, const ConvCall& call, int warmup, int repeat, [[maybe_unused]] bool onednn) {
  const Conv2dDesc& d = call.d;
  const int ho = (call.x[2] + 2 * d.padding - d.kernel_h) / d.stride + 1,
            wo = (call.x[3] + 2 * d.padding - d.kernel_w) / d.stride + 1;
  const Shape xs = call.x, ys{xs[0], d.out_channels, ho, wo}, ws{d.out_channels, d.in_channels, d.kernel_h, d.kernel_w};
  Floats x = aligned_floats(xs.elements(), 1.f), w = aligned_floats(ws.elements(), 0.1f), y = aligned_floats(ys.elements(), 0.f),
         dy = aligned_floats(ys.elements(), 1.f), dx = aligned_floats(xs.elements(), 0.f),
         dw = aligned_floats(ws.elements(), 0.f);
  const std::size_t limit = std::numeric_limits<std::size_t>::max();
  const std::size_t bytes = std::max(cpu.conv2d_workspace_bytes(d, xs, ys, ConvPass::forward, limit),
                                     cpu.conv2d_workspace_bytes(d, xs, ys, ConvPass::backward, limit));
  Floats space = aligned_floats(bytes / sizeof(float) + 1, 0.f);
  const Workspace ws_{space.get(), bytes};
  const Tensor tx{x.get(), xs}, tw{w.get(), ws}, ty{y.get(), ys}, tdy{dy.get(), ys}, tdx{dx.get(), xs}, tdw{dw.get(), ws};

  // Ours, and with --onednn oneDNN's in each layout on the same inputs (a, b: see
  // bench::OnednnConv), taking turns; then each oneDNN output against ours (`out`, n floats),
  // which is computed once more from zeros for that: backward-filter adds into dw, as a network's
  // gradients are summed (oneDNN's writes it).
  auto time_pass = [&](const std::function<void()>& ours, [[maybe_unused]] bench::OnednnPass pass,
                       [[maybe_unused]] const float* a, [[maybe_unused]] const float* b,
                       [[maybe_unused]] float* out, [[maybe_unused]] std::size_t n) {
    std::vector<std::function<void()>> fns{ours};
#ifdef CNN_BENCH_ONEDNN
    std::vector<std::unique_ptr<bench::OnednnConv>> peers;
    if (onednn)
      for (const auto layout : {bench::OnednnLayout::nchw, bench::OnednnLayout::reordered, bench::OnednnLayout::any}) {
        peers.push_back(std::make_unique<bench::OnednnConv>(d, xs, ys, pass, layout, a, b));
        fns.push_back([peer = peers.back().get()] { peer->run(); });
      }
#endif
    const std::vector<double> medians = median_seconds(warmup, repeat, fns);
    PassTime t{medians[0], {}};
#ifdef CNN_BENCH_ONEDNN
    if (!peers.empty()) {
      std::fill(out, out + n, 0.f);
      ours();
    }
    Floats theirs = aligned_floats(n, 0.f), again = aligned_floats(n, 0.f);
    for (std::size_t i = 0; i < peers.size(); ++i) {
      peers[i]->output(theirs.get());
      peers[i]->run();
      peers[i]->output(again.get());
      t.onednn.push_back({medians[i + 1], peers[i]->scratchpad_bytes(), peers[i]->implementation(),
                          max_rel_diff(theirs.get(), out, n),
                          std::memcmp(theirs.get(), again.get(), n * sizeof(float)) == 0});
    }
#endif
    return t;
  };
  PassTimes t{};
  t.forward = time_pass([&] { cpu.conv2d_forward(d, tx, tw, Tensor{}, ty, false, ws_); }, bench::OnednnPass::forward,
                        x.get(), w.get(), y.get(), ys.elements());
  t.backward_data = time_pass([&] { cpu.conv2d_backward_data(d, tdy, tw, tdx, false, ws_); },
                              bench::OnednnPass::backward_data, dy.get(), w.get(), dx.get(), xs.elements());
  t.backward_filter = time_pass([&] { cpu.conv2d_backward_filter(d, tx, tdy, tdw, Tensor{}, ws_); },
                                bench::OnednnPass::backward_filter, x.get(), dy.get(), dw.get(), ws.elements());
  return t;
}

Shape parse_shape(const std::string& text) {
  int c = 0, h = 0, w = 0;
  if (std::sscanf(text.c_str(), "%dx%dx%d", &c, &h, &w) != 3 || c < 1 || h < 1 || w < 1)
    throw std::invalid_argument("--inputs: " + text + " is not CxHxW");
  return Shape{c, h, w};
}

std::vector<std::string> split(const std::string& s, char by) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t at; (at = s.find(by, start)) != std::string::npos; start = at + 1) parts.push_back(s.substr(start, at - start));
  parts.push_back(s.substr(start));
  return parts;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"conv_peak: the CPU's convolutions of real networks against the host's measured peak (and oneDNN's: --onednn)"};
  std::string models = "resnet18,resnet50", inputs = "3x64x64:64,3x224x224:16", only, json_out, products;
  int threads = 2, warmup = 1, repeat = 5;
  bool compare = false, onednn = false, no_direct = false;
  app.add_option("--models", models, "presets or network files, comma-separated");
  app.add_option("--inputs", inputs, "CxHxW:batch, comma-separated");
  app.add_option("--threads", threads)->check(CLI::Range(1, 1024));
  app.add_option("--warmup", warmup)->check(CLI::Range(0, 1000));
  app.add_option("--repeat", repeat)->check(CLI::Range(1, 1000));
  app.add_option("--only", only, "the convolutions whose description (as printed) contains this");
  app.add_flag("--compare", compare, "convolutions that run direct or Winograd passes also with both off (im2col + GEMM)");
  app.add_flag("--no-direct", no_direct, "the direct 3x3 kernels off for the whole run (what ran before them)");
  app.add_flag("--onednn", onednn,
               "time oneDNN's convolution primitive on the same passes too (NCHW, reordered in the call, its own "
               "layouts), taking turns with ours");
  app.add_option("--products", products,
                 "MxNxK,...: time these matrix products alone (one thread, each instruction set) instead");
  app.add_option("--json-out", json_out, "append the JSON lines here too");
  CLI11_PARSE(app, argc, argv);
  std::optional<cpu::DirectOff> direct_off;
  if (no_direct) direct_off.emplace();
  std::vector<bench::ProductSize> product_sizes;
  try {
    if (!products.empty())
      for (const std::string& text : split(products, ',')) product_sizes.push_back(bench::parse_product_size(text));
  } catch (const std::invalid_argument& e) {
    std::cerr << "conv_peak: " << e.what() << "\n";
    return 2;
  }
#ifndef CNN_BENCH_ONEDNN
  if (onednn) {
    std::cerr << "conv_peak: --onednn: this conv_peak was built without oneDNN (CMake found no libdnnl-dev; install "
                 "it, e.g. CNN_WITH_TEST_TOOLS=1 bash scripts/install_deps.sh, and configure the build again)\n";
    return 2;
  }
#else
  // oneDNN's OpenMP workers wait for their next job as ours do (backends/cpu/detail/work_pool.cpp):
  // 2000 pauses, then asleep. With libgomp's default (300,000) a worker still spins through our
  // next pass and takes a core from it (measured: our passes 13 to 52 % slower taking turns than
  // alone, within 6 % with 2000: benchmarks/results/cpu_conv_onednn.md). libgomp
  // reads GOMP_SPINCOUNT as it loads, so conv_peak runs itself again with it set, unless the
  // caller chose a policy.
  if (onednn && std::getenv("GOMP_SPINCOUNT") == nullptr && std::getenv("OMP_WAIT_POLICY") == nullptr) {
    setenv("GOMP_SPINCOUNT", "2000", 1);
    char self[4096] = {};
    if (readlink("/proc/self/exe", self, sizeof self - 1) > 0) execv(self, argv);  // its own name in ps, not "exe"
    std::perror("conv_peak: running itself again with GOMP_SPINCOUNT=2000");
    return 2;
  }
#endif

  std::ofstream json_file;
  if (!json_out.empty()) json_file.open(json_out, std::ios::app);
  auto emit = [&](const json& line) {
    std::cout << line.dump() << "\n";
    if (json_file) json_file << line.dump() << "\n";
  };

  CpuBackend cpu(threads);
  const cpu::CpuIsa isa = cpu::isa();
  double fp32_peak = 0, bf16_peak = 0, amx_peak = 0;
  if (isa >= cpu::CpuIsa::avx512) fp32_peak = peak_gflops(threads, fp32_chains_avx512, 12 * 16 * 2);
  else if (isa >= cpu::CpuIsa::avx2) fp32_peak = peak_gflops(threads, fp32_chains_avx2, 12 * 8 * 2);
  if (isa >= cpu::CpuIsa::avx512_bf16) bf16_peak = peak_gflops(threads, bf16_chains, 12 * 32 * 2);
  if (isa >= cpu::CpuIsa::avx512_amx) amx_peak = peak_gflops(threads, amx_chains, 4 * 16 * 16 * 32 * 2 / 16.0);
  json peak{{"kind", "peak"}, {"device", cpu.description()}, {"threads", threads}, {"fp32_gflops", fp32_peak},
            {"bf16_gflops", bf16_peak}, {"amx_bf16_gflops", amx_peak}};
#ifdef CNN_BENCH_ONEDNN
  if (onednn) {
    bench::onednn_set_threads(threads);  // its OpenMP threads; ours are the backend's
    peak["onednn"] = bench::onednn_description();
    for (const char* name : {"GOMP_SPINCOUNT", "OMP_WAIT_POLICY"})
      if (const char* value = std::getenv(name)) peak["onednn"] = peak["onednn"].get<std::string>() + ", " + name + "=" + value;
  }
#endif
  emit(peak);
  std::printf("# peak on %d threads: fp32 %.1f GFLOP/s, bf16 %.1f GFLOP/s, bf16 on AMX's tiles %.1f GFLOP/s (%s)\n",
              threads, fp32_peak, bf16_peak, amx_peak, cpu.description().c_str());
  if (onednn) std::printf("# %s\n", peak["onednn"].get<std::string>().c_str());
  if (!product_sizes.empty()) {
    const double core_peak = fp32_peak / threads;
    std::printf("# products on one thread, \"of peak\" of one thread's share of the fp32 peak\n");
    std::printf("# %-24s %-6s %-12s %9s %8s %7s\n", "product m x n x k", "format", "isa", "ms", "GFLOP/s", "of peak");
    for (const bench::ProductSize& size : product_sizes) {
      const std::string text = std::to_string(size.m) + "x" + std::to_string(size.n) + "x" + std::to_string(size.k);
      const double flops = 2.0 * static_cast<double>(size.m * size.n) * static_cast<double>(size.k);
      for (const bench::ProductTime& t : bench::time_product(size, warmup, repeat)) {
        const double gflops = flops / t.seconds / 1e9;
        std::printf("  %-24s %-6s %-12s %9.3f %8.1f %6.0f%%\n", text.c_str(), t.format.c_str(), t.isa.c_str(),
                    t.seconds * 1e3, gflops, core_peak > 0 ? 100 * gflops / core_peak : 0.0);
        emit(json{{"kind", "product"}, {"m", size.m}, {"n", size.n}, {"k", size.k}, {"format", t.format}, {"isa", t.isa},
                  {"ms", t.seconds * 1e3}, {"gflops", gflops},
                  {"of_thread_fp32_peak", core_peak > 0 ? gflops / core_peak : 0.0}});
      }
    }
    return 0;
  }
  std::printf("# %-10s %-24s %5s %-9s %-16s %9s %8s %7s", "model", "input -> output", "times", "kernel", "pass", "ms",
              "GFLOP/s", "of peak");
  if (onednn)
    std::printf(" | oneDNN ms: %9s %9s %9s %6s  %-20s %s", "nchw", "reordered", "any", "any/ours", "implementation (any)",
                "max rel diff (nchw, any)");
  std::printf("\n");

  for (const std::string& model : split(models, ','))
    for (const std::string& spec : split(inputs, ',')) {
      const auto at = spec.find(':');
      const Shape input = parse_shape(spec.substr(0, at));
      const int batch = std::stoi(spec.substr(at + 1));
      for (const auto& [call, times] : network_convolutions(model, input, batch)) {
        const Conv2dDesc& d = call.d;
        const int ho = (call.x[2] + 2 * d.padding - d.kernel_h) / d.stride + 1,
                  wo = (call.x[3] + 2 * d.padding - d.kernel_w) / d.stride + 1;
        const double flops = 2.0 * batch * d.out_channels * d.in_channels * d.kernel_h * d.kernel_w * ho * wo;
        const std::string shape = Shape{call.x[1], call.x[2], call.x[3]}.str() + " -> " + Shape{d.out_channels, ho, wo}.str() +
                                  " " + std::to_string(d.kernel_h) + "x" + std::to_string(d.kernel_w) + "/" +
                                  std::to_string(d.stride);
        if (shape.find(only) == std::string::npos) continue;
        const bool winograd = cpu::winograd_applies(d, call.x, false, threads);
        // The kernel each pass runs: the direct one where it applies, else Winograd's or the GEMM.
        const auto kernel_of = [&](cpu::DirectPass pass) -> std::string {
          if (cpu::direct_applies(d, call.x, false, pass)) return "direct";
          return winograd ? "winograd" : "gemm";
        };
        const std::array<std::string, 3> ours{kernel_of(cpu::DirectPass::forward),
                                              kernel_of(cpu::DirectPass::backward_data),
                                              kernel_of(cpu::DirectPass::backward_filter)};
        std::vector<std::pair<std::array<std::string, 3>, PassTimes>> runs;
        runs.emplace_back(ours, time_passes(cpu, call, warmup, repeat, onednn));
        if (compare && ours != std::array<std::string, 3>{"gemm", "gemm", "gemm"}) {
          const cpu::WinogradOff winograd_off;
          const cpu::DirectOff direct_off;
          runs.emplace_back(std::array<std::string, 3>{"gemm", "gemm", "gemm"},
                            time_passes(cpu, call, warmup, repeat, false));
        }
        for (const auto& [kernels, t] : runs)
          for (const auto& [pass, p, kernel] :
               {std::tuple{"forward", t.forward, kernels[0]}, std::tuple{"backward_data", t.backward_data, kernels[1]},
                std::tuple{"backward_filter", t.backward_filter, kernels[2]}}) {
            const double gflops = flops / p.seconds / 1e9;
            std::printf("  %-10s %-24s %5d %-9s %-16s %9.3f %8.1f %6.0f%%", model.c_str(), shape.c_str(), times,
                        kernel.c_str(), pass, p.seconds * 1e3, gflops, fp32_peak > 0 ? 100 * gflops / fp32_peak : 0.0);
            json line{{"kind", "conv"}, {"model", model}, {"input", spec}, {"batch", batch}, {"conv", shape},
                      {"times_in_network", times}, {"kernel", kernel}, {"pass", pass}, {"ms", p.seconds * 1e3},
                      {"gflops", gflops}, {"of_fp32_peak", fp32_peak > 0 ? gflops / fp32_peak : 0.0}};
            // onednn_*: made for NCHW; onednn_reordered_*: its layouts, reorders in the call;
            // onednn_any_*: its layouts, no reorders timed. *_over_ours: its time over ours.
            for (std::size_t i = 0; i < p.onednn.size(); ++i) {
              const OnednnRun& r = p.onednn[i];
              const std::string name = kOnednnLayouts[i];
              line[name + "_ms"] = r.seconds * 1e3;
              line[name + "_over_ours"] = r.seconds / p.seconds;
              line[name + "_impl"] = r.impl;
              line[name + "_scratchpad_bytes"] = r.scratchpad_bytes;
              line[name + "_max_rel_diff"] = r.max_rel_diff;
              line[name + "_repeatable"] = r.repeatable;
            }
            if (p.onednn.size() == 3) {
              const OnednnRun &nchw = p.onednn[0], &reordered = p.onednn[1], &best = p.onednn[2];
              std::printf(" | %20.3f %9.3f %9.3f %8.2f  %-20s %.1e %.1e%s", nchw.seconds * 1e3, reordered.seconds * 1e3,
                          best.seconds * 1e3, best.seconds / p.seconds, best.impl.c_str(), nchw.max_rel_diff,
                          best.max_rel_diff,
                          std::max({nchw.max_rel_diff, reordered.max_rel_diff, best.max_rel_diff}) > 1e-3
                              ? "  MISMATCH: not the same convolution?"
                              : "");
              if (!nchw.repeatable || !reordered.repeatable || !best.repeatable)
                std::printf("  oneDNN NOT BIT-IDENTICAL RUN TO RUN");
            }
            std::printf("\n");
            emit(line);
          }
      }
    }
  return 0;
}
