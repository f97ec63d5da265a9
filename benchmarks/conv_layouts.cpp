// conv_layouts: each convolution of a preset on one device, its three passes timed with NCHW images
// and with channels-last ones (Note [Channels-last images]) where the backend takes them: what a
// step's convolutions would cost in each order, the filter's reordered copy included (Note
// [Filters in channels-last order]); and BatchNorm with the ReLU after it on each convolution's
// output, forward and backward, its values 16-bit where the backend stores them so. One line a
// convolution and JSON lines, e.g.
//
//   conv_layouts --device cuda --precision bf16 --model resnet18 --input 3x32x32 --batch 256
//
// Each pass runs `--warmup` times, then `--repeat` times with the device synchronised around each
// run; the median is printed. The operands are random, never zeros.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "layers/conv2d.hpp"
#include <cnnengine/cnnengine.hpp>
#include "memory/buffer.hpp"

using namespace cnn;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

// A convolution as the network calls it, and how many times it does.
struct ConvCall {
  Conv2dDesc d;
  Shape x, y;
  auto key() const {
    return std::make_tuple(d.in_channels, d.out_channels, d.kernel_h, d.kernel_w, d.stride, d.padding, d.dilation,
                           d.groups, x[2], x[3]);
  }
  bool operator<(const ConvCall& o) const { return key() < o.key(); }
};

std::map<ConvCall, int> network_convolutions(const std::string& model, const Shape& input, int batch) {
  std::map<ConvCall, int> calls;
  const Network net = make_network(model, input, 10);
  for (int id = 1; id < net.size(); ++id) {
    const auto* conv = dynamic_cast<const Conv2D*>(net.node(id).layer.get());
    if (conv == nullptr) continue;
    const Shape& in = net.node(net.node(id).inputs.at(0)).shape;
    const Shape& out = net.node(id).shape;
    ++calls[ConvCall{conv->desc(), in.batched(batch), out.batched(batch)}];
  }
  return calls;
}

Shape in_order(Shape s, bool channels_last) {
  s.channels_last = channels_last;
  return s;
}

// Device memory holding random values in [-1, 1).
memory::Buffer random_tensor(Backend& backend, std::size_t elements, std::mt19937& rng) {
  memory::Buffer buffer(backend.device_memory(), elements * sizeof(float), memory::Category::activations);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(elements);
  for (float& v : values) v = uniform(rng);
  backend.copy_to_device(values.data(), buffer.data(), buffer.bytes());
  return buffer;
}

double median_milliseconds(Backend& backend, int warmup, int repeat, const std::function<void()>& pass) {
  for (int i = 0; i < warmup; ++i) pass();
  backend.synchronize();
  std::vector<double> ms;
  for (int i = 0; i < repeat; ++i) {
    const auto start = Clock::now();
    pass();
    backend.synchronize();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::nth_element(ms.begin(), ms.begin() + static_cast<long>(ms.size() / 2), ms.end());
  return ms[ms.size() / 2];
}

struct PassTimes {
  double forward = 0, backward_data = 0, backward_filter = 0;
  double sum() const { return forward + backward_data + backward_filter; }
};

PassTimes time_passes(Backend& backend, const ConvCall& call, bool channels_last, int warmup, int repeat) {
  const Shape xs = in_order(call.x, channels_last), ys = in_order(call.y, channels_last);
  const std::size_t weights = static_cast<std::size_t>(call.d.out_channels) *
                              static_cast<std::size_t>(call.d.in_channels / std::max(call.d.groups, 1)) *
                              static_cast<std::size_t>(call.d.kernel_h) * static_cast<std::size_t>(call.d.kernel_w);
  const Shape ws{call.d.out_channels, call.d.in_channels / std::max(call.d.groups, 1), call.d.kernel_h,
                 call.d.kernel_w};
  std::mt19937 rng(1);
  memory::Buffer x = random_tensor(backend, xs.elements(), rng), y = random_tensor(backend, ys.elements(), rng);
  memory::Buffer w = random_tensor(backend, weights, rng), dw = random_tensor(backend, weights, rng);
  memory::Buffer dx = random_tensor(backend, xs.elements(), rng), dy = random_tensor(backend, ys.elements(), rng);
  constexpr std::size_t kLimit = std::size_t{1} << 30;
  const std::size_t bytes = std::max(backend.conv2d_workspace_bytes(call.d, xs, ys, ConvPass::forward, kLimit),
                                     backend.conv2d_workspace_bytes(call.d, xs, ys, ConvPass::backward, kLimit));
  memory::Buffer workspace(backend.device_memory(), std::max<std::size_t>(bytes, 1), memory::Category::workspace);
  const Workspace space{workspace.data(), bytes};
  auto tensor = [](memory::Buffer& b, const Shape& s) { return Tensor{static_cast<float*>(b.data()), s}; };
  PassTimes t;
  t.forward = median_milliseconds(backend, warmup, repeat, [&] {
    backend.conv2d_forward(call.d, tensor(x, xs), tensor(w, ws), Tensor{}, tensor(y, ys), false, space);
  });
  t.backward_data = median_milliseconds(backend, warmup, repeat, [&] {
    backend.conv2d_backward_data(call.d, tensor(dy, ys), tensor(w, ws), tensor(dx, xs), false, space);
  });
  t.backward_filter = median_milliseconds(backend, warmup, repeat, [&] {
    backend.conv2d_backward_filter(call.d, tensor(x, xs), tensor(dy, ys), tensor(dw, ws), Tensor{}, space);
  });
  return t;
}

struct BatchnormTimes {
  double forward = 0, backward = 0;
  double sum() const { return forward + backward; }
};

// BatchNorm + ReLU over a convolution's output y, as a step runs it: x and y 16-bit alone where
// the backend takes values as stored, the gradients floats.
BatchnormTimes time_batchnorm(Backend& backend, const Shape& image, bool channels_last, int warmup, int repeat) {
  const Shape xs = in_order(image, channels_last);
  const auto channels = static_cast<std::size_t>(xs[1]);
  std::mt19937 rng(2);
  memory::Buffer x = random_tensor(backend, xs.elements(), rng), dy = random_tensor(backend, xs.elements(), rng);
  memory::Buffer dx = random_tensor(backend, xs.elements(), rng), y = random_tensor(backend, xs.elements(), rng);
  memory::Buffer gamma = random_tensor(backend, channels, rng), beta = random_tensor(backend, channels, rng);
  memory::Buffer stats = random_tensor(backend, 4 * channels, rng), grads = random_tensor(backend, 2 * channels, rng);
  const bool packed = backend.takes_packed_values();
  memory::Buffer x16(backend.device_memory(), packed ? xs.elements() * 2 : 0, memory::Category::activations);
  memory::Buffer y16(backend.device_memory(), packed ? xs.elements() * 2 : 0, memory::Category::activations);
  auto floats = [](memory::Buffer& b, const Shape& s, std::size_t offset = 0) {
    return Tensor{static_cast<float*>(b.data()) + offset, s};
  };
  Tensor tx = floats(x, xs), ty = floats(y, xs);
  if (packed) {
    backend.to_16bit(tx, x16.data(), value_format(backend.precision()));
    tx = Tensor{nullptr, xs, x16.data()};
    ty = Tensor{nullptr, xs, y16.data()};
  }
  const Shape cs{xs[1]};
  const Tensor g = floats(gamma, cs), b = floats(beta, cs), mean = floats(stats, cs), var = floats(stats, cs, channels),
               saved_mean = floats(stats, cs, 2 * channels), saved_inv_std = floats(stats, cs, 3 * channels);
  BatchnormTimes t;
  t.forward = median_milliseconds(backend, warmup, repeat, [&] {
    backend.batchnorm_relu_forward_training(tx, g, b, ty, mean, var, 0.1f, 1e-5f, saved_mean, saved_inv_std);
  });
  t.backward = median_milliseconds(backend, warmup, repeat, [&] {
    backend.batchnorm_relu_backward(tx, ty, floats(dy, xs), g, saved_mean, saved_inv_std, 1e-5f, floats(dx, xs),
                                    floats(grads, cs), floats(grads, cs, channels), false);
  });
  return t;
}

Shape parse_shape(const std::string& text) {
  int c = 0, h = 0, w = 0;
  if (std::sscanf(text.c_str(), "%dx%dx%d", &c, &h, &w) != 3 || c < 1 || h < 1 || w < 1)
    throw std::invalid_argument("--input: " + text + " is not CxHxW");
  return Shape{c, h, w};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"conv_layouts: a preset's convolutions timed with NCHW and channels-last images"};
  std::string device = "cuda", precision = "bf16", model = "resnet18", input = "3x32x32", json_out;
  int batch = 256, warmup = 3, repeat = 20;
  app.add_option("--device", device, "cpu or cuda");
  app.add_option("--precision", precision, "fp32, tf32, bf16 or fp16");
  app.add_option("--model", model, "a preset or a network file");
  app.add_option("--input", input, "CxHxW");
  app.add_option("--batch", batch)->check(CLI::Range(1, 1 << 16));
  app.add_option("--warmup", warmup)->check(CLI::Range(0, 1000));
  app.add_option("--repeat", repeat)->check(CLI::Range(1, 1000));
  app.add_option("--json-out", json_out, "append the JSON lines here too");
  CLI11_PARSE(app, argc, argv);
  try {
    DeviceRequest request;
    request.device = parse_device(device);
    request.precision = parse_precision(precision);
    request.channels_last = true;  // where the backend can (CudaOptions::channels_last)
    DeviceChoice chosen = select_device(request);
    Backend& backend = *chosen.backend;
    const bool both = backend.takes_channels_last();
    if (!both) std::cout << backend.description() << " takes NCHW images only: channels last is not timed\n";
    std::printf("%-56s %5s %27s %27s %7s\n", "convolution (input, batch)", "count", "NCHW fwd/bwd-data/bwd-filter",
                "channels last, the same", "ratio");
    PassTimes total_nchw, total_last;
    std::FILE* json_file = json_out.empty() ? nullptr : std::fopen(json_out.c_str(), "a");
    for (const auto& [call, count] : network_convolutions(model, parse_shape(input), batch)) {
      const PassTimes nchw = time_passes(backend, call, false, warmup, repeat);
      const PassTimes last = both ? time_passes(backend, call, true, warmup, repeat) : PassTimes{};
      char name[96];
      std::snprintf(name, sizeof name, "%d->%d %dx%d/%d g%d %s", call.d.in_channels, call.d.out_channels,
                    call.d.kernel_h, call.d.kernel_w, call.d.stride, call.d.groups, call.x.str().c_str());
      std::printf("%-56s %5d %8.3f %8.3f %8.3f  %8.3f %8.3f %8.3f  %6.2fx\n", name, count, nchw.forward,
                  nchw.backward_data, nchw.backward_filter, last.forward, last.backward_data, last.backward_filter,
                  both ? nchw.sum() / last.sum() : 0.0);
      for (PassTimes* total : {&total_nchw, &total_last}) {
        const PassTimes& t = total == &total_nchw ? nchw : last;
        total->forward += count * t.forward;
        total->backward_data += count * t.backward_data;
        total->backward_filter += count * t.backward_filter;
      }
      const json line{{"engine", "cnnengine"}, {"benchmark", "conv_layouts"}, {"device", backend.description()},
                      {"precision", precision}, {"model", model}, {"input", input}, {"batch", batch},
                      {"convolution", name}, {"count", count},
                      {"nchw_ms", {nchw.forward, nchw.backward_data, nchw.backward_filter}},
                      {"channels_last_ms", {last.forward, last.backward_data, last.backward_filter}}};
      if (json_file) std::fprintf(json_file, "%s\n", line.dump().c_str());
    }
    std::printf("a step's convolutions: NCHW %.3f ms, channels last %.3f ms (%.2fx)\n", total_nchw.sum(),
                total_last.sum(), both ? total_nchw.sum() / total_last.sum() : 0.0);

    std::printf("\n%-56s %5s %18s %18s %7s\n", "BatchNorm + ReLU on (output, batch)", "count", "NCHW fwd/bwd",
                "channels last", "ratio");
    std::map<std::tuple<int, int, int>, int> outputs;
    std::map<std::tuple<int, int, int>, Shape> output_shapes;
    for (const auto& [call, count] : network_convolutions(model, parse_shape(input), batch)) {
      const auto key = std::make_tuple(call.y[1], call.y[2], call.y[3]);
      outputs[key] += count;
      output_shapes[key] = call.y;
    }
    BatchnormTimes bn_nchw, bn_last;
    for (const auto& [key, count] : outputs) {
      const Shape& ys = output_shapes[key];
      const BatchnormTimes nchw = time_batchnorm(backend, ys, false, warmup, repeat);
      const BatchnormTimes last = both ? time_batchnorm(backend, ys, true, warmup, repeat) : BatchnormTimes{};
      std::printf("%-56s %5d %8.3f %8.3f  %8.3f %8.3f  %6.2fx\n", ys.str().c_str(), count, nchw.forward,
                  nchw.backward, last.forward, last.backward, both ? nchw.sum() / last.sum() : 0.0);
      bn_nchw.forward += count * nchw.forward;
      bn_nchw.backward += count * nchw.backward;
      bn_last.forward += count * last.forward;
      bn_last.backward += count * last.backward;
      const json line{{"engine", "cnnengine"}, {"benchmark", "conv_layouts"}, {"device", backend.description()},
                      {"precision", precision}, {"model", model}, {"input", input}, {"batch", batch},
                      {"batchnorm_relu", ys.str()}, {"count", count},
                      {"nchw_ms", {nchw.forward, nchw.backward}},
                      {"channels_last_ms", {last.forward, last.backward}}};
      if (json_file) std::fprintf(json_file, "%s\n", line.dump().c_str());
    }
    std::printf("BatchNorm + ReLU after every convolution: NCHW %.3f ms, channels last %.3f ms (%.2fx)\n",
                bn_nchw.sum(), bn_last.sum(), both ? bn_nchw.sum() / bn_last.sum() : 0.0);
    if (json_file) std::fclose(json_file);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "conv_layouts: " << e.what() << "\n";
    return 1;
  }
}
