#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "engine/core/forwarding_backend.hpp"

using namespace cnn;

namespace {
// Watches every call through run() alone, as a wrapper that overrides nothing else.
class CountingBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  std::map<std::string, int> calls, transfers;
  std::size_t written = 0;

 private:
  void run(const BackendCall& call, const std::function<void()>& work) override {
    ++(call.host_transfer ? transfers : calls)[call.name];
    for (const Tensor& t : call.outputs) written += t.elements();
    work();
  }
};
}  // namespace

TEST_CASE("a forwarding backend hands every call to its inner backend through run()", "[backend]") {
  CpuBackend cpu(1);
  CountingBackend counting(cpu);
  CHECK(counting.kind() == cpu.kind());
  CHECK(counting.description() == cpu.description());
  CpuBackend bf16(1, Precision::bf16);
  CHECK(CountingBackend(bf16).precision() == Precision::bf16);  // a wrapped backend's precision is its inner's

  std::vector<float> x{-2.f, -1.f, 0.5f, 3.f}, host(4), y(4), dy{1.f, 1.f, 1.f, 1.f}, dx(4, 9.f);
  const Shape shape{1, 4};
  counting.copy_to_device(x.data(), host.data(), x.size() * sizeof(float));
  counting.relu_forward(Tensor{host.data(), shape}, Tensor{y.data(), shape});
  counting.relu_backward(Tensor{y.data(), shape}, Tensor{dy.data(), shape}, Tensor{dx.data(), shape}, false);
  counting.wait(counting.copy_to_host_async(y.data(), host.data(), y.size() * sizeof(float)));

  CHECK(y == std::vector<float>{0.f, 0.f, 0.5f, 3.f});
  CHECK(dx == std::vector<float>{0.f, 0.f, 1.f, 1.f});
  CHECK(host == y);
  CHECK(counting.calls == std::map<std::string, int>{{"relu_backward", 1}, {"relu_forward", 1}});
  CHECK(counting.transfers == std::map<std::string, int>{{"copy_to_device", 1}, {"copy_to_host_async", 1}});
  CHECK(counting.written == 8);  // y and dx
}

// A call made of others (Note [One front per backend call]) reaches a wrapper as the calls it is
// made of, and gives their results to the bit.
TEST_CASE("conv2d_backward is its two passes, and a wrapper sees each", "[backend]") {
  CpuBackend cpu(1);
  CountingBackend counting(cpu);
  const Conv2dDesc d{.in_channels = 2, .out_channels = 3, .kernel_h = 3, .kernel_w = 3, .padding = 1};
  const Shape xs{2, 2, 5, 4}, ys{2, 3, 5, 4}, ws{3, 2, 3, 3};
  auto counting_values = [](std::size_t n, float scale) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(static_cast<int>(i * 7 % 11) - 5);
    return v;
  };
  std::vector<float> x = counting_values(xs.elements(), 0.25f), dy = counting_values(ys.elements(), 0.5f),
                     w = counting_values(ws.elements(), 0.125f);
  std::size_t bytes = cpu.conv2d_workspace_bytes(d, xs, ys, ConvPass::backward, 0);
  std::vector<char> scratch(bytes + 64);
  void* start = scratch.data();
  std::size_t room = scratch.size();
  const Workspace workspace{std::align(64, bytes, start, room), bytes};  // the backend's alignment
  struct Gradients {
    std::vector<float> dw = std::vector<float>(54, 1.f), dbias = std::vector<float>(3, 1.f),
                       dx = std::vector<float>(80, 2.f);  // ws, {3} and xs: what earlier calls wrote
  };
  Gradients apart, together;
  cpu.conv2d_backward_filter(d, Tensor{x.data(), xs}, Tensor{dy.data(), ys}, Tensor{apart.dw.data(), ws},
                             Tensor{apart.dbias.data(), Shape{3}}, workspace);
  cpu.conv2d_backward_data(d, Tensor{dy.data(), ys}, Tensor{w.data(), ws}, Tensor{apart.dx.data(), xs}, true,
                           workspace);
  counting.conv2d_backward(d, Tensor{x.data(), xs}, Tensor{dy.data(), ys}, Tensor{w.data(), ws},
                           Tensor{together.dw.data(), ws}, Tensor{together.dbias.data(), Shape{3}},
                           Tensor{together.dx.data(), xs}, true, workspace);
  CHECK(together.dw == apart.dw);
  CHECK(together.dbias == apart.dbias);
  CHECK(together.dx == apart.dx);
  CHECK(counting.calls == std::map<std::string, int>{{"conv2d_backward_data", 1}, {"conv2d_backward_filter", 1}});

  // Without an input gradient (a network's first layer): the weight pass alone.
  counting.calls.clear();
  counting.conv2d_backward(d, Tensor{x.data(), xs}, Tensor{dy.data(), ys}, Tensor{w.data(), ws},
                           Tensor{together.dw.data(), ws}, Tensor{}, Tensor{}, false, workspace);
  CHECK(counting.calls == std::map<std::string, int>{{"conv2d_backward_filter", 1}});
}
