// The CPU's depthwise convolution kernels (backends/cpu/cpu_depthwise_conv.cpp) against naive
// loops written from PyTorch's definition, on the shapes that pick each of its paths: planes up to
// 112 x 112 by blocks of 16 channels (channel counts with a tail block, stride 1 and 2, dilation,
// kernels other than 3x3, padding wider than the kernel: backward-data scattered), larger planes
// by plane (small "same" planes' flat copies are no longer reached: blocked first); forward adding
// into its output; backward-filter's bits for 1, 2 and 3 threads; on every instruction set the host
// has.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "tests/backends/cpu/host_isas.hpp"

using namespace cnn;

namespace {

struct Case {
  const char* name;
  int n, c, h, w, k, stride, pad, dilation;
};

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(gen);
  return v;
}

struct Run {
  std::vector<float> y, dx, dw, db;
};

Run run(int threads, const Case& t, const Shape& xs, const Shape& ys, const std::vector<float>& x, const std::vector<float>& w,
        const std::vector<float>& b, const std::vector<float>& dy, const std::vector<float>& y0) {
  CpuBackend cpu(threads);
  const Conv2dDesc d{t.c, t.c, t.k, t.k, t.stride, t.pad, t.dilation, t.c};
  const Shape wsh{t.c, 1, t.k, t.k};
  const std::size_t bytes = std::max(cpu.conv2d_workspace_bytes(d, xs, ys, ConvPass::forward, ~std::size_t{0}),
                                     cpu.conv2d_workspace_bytes(d, xs, ys, ConvPass::backward, ~std::size_t{0}));
  std::vector<float> space(bytes / sizeof(float) + 1);
  const Workspace ws{space.data(), bytes};
  Run r{y0, std::vector<float>(xs.elements(), 0.5f), std::vector<float>(wsh.elements(), 0.25f), std::vector<float>(t.c, 0.125f)};
  auto in = [](const std::vector<float>& v, const Shape& s) { return Tensor{const_cast<float*>(v.data()), s}; };
  cpu.conv2d_forward(d, in(x, xs), in(w, wsh), in(b, Shape{t.c}), Tensor{r.y.data(), ys}, true, ws);
  cpu.conv2d_backward_data(d, in(dy, ys), in(w, wsh), Tensor{r.dx.data(), xs}, true, ws);
  cpu.conv2d_backward_filter(d, in(x, xs), in(dy, ys), Tensor{r.dw.data(), wsh}, Tensor{r.db.data(), Shape{t.c}}, ws);
  return r;
}

}  // namespace

TEST_CASE("depthwise kernels match the definition on every path", "[depthwise][cpu][conv]") {
  const Case cases[] = {
      {"3x3 same on 7x7 planes, 24 channels", 3, 24, 7, 7, 3, 1, 1, 1},
      {"3x3 same on 2x2 planes", 2, 16, 2, 2, 3, 1, 1, 1},
      {"3x3 same on 1x17 planes", 2, 9, 1, 17, 3, 1, 1, 1},
      {"3x3 same on 4x4 planes", 2, 16, 4, 4, 3, 1, 1, 1},
      {"5x5 same on 9x6 planes", 2, 10, 9, 6, 5, 1, 2, 1},
      {"3x3 dilation 2 same on 6x7 planes", 2, 12, 6, 7, 3, 1, 2, 2},
      {"3x3 same on 40x40 planes (padded copy)", 2, 8, 40, 40, 3, 1, 1, 1},
      {"3x3 stride 2 on 7x7 planes", 3, 20, 7, 7, 3, 2, 1, 1},
      {"3x3 no padding on 7x8 planes", 2, 12, 7, 8, 3, 1, 0, 1},
      {"3x3 same, 3 channels", 4, 3, 7, 7, 3, 1, 1, 1},
      {"3x3 same on 4x4 planes, 37 channels (tail of 5)", 2, 37, 4, 4, 3, 1, 1, 1},
      {"3x3 stride 2 on 14x14 planes, 21 channels", 2, 21, 14, 14, 3, 2, 1, 1},
      {"3x3 stride 2 dilation 2 on 13x11 planes", 2, 18, 13, 11, 3, 2, 2, 2},
      {"5x5 stride 2 on 9x9 planes", 2, 17, 9, 9, 5, 2, 2, 1},
      {"3x3 padding 3 on 5x5 planes (backward-data scattered)", 2, 16, 5, 5, 3, 1, 3, 1},
      {"3x3 dilation 2 on 2x2 planes", 2, 33, 2, 2, 3, 1, 2, 2},
      {"3x3 same on 112x112 planes, 2 channels", 1, 2, 112, 112, 3, 1, 1, 1},
      {"3x3 same on 113x120 planes (by plane)", 1, 12, 113, 120, 3, 1, 1, 1},
      {"3x3 stride 2 on 115x117 planes (by plane)", 2, 3, 115, 117, 3, 2, 1, 1},
  };
  for (const Case& t : cases) {
    INFO(t.name);
    const int reach = t.dilation * (t.k - 1) + 1;
    const int ho = (t.h + 2 * t.pad - reach) / t.stride + 1, wo = (t.w + 2 * t.pad - reach) / t.stride + 1;
    const Shape xs{t.n, t.c, t.h, t.w}, ys{t.n, t.c, ho, wo};
    const auto x = random_values(xs.elements(), 1), w = random_values(static_cast<std::size_t>(t.c * t.k * t.k), 2),
               b = random_values(static_cast<std::size_t>(t.c), 3), dy = random_values(ys.elements(), 4),
               y0 = random_values(ys.elements(), 5);
    // The definition, in double: y = y0 + bias + conv; dx = 0.5 + conv^T dy; dw = 0.25 + sum; db = 0.125 + sum.
    std::vector<double> y(y0.begin(), y0.end()), dx(xs.elements(), 0.5), dw(w.size(), 0.25), db(b.size(), 0.125);
    for (int n = 0; n < t.n; ++n)
      for (int c = 0; c < t.c; ++c) {
        const std::size_t plane = static_cast<std::size_t>(n * t.c + c);
        for (int oh = 0; oh < ho; ++oh)
          for (int ow = 0; ow < wo; ++ow) {
            const std::size_t o = plane * ho * wo + static_cast<std::size_t>(oh * wo + ow);
            y[o] += b[static_cast<std::size_t>(c)];
            db[static_cast<std::size_t>(c)] += dy[o];
            for (int ki = 0; ki < t.k; ++ki)
              for (int kj = 0; kj < t.k; ++kj) {
                const int r = oh * t.stride - t.pad + ki * t.dilation, s = ow * t.stride - t.pad + kj * t.dilation;
                if (r < 0 || r >= t.h || s < 0 || s >= t.w) continue;
                const std::size_t i = plane * t.h * t.w + static_cast<std::size_t>(r * t.w + s);
                const std::size_t k = static_cast<std::size_t>((c * t.k + ki) * t.k + kj);
                y[o] += static_cast<double>(w[k]) * x[i];
                dx[i] += static_cast<double>(w[k]) * dy[o];
                dw[k] += static_cast<double>(x[i]) * dy[o];
              }
          }
      }
    for (cpu::CpuIsa isa : testing::host_isas()) {
      INFO("kernels on " << cpu::isa_name(isa));
      const cpu::IsaLimit limit(isa);
      const Run two = run(2, t, xs, ys, x, w, b, dy, y0);
      auto check = [](const std::vector<float>& got, const std::vector<double>& want, const char* what) {
        INFO(what);
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(std::fabs(got[i] - want[i]) < 1e-4 * (1 + std::fabs(want[i])));
      };
      check(two.y, y, "y");
      check(two.dx, dx, "dx");
      check(two.dw, dw, "dw");
      check(two.db, db, "db");
      // Backward-filter's fixed-order sums: the same bits on a second run, and by channel (enough
      // channels) whatever the thread count.
      const Run again = run(2, t, xs, ys, x, w, b, dy, y0);
      CHECK(again.dw == two.dw);
      CHECK(again.db == two.db);
      for (int threads : {1, 3}) {
        const Run other = run(threads, t, xs, ys, x, w, b, dy, y0);
        CHECK(other.y == two.y);
        CHECK(other.dx == two.dx);
        if (t.c >= 12) {
          CHECK(other.dw == two.dw);
          CHECK(other.db == two.db);
        }
      }
    }
  }
}
