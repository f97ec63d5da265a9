// Fused SGD and AdamW updates against the CPU backend over several steps, and their guard; the
// loss scaling's unscaling of the gradients.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

#include "support.hpp"

using namespace cnn;
using namespace cnn::cuda_test;

TEST_CASE("cuda sgd matches the CPU", "[cuda][optimizer]") {
  const Shape s{100003};
  struct Variant {
    float momentum;
    bool nesterov;
    float weight_decay;
  };
  for (const Variant v : {Variant{0.0f, false, 0.0f}, Variant{0.9f, false, 0.0f}, Variant{0.9f, true, 5e-4f},
                          Variant{0.5f, false, 1e-2f}}) {
    INFO("momentum " << v.momentum << " nesterov " << v.nesterov << " weight decay " << v.weight_decay);
    SgdConfig config;
    config.momentum = v.momentum;
    config.nesterov = v.nesterov;
    config.weight_decay = v.weight_decay;
    Twin params(gpu(), s, 91), velocity(gpu(), s, std::vector<float>(s.elements(), 0.0f));
    for (int step = 0; step < 3; ++step) {
      Twin grads(gpu(), s, 92 + static_cast<std::uint64_t>(step));
      cpu().sgd_update(params.cpu(), grads.cpu(), velocity.cpu(), config, 0.05f, nullptr);
      gpu().sgd_update(params.gpu(), grads.gpu(), velocity.gpu(), config, 0.05f, nullptr);
    }
    CHECK(params.relative_error() <= 1e-5);
    if (v.momentum != 0.0f) CHECK(velocity.relative_error() <= 1e-5);
  }
}

TEST_CASE("cuda adamw matches the CPU", "[cuda][optimizer]") {
  const Shape s{100003};
  AdamWConfig config;
  config.weight_decay = 0.05f;
  Twin params(gpu(), s, 101);
  Twin m(gpu(), s, std::vector<float>(s.elements(), 0.0f)), v(gpu(), s, std::vector<float>(s.elements(), 0.0f));
  for (long step = 1; step <= 4; ++step) {
    Twin grads(gpu(), s, 102 + static_cast<std::uint64_t>(step));
    cpu().adamw_update(params.cpu(), grads.cpu(), m.cpu(), v.cpu(), config, 1e-3f, step, nullptr);
    gpu().adamw_update(params.gpu(), grads.gpu(), m.gpu(), v.gpu(), config, 1e-3f, step, nullptr);
  }
  CHECK(params.relative_error() <= 1e-5);
  CHECK(m.relative_error() <= 1e-5);
  CHECK(v.relative_error() <= 1e-5);
}

TEST_CASE("cuda an update guarded by a loss that is not finite changes nothing, as on the CPU", "[cuda][optimizer]") {
  const Shape s{4099};
  for (const float loss : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), 2.5f}) {
    INFO("loss " << loss);
    Twin guard(gpu(), Shape{1}, std::vector<float>{loss});
    Twin params(gpu(), s, 111), grads(gpu(), s, 112);
    Twin m(gpu(), s, std::vector<float>(s.elements(), 0.0f)), v(gpu(), s, std::vector<float>(s.elements(), 0.0f));
    const std::vector<float> before = params.cpu_values();
    cpu().adamw_update(params.cpu(), grads.cpu(), m.cpu(), v.cpu(), AdamWConfig{}, 1e-3f, 1, guard.cpu().data);
    gpu().adamw_update(params.gpu(), grads.gpu(), m.gpu(), v.gpu(), AdamWConfig{}, 1e-3f, 1, guard.gpu().data);
    cpu().sgd_update(params.cpu(), grads.cpu(), m.cpu(), SgdConfig{}, 0.1f, guard.cpu().data);
    gpu().sgd_update(params.gpu(), grads.gpu(), m.gpu(), SgdConfig{}, 0.1f, guard.gpu().data);
    CHECK(params.relative_error() <= 1e-5);
    CHECK((params.gpu_values() == before) == !std::isfinite(loss));
    CHECK((m.gpu_values() == std::vector<float>(s.elements(), 0.0f)) == !std::isfinite(loss));
  }
}

TEST_CASE("cuda unscaling gradients gives the CPU's values and finds a NaN or infinity as it does",
          "[cuda][optimizer]") {
  const Shape s{100003};
  for (const float bad : {0.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    INFO("one gradient " << bad);
    std::vector<float> values = random_values(s.elements(), 121);
    if (bad != 0.0f) values[77777] = bad;
    Twin grads(gpu(), s, values);
    Twin found(gpu(), Shape{1}, std::vector<float>{0.0f});
    cpu().unscale_gradients(grads.cpu(), 1.0f / 65536.0f, found.cpu());
    gpu().unscale_gradients(grads.gpu(), 1.0f / 65536.0f, found.gpu());
    const std::vector<float> cpu_grads = grads.cpu_values(), gpu_grads = grads.gpu_values();
    for (std::size_t i = 0; i < cpu_grads.size(); i += 997)
      if (std::isfinite(cpu_grads[i])) CHECK(gpu_grads[i] == cpu_grads[i]);  // a power of two: exact on both
    CHECK(found.cpu_values()[0] == (bad != 0.0f ? 1.0f : 0.0f));
    CHECK(found.gpu_values() == found.cpu_values());
  }
}
