// The fused updates against the textbook formulas (PyTorch's SGD and AdamW), and the schedules.
#include <catch2/catch.hpp>
#include <cfloat>
#include <cmath>
#include <vector>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/engine/train/optimizer.hpp>

using namespace cnn;

TEST_CASE("SGD with momentum, Nesterov and weight decay follows PyTorch's formula", "[optimizer]") {
  CpuBackend backend(2);
  for (bool nesterov : {false, true}) {
    std::vector<float> p{1.f, -2.f, 0.5f}, g{0.1f, 0.2f, -0.3f}, v(3, 0.f);
    std::vector<double> rp(p.begin(), p.end()), rv(3, 0.0);
    SgdConfig c;
    c.momentum = 0.9f;
    c.nesterov = nesterov;
    c.weight_decay = 0.01f;
    for (int step = 0; step < 3; ++step) {
      backend.sgd_update(Tensor{p.data(), Shape{3}}, Tensor{g.data(), Shape{3}}, Tensor{v.data(), Shape{3}}, c, 0.1f, nullptr);
      for (int i = 0; i < 3; ++i) {
        double d = g[i] + 0.01 * rp[i];
        rv[i] = 0.9 * rv[i] + d;
        d = nesterov ? d + 0.9 * rv[i] : rv[i];
        rp[i] -= 0.1 * d;
      }
    }
    for (int i = 0; i < 3; ++i) CHECK(p[i] == Approx(rp[i]).epsilon(1e-6));
  }
}

TEST_CASE("AdamW follows PyTorch's formula with decoupled weight decay", "[optimizer]") {
  CpuBackend backend(2);
  std::vector<float> p{1.f, -2.f, 0.5f}, g{0.1f, 0.2f, -0.3f}, m(3, 0.f), v(3, 0.f);
  std::vector<double> rp(p.begin(), p.end()), rm(3, 0.0), rv(3, 0.0);
  AdamWConfig c;
  const double lr = 0.01;
  for (long step = 1; step <= 4; ++step) {
    backend.adamw_update(Tensor{p.data(), Shape{3}}, Tensor{g.data(), Shape{3}}, Tensor{m.data(), Shape{3}},
                         Tensor{v.data(), Shape{3}}, c, static_cast<float>(lr), step, nullptr);
    for (int i = 0; i < 3; ++i) {
      rp[i] *= 1.0 - lr * c.weight_decay;
      rm[i] = c.beta1 * rm[i] + (1 - c.beta1) * g[i];
      rv[i] = c.beta2 * rv[i] + (1 - c.beta2) * g[i] * g[i];
      const double mhat = rm[i] / (1 - std::pow(c.beta1, step)), vhat = rv[i] / (1 - std::pow(c.beta2, step));
      rp[i] -= lr * mhat / (std::sqrt(vhat) + c.epsilon);
    }
  }
  for (int i = 0; i < 3; ++i) CHECK(p[i] == Approx(rp[i]).epsilon(1e-5));
}

// Note [Flushed subnormals] (backends/cpu/detail/subnormals.hpp): a first moment that decays
// below 2^-126 becomes zero instead of a subnormal, on every thread, and the caller's own
// floating-point mode is left as it was.
TEST_CASE("CPU kernels flush subnormals to zero and leave the caller's mode alone", "[optimizer]") {
  for (int threads : {1, 2}) {
    CpuBackend backend(threads);
    const std::size_t n = 1 << 17;  // enough for both threads
    std::vector<float> p(n, 1.f), g(n, 0.f), m(n, 1.05f * FLT_MIN), v(n, 1.f), velocity(n, 1.05f * FLT_MIN);
#if defined(__x86_64__)
    const unsigned mode = _mm_getcsr();
#endif
    backend.adamw_update(Tensor{p.data(), Shape{static_cast<int>(n)}}, Tensor{g.data(), Shape{static_cast<int>(n)}},
                         Tensor{m.data(), Shape{static_cast<int>(n)}}, Tensor{v.data(), Shape{static_cast<int>(n)}},
                         AdamWConfig{}, 1e-3f, 5, nullptr);
    backend.sgd_update(Tensor{p.data(), Shape{static_cast<int>(n)}}, Tensor{g.data(), Shape{static_cast<int>(n)}},
                       Tensor{velocity.data(), Shape{static_cast<int>(n)}}, SgdConfig{}, 1e-3f, nullptr);
#if defined(__x86_64__)
    const unsigned status_flags = 0x3f;  // sticky exception flags: any arithmetic may set them
    CHECK((_mm_getcsr() & ~status_flags) == (mode & ~status_flags));
    // 0.9 x 1.05 FLT_MIN is below FLT_MIN: flushed, on both halves of the block.
    for (std::size_t i : {std::size_t{0}, n - 1}) {
      CHECK(m[i] == 0.f);
      CHECK(velocity[i] == 0.f);
    }
#endif
  }
}

TEST_CASE("schedules: warm-up, constant, step and cosine", "[optimizer]") {
  ScheduleConfig s;
  s.kind = ScheduleKind::cosine;
  s.warmup_steps = 10;
  CHECK(scheduled_rate(s, 1.f, 0, 110) == Approx(0.1f));
  CHECK(scheduled_rate(s, 1.f, 9, 110) == Approx(1.f));
  CHECK(scheduled_rate(s, 1.f, 10, 110) == Approx(1.f));
  CHECK(scheduled_rate(s, 1.f, 60, 110) == Approx(0.5f));
  CHECK(scheduled_rate(s, 1.f, 110, 110) == Approx(0.f).margin(1e-6));
  s.kind = ScheduleKind::step;
  s.warmup_steps = 0;
  s.step_every = 5;
  CHECK(scheduled_rate(s, 1.f, 4, 100) == Approx(1.f));
  CHECK(scheduled_rate(s, 1.f, 5, 100) == Approx(0.1f));
  CHECK(scheduled_rate(s, 1.f, 12, 100) == Approx(0.01f));
  s.kind = ScheduleKind::constant;
  CHECK(scheduled_rate(s, 0.3f, 77, 100) == Approx(0.3f));
  CHECK_THROWS_WITH(parse_schedule_kind("linear"), Catch::Contains("constant, step, cosine, onecycle or plateau"));
  CHECK_THROWS_WITH(parse_optimizer_kind("rmsprop"), Catch::Contains("sgd or adamw"));
  for (ScheduleKind kind : {ScheduleKind::constant, ScheduleKind::step, ScheduleKind::cosine, ScheduleKind::onecycle,
                            ScheduleKind::plateau})
    CHECK(parse_schedule_kind(to_string(kind)) == kind);
  for (OptimizerKind kind : {OptimizerKind::sgd, OptimizerKind::adamw}) CHECK(parse_optimizer_kind(to_string(kind)) == kind);
}

TEST_CASE("weight decay not given takes the optimizer's default, 0 given is 0", "[optimizer]") {
  OptimizerConfig c;
  CHECK(make_optimizer(c)->describe().find("weight decay 0.010000") != std::string::npos);
  c.kind = OptimizerKind::sgd;
  CHECK(make_optimizer(c)->describe().find("weight decay 0.000000") != std::string::npos);
  c.kind = OptimizerKind::adamw;
  c.weight_decay = 0.f;
  CHECK(make_optimizer(c)->describe().find("weight decay 0.000000") != std::string::npos);
}

TEST_CASE("cosine with no run length keeps the base rate: the library's defaults never stop training", "[optimizer]") {
  // TrainerOptions leaves total_steps at 0; the cosine default once dropped the rate to 0 after
  // the first step, and training stopped without a word.
  ScheduleConfig s;
  CHECK(s.kind == ScheduleKind::cosine);
  for (long step : {0L, 1L, 10L, 100000L}) CHECK(scheduled_rate(s, 0.5f, step, 0) == 0.5f);
  s.warmup_steps = 4;
  CHECK(scheduled_rate(s, 0.5f, 1, 0) == Approx(0.25f));
  CHECK(scheduled_rate(s, 0.5f, 40, 0) == 0.5f);
}

TEST_CASE("onecycle follows PyTorch's OneCycleLR: up from base/25 over 30% of the run, down to base/25e4", "[optimizer]") {
  ScheduleConfig s;
  s.kind = ScheduleKind::onecycle;
  CHECK(scheduled_rate(s, 1.f, 0, 100) == Approx(0.04f));
  CHECK(scheduled_rate(s, 1.f, 29, 100) == Approx(1.f));  // pct_start x total - 1
  CHECK(scheduled_rate(s, 1.f, 64, 100) == Approx(0.5f + 2e-6f));  // halfway down: (1 + 4e-6) / 2
  CHECK(scheduled_rate(s, 1.f, 99, 100) == Approx(4e-6f));  // the last step: base / (25 x 1e4)
  float previous = 0;
  for (long step = 0; step <= 29; ++step) {
    const float rate = scheduled_rate(s, 1.f, step, 100);
    CHECK(rate > previous);
    previous = rate;
  }
  for (long step = 30; step < 100; ++step) {
    const float rate = scheduled_rate(s, 1.f, step, 100);
    CHECK(rate < previous);
    previous = rate;
  }
  CHECK(scheduled_rate(s, 0.3f, 5, 0) == 0.3f);  // no run length: the base rate
  s.warmup_steps = 10;
  CHECK_THROWS_WITH(validate(s), Catch::Contains("warms up by itself"));
  s.warmup_steps = 0;
  s.onecycle_start_fraction = 1.f;
  CHECK_THROWS_AS(validate(s), ConfigError);
  ScheduleConfig plateau;
  plateau.kind = ScheduleKind::plateau;
  CHECK(scheduled_rate(plateau, 0.1f, 500, 1000) == 0.1f);  // a Trainer alone keeps it
  plateau.plateau_factor = 1.f;
  CHECK_THROWS_WITH(validate(plateau), Catch::Contains("plateau schedule"));
}
