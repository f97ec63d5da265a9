// layer_kernels: the CPU backend's kernels for the modern CNN layers (depthwise, grouped, dilated
// and transposed convolutions, activations, upsampling, concatenation, the channel gate, BatchNorm
// and its ReLU, group and layer normalisation), timed call by call on fixed shapes, with a plain 3x3 convolution as a
// reference point.
//
// Each case runs its forward pass and its backward pass alternately (backward: backward data and
// backward filter for a convolution): one checked run, --warmup more, then --repeat timed ones,
// each pass timed on its own; the median is reported, with GFLOP/s for convolutions and, for the
// rest, GB/s of the least traffic the pass needs (each input read and each output written once).
// benchmarks/peers/torch_layer_kernels.py times the same cases in PyTorch (same names, shapes and
// inputs) and benchmarks/compare_layer_kernels.py runs both.
//
// Inputs are a fixed pattern (pattern() below) that the peer computes too. After the checked run
// each pass reports the sum of squares of what it wrote ("check"), so that the comparison also
// says whether both sides computed the same thing. A kernel that throws (a backend without it) is
// reported as an error for its case; the other cases still run.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"

namespace {

using namespace cnn;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

// The peer's inputs are the same numbers: value i of a tensor filled with `seed` is
// (((i * 2654435761 + seed * 97531) mod 2^32) / 2^32 - 0.5) * scale + offset, in double, rounded
// once to float.
float pattern(std::uint64_t i, std::uint64_t seed, double scale, double offset) {
  const std::uint64_t v = (i * 2654435761ull + seed * 97531ull) % 4294967296ull;
  return static_cast<float>((static_cast<double>(v) / 4294967296.0 - 0.5) * scale + offset);
}

struct FreeFloats {
  void operator()(float* p) const { std::free(p); }
};

// What one case needs: its memory, its two passes, and what each pass writes.
struct Prepared {
  std::string shape;  // "[input] -> [output]", as the peer writes it
  std::function<void()> passes[2];
  std::vector<std::pair<std::string, Tensor>> written[2];  // summarised after the checked run
  std::vector<Tensor> accumulated;                         // parameter gradients: zeroed before it
  double flops[2] = {0, 0}, bytes[2] = {0, 0};
  std::vector<std::unique_ptr<float, FreeFloats>> owned;

  // A tensor of `shape`, 64-byte aligned, holding the pattern of `seed` (0: zeros). `floats`, when
  // larger than the shape's, is what is allocated.
  Tensor tensor(Shape s, std::uint64_t seed, double scale = 1.0, double offset = 0.0, std::size_t floats = 0) {
    floats = std::max(floats, s.elements());
    const std::size_t bytes_rounded = (floats * sizeof(float) + 63) / 64 * 64;
    float* p = static_cast<float*>(std::aligned_alloc(64, bytes_rounded));
    if (!p) throw std::bad_alloc();
    owned.emplace_back(p);
    for (std::size_t i = 0; i < floats; ++i) p[i] = seed ? pattern(i, seed, scale, offset) : 0.f;
    return Tensor{p, s};
  }
  Workspace workspace(std::size_t bytes) {
    if (bytes == 0) return {};
    return {tensor(Shape{static_cast<int>((bytes + 3) / 4)}, 0).data, bytes};
  }
};

std::string arrow(const Shape& in, const Shape& out) { return in.str() + " -> " + out.str(); }
double bytes_of(std::initializer_list<Shape> shapes) {
  double b = 0;
  for (const Shape& s : shapes) b += 4.0 * static_cast<double>(s.elements());
  return b;
}

// Seeds: 1 the input, 2 the weights, 3 the output gradient, 4 the bias, 5 a second input,
// 6 gamma, 7 beta.
void conv_case(Prepared& p, CpuBackend& cpu, int n, int cin, int h, int w, int cout, int k, int stride, int pad,
               int dilation, int groups) {
  const Conv2dDesc d{cin, cout, k, k, stride, pad, dilation, groups};
  const int ho = (h + 2 * pad - dilation * (k - 1) - 1) / stride + 1, wo = (w + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
  const Shape xs{n, cin, h, w}, ys{n, cout, ho, wo}, ws{cout, cin / groups, k, k};
  // Weights and their gradient are allocated as for groups = 1 too: a kernel that ignored
  // `groups` would touch nothing outside them (its check then differs from the peer's).
  const std::size_t ungrouped = static_cast<std::size_t>(cout) * cin * k * k;
  Tensor x = p.tensor(xs, 1), wt = p.tensor(ws, 2, 1.0, 0.0, ungrouped), bias = p.tensor(Shape{cout}, 4);
  Tensor dy = p.tensor(ys, 3), y = p.tensor(ys, 0), dx = p.tensor(xs, 0);
  Tensor dw = p.tensor(ws, 0, 1.0, 0.0, ungrouped), db = p.tensor(Shape{cout}, 0);
  const std::size_t limit = std::numeric_limits<std::size_t>::max();
  const Workspace space = p.workspace(std::max(cpu.conv2d_workspace_bytes(d, xs, ys, ConvPass::forward, limit),
                                               cpu.conv2d_workspace_bytes(d, xs, ys, ConvPass::backward, limit)));
  p.shape = arrow(xs, ys);
  p.passes[0] = [&cpu, d, x, wt, bias, y, space] { cpu.conv2d_forward(d, x, wt, bias, y, false, space); };
  p.passes[1] = [&cpu, d, x, wt, dy, dx, dw, db, space] {
    cpu.conv2d_backward_data(d, dy, wt, dx, false, space);
    cpu.conv2d_backward_filter(d, x, dy, dw, db, space);
  };
  p.written[0] = {{"y", y}};
  p.written[1] = {{"dx", dx}, {"dw", dw}, {"db", db}};
  p.accumulated = {dw, db};
  p.flops[0] = 2.0 * static_cast<double>(ys.elements()) * (cin / groups) * k * k;
  p.flops[1] = 2 * p.flops[0];
  p.bytes[0] = bytes_of({xs, ws, ys});
  p.bytes[1] = bytes_of({ys, ws, xs, xs, ws});
}

// PyTorch's ConvTranspose2d(cin, cout, k, stride) with bias, as the layer computes it: the
// backward data pass of the convolution from cout to cin channels that it is the adjoint of, then
// the bias; backward is that convolution's forward (dx) and backward filter (dw), and the bias's.
// The weights [cin, cout, k, k] are laid out as PyTorch's.
void conv_transpose_case(Prepared& p, CpuBackend& cpu, int n, int cin, int h, int w, int cout, int k, int stride) {
  const Conv2dDesc adjoint{cout, cin, k, k, stride, 0, 1, 1};
  const int ho = (h - 1) * stride + k, wo = (w - 1) * stride + k;
  const Shape xs{n, cin, h, w}, ys{n, cout, ho, wo}, ws{cin, cout, k, k};
  Tensor x = p.tensor(xs, 1), wt = p.tensor(ws, 2), bias = p.tensor(Shape{cout}, 4), dy = p.tensor(ys, 3);
  Tensor y = p.tensor(ys, 0), dx = p.tensor(xs, 0), dw = p.tensor(ws, 0), db = p.tensor(Shape{cout}, 0);
  const std::size_t limit = std::numeric_limits<std::size_t>::max();
  const Workspace space = p.workspace(std::max(cpu.conv2d_workspace_bytes(adjoint, ys, xs, ConvPass::forward, limit),
                                               cpu.conv2d_workspace_bytes(adjoint, ys, xs, ConvPass::backward, limit)));
  p.shape = arrow(xs, ys);
  p.passes[0] = [&cpu, adjoint, x, wt, bias, y, space] {
    cpu.conv2d_backward_data(adjoint, x, wt, y, false, space);
    cpu.add_channel_bias(bias, y);
  };
  p.passes[1] = [&cpu, adjoint, x, wt, dy, dx, dw, db, space] {
    cpu.conv2d_forward(adjoint, dy, wt, Tensor{}, dx, false, space);
    cpu.conv2d_backward_filter(adjoint, dy, x, dw, Tensor{}, space);
    cpu.channel_bias_backward(dy, db);
  };
  p.written[0] = {{"y", y}};
  p.written[1] = {{"dx", dx}, {"dw", dw}, {"db", db}};
  p.accumulated = {dw, db};
  p.flops[0] = 2.0 * static_cast<double>(xs.elements()) * cout * k * k;
  p.flops[1] = 2 * p.flops[0];
  p.bytes[0] = bytes_of({xs, ws, ys});
  p.bytes[1] = bytes_of({ys, ws, xs, xs, ws});
}

// Inputs over [-4, 4): every piece of every activation's curve.
void activation_case(Prepared& p, CpuBackend& cpu, const Shape& s, bool relu, ActivationDesc desc) {
  Tensor x = p.tensor(s, 1, 8.0), dy = p.tensor(s, 3), y = p.tensor(s, 0), dx = p.tensor(s, 0);
  p.shape = arrow(s, s);
  if (relu) {
    p.passes[0] = [&cpu, x, y] { cpu.relu_forward(x, y); };
    p.passes[1] = [&cpu, y, dy, dx] { cpu.relu_backward(y, dy, dx, false); };
  } else {
    p.passes[0] = [&cpu, desc, x, y] { cpu.activation_forward(desc, x, y); };
    const bool from_output = derivative_from_output(desc);
    p.passes[1] = [&cpu, desc, x, y, dy, dx, from_output] {
      cpu.activation_backward(desc, from_output ? Tensor{} : x, from_output ? y : Tensor{}, dy, dx, false);
    };
  }
  p.written[0] = {{"y", y}};
  p.written[1] = {{"dx", dx}};
  p.bytes[0] = bytes_of({s, s});
  p.bytes[1] = bytes_of({s, s, s});
}

void upsample_case(Prepared& p, CpuBackend& cpu, int n, int c, int h, int w, UpsampleMode mode) {
  const UpsampleDesc desc{2, mode};
  const Shape xs{n, c, h, w}, ys{n, c, 2 * h, 2 * w};
  Tensor x = p.tensor(xs, 1), dy = p.tensor(ys, 3), y = p.tensor(ys, 0), dx = p.tensor(xs, 0);
  p.shape = arrow(xs, ys);
  p.passes[0] = [&cpu, desc, x, y] { cpu.upsample_forward(desc, x, y); };
  p.passes[1] = [&cpu, desc, dy, dx] { cpu.upsample_backward(desc, dy, dx, false); };
  p.written[0] = {{"y", y}};
  p.written[1] = {{"dx", dx}};
  p.bytes[0] = p.bytes[1] = bytes_of({xs, ys});
}

// Two inputs of c channels each into one of 2c (the concat layer's copy_channels calls).
void concat_case(Prepared& p, CpuBackend& cpu, int n, int c, int h, int w) {
  const Shape xs{n, c, h, w}, ys{n, 2 * c, h, w};
  Tensor a = p.tensor(xs, 1), b = p.tensor(xs, 5), dy = p.tensor(ys, 3);
  Tensor y = p.tensor(ys, 0), da = p.tensor(xs, 0), db = p.tensor(xs, 0);
  p.shape = arrow(xs, ys) + " (2 inputs)";
  p.passes[0] = [&cpu, a, b, y, c] {
    cpu.copy_channels(a, 0, y, 0, c, false);
    cpu.copy_channels(b, 0, y, c, c, false);
  };
  p.passes[1] = [&cpu, dy, da, db, c] {
    cpu.copy_channels(dy, 0, da, 0, c, false);
    cpu.copy_channels(dy, c, db, 0, c, false);
  };
  p.written[0] = {{"y", y}};
  p.written[1] = {{"da", da}, {"db", db}};
  p.bytes[0] = p.bytes[1] = bytes_of({xs, xs, ys});
}

// The squeeze-and-excitation gate: a [N, C, H, W] times b [N, C, 1, 1].
void multiply_case(Prepared& p, CpuBackend& cpu, int n, int c, int h, int w) {
  const Shape as{n, c, h, w}, bs{n, c, 1, 1};
  Tensor a = p.tensor(as, 1), b = p.tensor(bs, 5), dy = p.tensor(as, 3);
  Tensor y = p.tensor(as, 0), da = p.tensor(as, 0), db = p.tensor(bs, 0);
  p.shape = arrow(as, as) + " (times " + bs.str() + ")";
  p.passes[0] = [&cpu, a, b, y] { cpu.multiply(a, b, y); };
  p.passes[1] = [&cpu, a, b, dy, da, db] { cpu.multiply_backward(a, b, dy, da, false, db, false); };
  p.written[0] = {{"y", y}};
  p.written[1] = {{"da", da}, {"db", db}};
  p.bytes[0] = bytes_of({as, as});
  p.bytes[1] = bytes_of({as, as, as});
}

// GroupNorm(groups, c) with per-channel affine, or LayerNorm over [c, h, w] (per_element).
void group_norm_case(Prepared& p, CpuBackend& cpu, int n, int c, int h, int w, int groups, bool per_element) {
  const GroupNormDesc desc{groups, 1e-5f, per_element};
  const Shape xs{n, c, h, w}, affine = per_element ? Shape{c, h, w} : Shape{c}, stats{n * groups};
  Tensor x = p.tensor(xs, 1), dy = p.tensor(xs, 3), gamma = p.tensor(affine, 6, 0.5, 1.0), beta = p.tensor(affine, 7);
  Tensor y = p.tensor(xs, 0), dx = p.tensor(xs, 0), mean = p.tensor(stats, 0), inv_std = p.tensor(stats, 0);
  Tensor dgamma = p.tensor(affine, 0), dbeta = p.tensor(affine, 0);
  const Workspace space = p.workspace(cpu.group_norm_workspace_bytes(desc, xs));
  p.shape = arrow(xs, xs);
  p.passes[0] = [&cpu, desc, x, gamma, beta, y, mean, inv_std] {
    cpu.group_norm_forward(desc, x, gamma, beta, y, mean, inv_std);
  };
  p.passes[1] = [&cpu, desc, x, dy, gamma, mean, inv_std, dx, dgamma, dbeta, space] {
    cpu.group_norm_backward(desc, x, dy, gamma, mean, inv_std, dx, false, dgamma, dbeta, space);
  };
  p.written[0] = {{"y", y}};
  p.written[1] = {{"dx", dx}, {"dgamma", dgamma}, {"dbeta", dbeta}};
  p.accumulated = {dgamma, dbeta};
  p.bytes[0] = bytes_of({xs, xs, affine, affine});
  p.bytes[1] = bytes_of({xs, xs, xs, affine, affine, affine});
}

// BatchNorm in training and the ReLU after it, in the fused calls a network's plan makes.
void batchnorm_relu_case(Prepared& p, CpuBackend& cpu, int n, int c, int h, int w) {
  const Shape xs{n, c, h, w}, channels{c};
  Tensor x = p.tensor(xs, 1), dy = p.tensor(xs, 3), gamma = p.tensor(channels, 6, 0.5, 1.0),
         beta = p.tensor(channels, 7);
  Tensor y = p.tensor(xs, 0), dx = p.tensor(xs, 0), running_mean = p.tensor(channels, 0),
         running_var = p.tensor(channels, 0), mean = p.tensor(channels, 0), inv_std = p.tensor(channels, 0);
  Tensor dgamma = p.tensor(channels, 0), dbeta = p.tensor(channels, 0);
  p.shape = arrow(xs, xs);
  p.passes[0] = [&cpu, x, gamma, beta, y, running_mean, running_var, mean, inv_std] {
    cpu.batchnorm_relu_forward_training(x, gamma, beta, y, running_mean, running_var, 0.1f, 1e-5f, mean, inv_std);
  };
  p.passes[1] = [&cpu, x, y, dy, gamma, mean, inv_std, dx, dgamma, dbeta] {
    cpu.batchnorm_relu_backward(x, y, dy, gamma, mean, inv_std, 1e-5f, dx, dgamma, dbeta, false);
  };
  p.written[0] = {{"y", y}};
  p.written[1] = {{"dx", dx}, {"dgamma", dgamma}, {"dbeta", dbeta}};
  p.accumulated = {dgamma, dbeta};
  p.bytes[0] = bytes_of({xs, xs, channels, channels});
  p.bytes[1] = bytes_of({xs, xs, xs, xs, channels, channels, channels});
}

struct CaseDef {
  std::string name;
  std::function<void(Prepared&, CpuBackend&)> prepare;
};

// The cases; the peer's list has the same names, shapes and inputs. N is chosen so that a pass
// takes a few milliseconds or more on 2 cores.
std::vector<CaseDef> cases() {
  std::vector<CaseDef> list;
  auto conv = [&](std::string name, int n, int cin, int hw, int cout, int k, int stride, int pad, int dilation, int groups) {
    list.push_back({std::move(name), [=](Prepared& p, CpuBackend& cpu) {
                      conv_case(p, cpu, n, cin, hw, hw, cout, k, stride, pad, dilation, groups);
                    }});
  };
  conv("conv3x3_64x56x56", 8, 64, 56, 64, 3, 1, 1, 1, 1);
  conv("conv3x3_dilation2_64x28x28", 32, 64, 28, 64, 3, 1, 2, 2, 1);
  conv("depthwise3x3_32x112x112", 32, 32, 112, 32, 3, 1, 1, 1, 32);
  conv("depthwise3x3_576x14x14", 64, 576, 14, 576, 3, 1, 1, 1, 576);
  conv("depthwise3x3_960x7x7", 32, 960, 7, 960, 3, 1, 1, 1, 960);
  conv("depthwise3x3_stride2_144x56x56", 32, 144, 56, 144, 3, 2, 1, 1, 144);
  conv("grouped3x3_g4_128x28x28", 32, 128, 28, 128, 3, 1, 1, 1, 4);
  conv("grouped3x3_g32_128x28x28", 32, 128, 28, 128, 3, 1, 1, 1, 32);
  list.push_back({"conv_transpose2x2_stride2_64x28x28", [](Prepared& p, CpuBackend& cpu) {
                    conv_transpose_case(p, cpu, 32, 64, 28, 28, 32, 2, 2);
                  }});
  const Shape elements{16, 64, 32, 32};  // 1,048,576
  list.push_back({"relu_1M", [=](Prepared& p, CpuBackend& cpu) { activation_case(p, cpu, elements, true, {}); }});
  const std::pair<const char*, Activation> activations[] = {
      {"leaky_relu_1M", Activation::leaky_relu}, {"relu6_1M", Activation::relu6},
      {"sigmoid_1M", Activation::sigmoid},       {"tanh_1M", Activation::tanh},
      {"silu_1M", Activation::silu},             {"gelu_1M", Activation::gelu},
      {"hardswish_1M", Activation::hardswish},   {"hardsigmoid_1M", Activation::hardsigmoid}};
  for (const auto& [name, kind] : activations)
    list.push_back({name, [=](Prepared& p, CpuBackend& cpu) {
                      activation_case(p, cpu, elements, false, ActivationDesc{kind, 0.01f});
                    }});
  list.push_back({"upsample_nearest_x2_64x56x56", [](Prepared& p, CpuBackend& cpu) {
                    upsample_case(p, cpu, 8, 64, 56, 56, UpsampleMode::nearest);
                  }});
  list.push_back({"upsample_bilinear_x2_64x56x56", [](Prepared& p, CpuBackend& cpu) {
                    upsample_case(p, cpu, 8, 64, 56, 56, UpsampleMode::bilinear);
                  }});
  list.push_back({"concat_2x64x56x56", [](Prepared& p, CpuBackend& cpu) { concat_case(p, cpu, 8, 64, 56, 56); }});
  list.push_back({"multiply_gate_64x56x56", [](Prepared& p, CpuBackend& cpu) { multiply_case(p, cpu, 8, 64, 56, 56); }});
  list.push_back({"batchnorm_relu_16x28x28", [](Prepared& p, CpuBackend& cpu) {
                    batchnorm_relu_case(p, cpu, 64, 16, 28, 28);
                  }});
  list.push_back({"batchnorm_relu_64x56x56", [](Prepared& p, CpuBackend& cpu) {
                    batchnorm_relu_case(p, cpu, 16, 64, 56, 56);
                  }});
  list.push_back({"group_norm_g32_256x28x28", [](Prepared& p, CpuBackend& cpu) {
                    group_norm_case(p, cpu, 32, 256, 28, 28, 32, false);
                  }});
  list.push_back({"layer_norm_256x28x28", [](Prepared& p, CpuBackend& cpu) {
                    group_norm_case(p, cpu, 32, 256, 28, 28, 1, true);
                  }});
  return list;
}

double sum_of_squares(const Tensor& t) {
  double s = 0;
  for (std::size_t i = 0; i < t.elements(); ++i) s += static_cast<double>(t.data[i]) * t.data[i];
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

const char* const kPassNames[2] = {"forward", "backward"};

// Runs one case; returns its two JSON records (or one with the error).
std::vector<json> run_case(const CaseDef& c, CpuBackend& cpu, int warmup, int repeat) {
  Prepared p;
  std::vector<json> records;
  try {
    c.prepare(p, cpu);
    for (Tensor& t : p.accumulated) std::fill(t.data, t.data + t.elements(), 0.f);
    json checks[2];
    for (int pass = 0; pass < 2; ++pass) {
      p.passes[pass]();
      for (const auto& [name, t] : p.written[pass]) checks[pass][name] = sum_of_squares(t);
    }
    for (int r = 0; r < warmup; ++r)
      for (auto& pass : p.passes) pass();
    std::vector<double> times[2];
    for (int r = 0; r < repeat; ++r)
      for (int pass = 0; pass < 2; ++pass) {
        const auto start = Clock::now();
        p.passes[pass]();
        times[pass].push_back(ms_since(start));
      }
    for (int pass = 0; pass < 2; ++pass) {
      const double ms = median(times[pass]);
      json r{{"case", c.name}, {"shape", p.shape}, {"pass", kPassNames[pass]}, {"ms", ms},
             {"min_ms", *std::min_element(times[pass].begin(), times[pass].end())}, {"reps", repeat},
             {"check", checks[pass]}};
      if (p.flops[pass] > 0) r["gflops"] = p.flops[pass] / ms / 1e6;
      r["flop"] = p.flops[pass];
      r["bytes"] = p.bytes[pass];
      r["gbps"] = p.bytes[pass] / ms / 1e6;
      records.push_back(std::move(r));
    }
  } catch (const std::exception& e) {
    records.push_back(json{{"case", c.name}, {"shape", p.shape}, {"error", e.what()}});
  }
  return records;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"layer_kernels: the CPU backend's kernels for the modern CNN layers, call by call"};
  int threads = 2, repeat = 20, warmup = 3;
  std::string pattern_text = ".*", json_path;
  bool list_only = false;
  app.add_option("--threads", threads, "the backend's threads");
  app.add_option("--case", pattern_text, "run the cases whose name matches this regular expression (search)");
  app.add_option("--repeat", repeat, "timed runs of each pass (the median is reported)")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed runs of each pass after the checked one")->check(CLI::NonNegativeNumber);
  app.add_option("--json", json_path, "also write the records (JSON lines) to this file");
  app.add_flag("--list", list_only, "print the case names and exit");
  CLI11_PARSE(app, argc, argv);

  const std::regex chosen(pattern_text);
  std::vector<CaseDef> selected;
  for (CaseDef& c : cases())
    if (std::regex_search(c.name, chosen)) selected.push_back(std::move(c));
  if (list_only) {
    for (const CaseDef& c : selected) std::cout << c.name << "\n";
    return 0;
  }
  if (selected.empty()) {
    std::cerr << "no case matches " << pattern_text << "\n";
    return 2;
  }

  CpuBackend cpu(threads);
  std::ofstream json_out;
  if (!json_path.empty()) {
    json_out.open(json_path);
    if (!json_out) {
      std::cerr << "cannot write " << json_path << "\n";
      return 2;
    }
  }
  const json header{{"program", "layer_kernels"}, {"backend", cpu.description()}, {"threads", cpu.threads()},
                    {"instruction_set", CpuBackend::instruction_set()}, {"repeat", repeat}, {"warmup", warmup}};
  if (json_out) json_out << header.dump() << "\n";
  std::printf("%s, median of %d after %d warm-up runs\n", cpu.description().c_str(), repeat, warmup);
  std::printf("%-36s %-9s %10s %16s  %s\n", "case", "pass", "ms", "rate", "shape");
  int errors = 0;
  for (const CaseDef& c : selected) {
    for (const json& r : run_case(c, cpu, warmup, repeat)) {
      if (r.contains("error")) {
        ++errors;
        std::printf("%-36s %-9s %10s %16s  %s\n", c.name.c_str(), "-", "-", "-",
                    ("error: " + r["error"].get<std::string>()).c_str());
      } else {
        char rate[32];
        if (r.contains("gflops"))
          std::snprintf(rate, sizeof rate, "%.1f GFLOP/s", r["gflops"].get<double>());
        else
          std::snprintf(rate, sizeof rate, "%.2f GB/s", r["gbps"].get<double>());
        std::printf("%-36s %-9s %10.3f %16s  %s\n", c.name.c_str(), r["pass"].get<std::string>().c_str(),
                    r["ms"].get<double>(), rate, r["shape"].get<std::string>().c_str());
      }
      std::fflush(stdout);
      if (json_out) json_out << r.dump() << "\n" << std::flush;
    }
  }
  if (errors) std::printf("%d case(s) failed\n", errors);
  return 0;
}
