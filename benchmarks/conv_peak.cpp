// conv_peak: the CPU's convolutions of real networks against the host's measured peak.
//
// First measures the peak of the multiply-add instructions on --threads threads: fp32 fused
// multiply-adds (AVX-512, else AVX2 + FMA) and, where the host has AVX512-BF16, bf16 dot
// products (vdpbf16ps), each thread running independent chains in registers. Then takes each
// distinct ordinary convolution (not depthwise or grouped) of the presets named, at the inputs
// and batches given, and times its forward, backward-data and backward-filter passes on the CPU
// backend in fp32 (median of --repeat runs after --warmup), as the network's layers call them.
// GFLOP/s are those of the direct convolution, 2 x out x in x taps x output pixels a pass,
// whatever the algorithm does (Winograd does fewer, so it can pass the peak); "of peak" divides
// by the fp32 peak. With --compare, 3x3 convolutions at stride 1 are timed again with the
// Winograd passes off (im2col + GEMM). One JSON line per pass and per peak (--json-out).
#include <CLI/CLI.hpp>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <stdexcept>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/cpu_isa.hpp"
#include "backends/cpu/detail/winograd_conv.hpp"
#include "layers/conv2d.hpp"
#include <cnnengine/cnnengine.hpp>

namespace {

using namespace cnn;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

// ---- The peak ----

constexpr long kPeakSteps = 1 << 22;

// 12 independent chains of fused multiply-adds (more than latency x throughput) per thread.
CNN_TARGET_AVX512 float fp32_chains_avx512(long steps) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-4f);
  for (long s = 0; s < steps; ++s)
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  for (int i = 1; i < 12; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  return _mm512_reduce_add_ps(acc[0]);
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
  return _mm512_reduce_add_ps(acc[0]);
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

struct FreeFloats {
  void operator()(float* p) const { std::free(p); }
};
using Floats = std::unique_ptr<float, FreeFloats>;

Floats aligned_floats(std::size_t n, float value) {
  const std::size_t bytes = (std::max<std::size_t>(n, 1) * sizeof(float) + 63) / 64 * 64;
  Floats p(static_cast<float*>(std::aligned_alloc(64, bytes)));
  if (!p) throw std::bad_alloc();
  for (std::size_t i = 0; i < n; ++i) p.get()[i] = value * static_cast<float>((i * 7919) % 1000) / 1000.f - value / 2;
  return p;
}

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

// Median seconds of `repeat` runs of fn, after `warmup`.
template <class Fn>
double median_seconds(int warmup, int repeat, Fn&& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> times;
  for (int i = 0; i < repeat; ++i) {
    const auto start = Clock::now();
    fn();
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

struct PassTimes {
  double forward, backward_data, backward_filter;
};

PassTimes time_passes(CpuBackend& cpu, const ConvCall& call, int warmup, int repeat) {
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
  PassTimes t{};
  t.forward = median_seconds(warmup, repeat, [&] { cpu.conv2d_forward(d, tx, tw, Tensor{}, ty, false, ws_); });
  t.backward_data = median_seconds(warmup, repeat, [&] { cpu.conv2d_backward_data(d, tdy, tw, tdx, false, ws_); });
  t.backward_filter = median_seconds(warmup, repeat, [&] { cpu.conv2d_backward_filter(d, tx, tdy, tdw, Tensor{}, ws_); });
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
  CLI::App app{"conv_peak: the CPU's convolutions of real networks against the host's measured peak"};
  std::string models = "resnet18,resnet50", inputs = "3x64x64:64,3x224x224:16", only, json_out;
  int threads = 2, warmup = 1, repeat = 5;
  bool compare = false;
  app.add_option("--models", models, "presets or network files, comma-separated");
  app.add_option("--inputs", inputs, "CxHxW:batch, comma-separated");
  app.add_option("--threads", threads)->check(CLI::Range(1, 1024));
  app.add_option("--warmup", warmup)->check(CLI::Range(0, 1000));
  app.add_option("--repeat", repeat)->check(CLI::Range(1, 1000));
  app.add_option("--only", only, "the convolutions whose description (as printed) contains this");
  app.add_flag("--compare", compare, "3x3 stride-1 convolutions also with the Winograd passes off");
  app.add_option("--json-out", json_out, "append the JSON lines here too");
  CLI11_PARSE(app, argc, argv);

  std::ofstream json_file;
  if (!json_out.empty()) json_file.open(json_out, std::ios::app);
  auto emit = [&](const json& line) {
    std::cout << line.dump() << "\n";
    if (json_file) json_file << line.dump() << "\n";
  };

  CpuBackend cpu(threads);
  const cpu::CpuIsa isa = cpu::isa();
  double fp32_peak = 0, bf16_peak = 0;
  if (isa >= cpu::CpuIsa::avx512) fp32_peak = peak_gflops(threads, fp32_chains_avx512, 12 * 16 * 2);
  else if (isa >= cpu::CpuIsa::avx2) fp32_peak = peak_gflops(threads, fp32_chains_avx2, 12 * 8 * 2);
  if (isa >= cpu::CpuIsa::avx512_bf16) bf16_peak = peak_gflops(threads, bf16_chains, 12 * 32 * 2);
  emit({{"kind", "peak"}, {"device", cpu.description()}, {"threads", threads}, {"fp32_gflops", fp32_peak},
        {"bf16_gflops", bf16_peak}});
  std::printf("# peak on %d threads: fp32 %.1f GFLOP/s, bf16 %.1f GFLOP/s (%s)\n", threads, fp32_peak, bf16_peak,
              cpu.description().c_str());
  std::printf("# %-10s %-24s %5s %-9s %-16s %9s %8s %7s\n", "model", "input -> output", "times", "kernel", "pass", "ms",
              "GFLOP/s", "of peak");

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
        std::vector<std::pair<std::string, PassTimes>> runs;
        runs.emplace_back(winograd ? "winograd" : "gemm", time_passes(cpu, call, warmup, repeat));
        if (compare && winograd) {
          const cpu::WinogradOff off;
          runs.emplace_back("gemm", time_passes(cpu, call, warmup, repeat));
        }
        for (const auto& [kernel, t] : runs)
          for (const auto& [pass, seconds] : {std::pair{"forward", t.forward}, std::pair{"backward_data", t.backward_data},
                                              std::pair{"backward_filter", t.backward_filter}}) {
            const double gflops = flops / seconds / 1e9;
            std::printf("  %-10s %-24s %5d %-9s %-16s %9.3f %8.1f %6.0f%%\n", model.c_str(), shape.c_str(), times,
                        kernel.c_str(), pass, seconds * 1e3, gflops, fp32_peak > 0 ? 100 * gflops / fp32_peak : 0.0);
            emit({{"kind", "conv"}, {"model", model}, {"input", spec}, {"batch", batch}, {"conv", shape},
                  {"times_in_network", times}, {"kernel", kernel}, {"pass", pass}, {"ms", seconds * 1e3},
                  {"gflops", gflops}, {"of_fp32_peak", fp32_peak > 0 ? gflops / fp32_peak : 0.0}});
          }
      }
    }
  return 0;
}
