#include <catch2/catch.hpp>

#include <map>
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
