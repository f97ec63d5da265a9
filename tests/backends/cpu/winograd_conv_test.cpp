// The CPU's Winograd convolution (backends/cpu/cpu_winograd_conv.cpp) against PyTorch's Conv2d
// written out in double precision: forward (with bias and accumulation), backward-data and
// backward-filter, on every instruction set the host has, on shapes that reach its edges (sides
// that are no multiple of the 4x4 tile, padding 0, 1 and 2, images smaller than a tile, chunks
// of tile rows that span images, channel counts off the products' blocks), with exactly the
// workspace asked for (filled with NaN first). Winograd's sums round differently from a direct
// sum: each result is held to the reference within a bound relative to the sum of its terms'
// magnitudes. The forward pass and backward-data give the same bits on any thread count. Training
// through them gives the same losses for a seed, and im2col + GEMM's within rounding.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/winograd_conv.hpp"
#include "memory/host_resource.hpp"
#include "tests/backends/cpu/conv_test_data.hpp"
#include "tests/backends/cpu/host_isas.hpp"
#include "tests/engine/test_networks.hpp"
#include <cnnengine/cnnengine.hpp>

using namespace cnn;
using cnn::testing::NanWorkspace;
using cnn::testing::pattern;
using cnn::testing::same_bits;

namespace {

struct Case {
  std::string name;
  int n, cin, h, w, cout, pad;
  int ho() const { return h + 2 * pad - 2; }
  int wo() const { return w + 2 * pad - 2; }
  Conv2dDesc desc() const { return Conv2dDesc{cin, cout, 3, 3, 1, pad, 1, 1}; }
  Shape x() const { return Shape{n, cin, h, w}; }
  Shape y() const { return Shape{n, cout, ho(), wo()}; }
  Shape weights() const { return Shape{cout, cin, 3, 3}; }
};

// Visits every (image, out channel, output pixel, in channel, tap) that adds x[at_x] * w[at_w]
// to y[at_y].
template <class Fn>
void each_term(const Case& c, Fn fn) {
  for (int i = 0; i < c.n; ++i)
    for (int o = 0; o < c.cout; ++o)
      for (int oh = 0; oh < c.ho(); ++oh)
        for (int ow = 0; ow < c.wo(); ++ow)
          for (int ci = 0; ci < c.cin; ++ci)
            for (int ki = 0; ki < 3; ++ki)
              for (int kj = 0; kj < 3; ++kj) {
                const int ih = oh - c.pad + ki, iw = ow - c.pad + kj;
                if (ih < 0 || ih >= c.h || iw < 0 || iw >= c.w) continue;
                fn(((static_cast<std::size_t>(i) * c.cin + ci) * c.h + ih) * c.w + iw,
                   ((static_cast<std::size_t>(o) * c.cin + ci) * 3 + ki) * 3 + kj,
                   ((static_cast<std::size_t>(i) * c.cout + o) * c.ho() + oh) * c.wo() + ow);
              }
}

struct Results {
  std::vector<float> y, dx, dw, db;
};

// The Winograd passes, called as the backend calls them: y = start_y + conv + bias
// (accumulating), dx = start_dx + conv^T dy, dw = start_dw + dL/dw, db = start_db + dL/db.
Results run(const Case& c, int threads) {
  const Conv2dDesc d = c.desc();
  const Shape xs = c.x(), ys = c.y(), wsh = c.weights();
  std::vector<float> x = pattern(xs.elements(), 1), w = pattern(wsh.elements(), 2), bias = pattern(c.cout, 3),
                     dy = pattern(ys.elements(), 4);
  Results r{pattern(ys.elements(), 5), pattern(xs.elements(), 6), pattern(wsh.elements(), 7), pattern(c.cout, 8)};
  {
    NanWorkspace ws(cpu::winograd_workspace_floats(d, xs, ys, ConvPass::forward, threads) * sizeof(float));
    cpu::winograd_forward(threads, d, Tensor{x.data(), xs}, Tensor{w.data(), wsh}, Tensor{bias.data(), Shape{c.cout}},
                          Tensor{r.y.data(), ys}, true, ws.ws);
  }
  NanWorkspace ws(cpu::winograd_workspace_floats(d, xs, ys, ConvPass::backward, threads) * sizeof(float));
  cpu::winograd_backward_data(threads, d, Tensor{dy.data(), ys}, Tensor{w.data(), wsh}, Tensor{r.dx.data(), xs}, true,
                              ws.ws);
  cpu::winograd_backward_filter(threads, d, Tensor{x.data(), xs}, Tensor{dy.data(), ys}, Tensor{r.dw.data(), wsh},
                                Tensor{r.db.data(), Shape{c.cout}}, ws.ws);
  return r;
}

// The exact results (in double) and, for each, the sum of its terms' magnitudes.
struct Reference {
  Results want;
  Results scale;
};

Reference reference(const Case& c) {
  const Shape xs = c.x(), ys = c.y(), wsh = c.weights();
  const std::vector<float> x = pattern(xs.elements(), 1), w = pattern(wsh.elements(), 2), bias = pattern(c.cout, 3),
                           dy = pattern(ys.elements(), 4);
  std::vector<double> y(ys.elements()), dx(xs.elements()), dw(wsh.elements()), db(c.cout);
  std::vector<double> y_abs(ys.elements()), dx_abs(xs.elements()), dw_abs(wsh.elements()), db_abs(c.cout);
  each_term(c, [&](std::size_t at_x, std::size_t at_w, std::size_t at_y) {
    y[at_y] += static_cast<double>(x[at_x]) * w[at_w];
    dx[at_x] += static_cast<double>(dy[at_y]) * w[at_w];
    dw[at_w] += static_cast<double>(dy[at_y]) * x[at_x];
    y_abs[at_y] += std::fabs(static_cast<double>(x[at_x]) * w[at_w]);
    dx_abs[at_x] += std::fabs(static_cast<double>(dy[at_y]) * w[at_w]);
    dw_abs[at_w] += std::fabs(static_cast<double>(dy[at_y]) * x[at_x]);
  });
  const std::size_t plane = static_cast<std::size_t>(c.ho()) * c.wo();
  for (std::size_t at = 0; at < y.size(); ++at) {
    const std::size_t o = at / plane % static_cast<std::size_t>(c.cout);
    y[at] += bias[o];
    db[o] += dy[at];
    db_abs[o] += std::fabs(dy[at]);
  }
  auto plus = [](std::vector<float> start, const std::vector<double>& add) {
    for (std::size_t i = 0; i < start.size(); ++i) start[i] = static_cast<float>(start[i] + add[i]);
    return start;
  };
  auto magnitude = [](const std::vector<double>& sums) {
    std::vector<float> out(sums.size());
    for (std::size_t i = 0; i < sums.size(); ++i) out[i] = static_cast<float>(sums[i] + 2.0);  // + the starts' and bias's
    return out;
  };
  return {{plus(pattern(ys.elements(), 5), y), plus(pattern(xs.elements(), 6), dx), plus(pattern(wsh.elements(), 7), dw),
           plus(pattern(c.cout, 8), db)},
          {magnitude(y_abs), magnitude(dx_abs), magnitude(dw_abs), magnitude(db_abs)}};
}

// Within `bound` of the terms' magnitudes: F(4x4, 3x3)'s transforms (the forward pass) scale
// values by up to 100 or so before the products and back after, a few bits of a float's 24;
// F(2x2, 3x3)'s (both backward passes) by at most 4.
constexpr float kForwardBound = 0x1p-17f, kBackwardBound = 0x1p-20f;

void require_close(const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& scale,
                   float bound, const char* what) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO(what << "[" << i << "] = " << got[i] << ", wanted " << want[i]);
    REQUIRE(std::fabs(got[i] - want[i]) <= scale[i] * bound);
  }
}

}  // namespace

TEST_CASE("Winograd convolutions match PyTorch's Conv2d on every instruction set", "[conv][cpu][winograd]") {
  const Case cases[] = {
      // name                                              n  cin  h   w  cout pad
      {"pad 1, sides a multiple of the tile",               2, 16, 8, 8, 16, 1},
      {"pad 1, sides off the tile, more out than in",       3, 16, 7, 10, 24, 1},
      {"no padding (backward-data padded by 2)",            2, 17, 9, 6, 16, 0},
      {"padding 2 (backward-data unpadded)",                2, 16, 5, 5, 19, 2},
      {"an image smaller than a tile",                      5, 16, 2, 3, 16, 1},
      {"chunks across images, channels past a block",       9, 33, 12, 12, 20, 1},
      {"a wide row of tiles, one image",                    1, 16, 3, 70, 16, 1},
      {"output channels in blocks (16, 16, 8)",             1, 40, 6, 6, 40, 1},
  };
  for (const Case& c : cases) {
    SECTION(c.name) {
      REQUIRE(cpu::winograd_supports(c.desc(), c.x(), false));
      const Reference ref = reference(c);
      for (cpu::CpuIsa isa : testing::host_isas()) {
        INFO("kernels on " << cpu::isa_name(isa));
        const cpu::IsaLimit limit(isa);
        const Results one = run(c, 1);
        require_close(one.y, ref.want.y, ref.scale.y, kForwardBound, "y");
        require_close(one.dx, ref.want.dx, ref.scale.dx, kBackwardBound, "dx");
        require_close(one.dw, ref.want.dw, ref.scale.dw, kBackwardBound, "dw");
        require_close(one.db, ref.want.db, ref.scale.db, kBackwardBound, "db");
        for (int threads : {2, 3}) {
          INFO(threads << " threads");
          const Results other = run(c, threads);
          CHECK(same_bits(other.y, one.y));
          CHECK(same_bits(other.dx, one.dx));
          CHECK(same_bits(other.db, one.db));  // summed by channel, image after image
          require_close(other.dw, ref.want.dw, ref.scale.dw, kBackwardBound, "dw");  // the threads' sums, in order
        }
      }
    }
  }
}

TEST_CASE("Winograd passes support 3x3 stride-1 fp32 convolutions", "[conv][cpu][winograd]") {
  const Shape x{2, 16, 8, 8};
  CHECK(cpu::winograd_supports(Conv2dDesc{16, 16, 3, 3, 1, 1, 1, 1}, x, false));
  CHECK_FALSE(cpu::winograd_supports(Conv2dDesc{16, 16, 3, 3, 1, 1, 1, 1}, x, true));   // 16-bit products
  CHECK_FALSE(cpu::winograd_supports(Conv2dDesc{16, 16, 3, 3, 2, 1, 1, 1}, x, false));  // stride 2
  CHECK_FALSE(cpu::winograd_supports(Conv2dDesc{16, 16, 3, 3, 1, 2, 2, 1}, x, false));  // dilated
  CHECK_FALSE(cpu::winograd_supports(Conv2dDesc{16, 16, 3, 3, 1, 1, 1, 2}, x, false));  // grouped
  CHECK_FALSE(cpu::winograd_supports(Conv2dDesc{16, 16, 5, 5, 1, 2, 1, 1}, x, false));  // 5x5
  CHECK_FALSE(cpu::winograd_supports(Conv2dDesc{16, 16, 3, 3, 1, 3, 1, 1}, x, false));  // padding past the kernel
  CHECK_FALSE(cpu::winograd_supports(Conv2dDesc{16, 16, 3, 3, 1, 0, 1, 1}, Shape{2, 16, 2, 8}, false));  // no output row
}

TEST_CASE("the backend runs Winograd where it pays and its workspace stays under an activation", "[conv][cpu][winograd]") {
  const Conv2dDesc wide{64, 64, 3, 3, 1, 1, 1, 1};
  CHECK(cpu::winograd_applies(wide, Shape{8, 64, 32, 32}, false, 2));  // resnet18's first stage
  CHECK_FALSE(cpu::winograd_applies(Conv2dDesc{16, 16, 3, 3, 1, 1, 1, 1}, Shape{8, 16, 64, 64}, false, 2));  // 16 channels
  CHECK_FALSE(cpu::winograd_applies(Conv2dDesc{3, 64, 3, 3, 1, 1, 1, 1}, Shape{8, 3, 224, 224}, false, 2));  // a stem
  CHECK_FALSE(cpu::winograd_applies(wide, Shape{8, 64, 7, 7}, false, 2));  // 64 x 64 x 49: too little work
  const Conv2dDesc small_second{32, 64, 3, 3, 1, 1, 1, 1};  // small's: 32 x 64 x 196, just over 2^18
  CHECK(cpu::winograd_applies(small_second, Shape{64, 32, 14, 14}, false, 2));
  CHECK_FALSE(cpu::winograd_applies(Conv2dDesc{32, 32, 3, 3, 1, 1, 1, 1}, Shape{64, 32, 14, 14}, false, 2));  // 2^17.6
  CHECK_FALSE(cpu::winograd_applies(Conv2dDesc{256, 512, 3, 3, 1, 1, 1, 1}, Shape{512, 256, 4, 4}, false, 2));  // 4x4
  // 512 channels: 38 MB of transformed weights, so blocks of output channels as large as the
  // activations (Note [Output channels in blocks]): 112 at 8x8 and batch 64 (8 MB of activations),
  // 16 at 4x4, too few to pay.
  const Conv2dDesc deep{512, 512, 3, 3, 1, 1, 1, 1};
  CHECK(cpu::winograd_applies(deep, Shape{64, 512, 8, 8}, false, 2));
  CHECK_FALSE(cpu::winograd_applies(deep, Shape{64, 512, 4, 4}, false, 2));
  CHECK_FALSE(cpu::winograd_applies(wide, Shape{8, 64, 32, 32}, true, 2));  // 16-bit products
  const cpu::WinogradOff off;
  CHECK_FALSE(cpu::winograd_applies(wide, Shape{8, 64, 32, 32}, false, 2));
}

TEST_CASE("the backend's convolution runs the Winograd passes where they apply", "[conv][cpu][winograd]") {
  // 48 channels at 32x32 (batch 2): the backend's results are the Winograd passes', to the bit,
  // and im2col + GEMM's within the bound.
  const Case c{"48 channels at 32x32", 2, 48, 32, 32, 48, 1};
  REQUIRE(cpu::winograd_applies(c.desc(), c.x(), false, 2));
  const Results direct = run(c, 2);
  CpuBackend cpu(2);
  const Shape xs = c.x(), ys = c.y(), wsh = c.weights();
  std::vector<float> x = pattern(xs.elements(), 1), w = pattern(wsh.elements(), 2), y(ys.elements());
  const std::size_t limit = std::numeric_limits<std::size_t>::max();
  auto forward = [&] {
    NanWorkspace ws(cpu.conv2d_workspace_bytes(c.desc(), xs, ys, ConvPass::forward, limit));
    std::vector<float> out = pattern(ys.elements(), 5), bias = pattern(c.cout, 3);
    cpu.conv2d_forward(c.desc(), Tensor{x.data(), xs}, Tensor{w.data(), wsh}, Tensor{bias.data(), Shape{c.cout}},
                       Tensor{out.data(), ys}, true, ws.ws);
    return out;
  };
  CHECK(same_bits(forward(), direct.y));
  std::vector<float> by_gemm;
  {
    const cpu::WinogradOff off;
    by_gemm = forward();
  }
  const Reference ref = reference(c);
  require_close(by_gemm, ref.want.y, ref.scale.y, kBackwardBound, "y by im2col + GEMM");
  CHECK_FALSE(same_bits(by_gemm, direct.y));
}

TEST_CASE("Winograd workspace: what a pass asks for is what it checks", "[conv][cpu][winograd]") {
  const Conv2dDesc d{16, 16, 3, 3, 1, 1, 1, 1};
  const Shape s{3, 16, 9, 9};
  std::vector<float> x = pattern(s.elements(), 1), w = pattern(16 * 16 * 9, 2), y(s.elements());
  const std::size_t floats = cpu::winograd_workspace_floats(d, s, s, ConvPass::forward, 2);
  NanWorkspace short_ws((floats - 1) * sizeof(float));
  CHECK_THROWS_WITH(cpu::winograd_forward(2, d, Tensor{x.data(), s}, Tensor{w.data(), Shape{16, 16, 3, 3}}, Tensor{},
                                          Tensor{y.data(), s}, false, short_ws.ws),
                    Catch::Contains("workspace of"));
  // A convolution the passes do not take (stride 2) is refused, whatever the workspace.
  const Conv2dDesc strided{16, 16, 3, 3, 2, 1, 1, 1};
  NanWorkspace ws(floats * sizeof(float));
  CHECK_THROWS_WITH(cpu::winograd_forward(2, strided, Tensor{x.data(), s}, Tensor{w.data(), Shape{16, 16, 3, 3}},
                                          Tensor{}, Tensor{y.data(), Shape{3, 16, 5, 5}}, false, ws.ws),
                    Catch::Contains("take no such convolution"));
}

TEST_CASE("training through Winograd convolutions: the same losses for a seed, and im2col's within rounding",
          "[conv][cpu][winograd][trainer]") {
  // 32 channels at 48x48 (batch 8): the second convolution runs the Winograd passes.
  const Shape image{3, 48, 48};
  const std::string text = "conv 32 3 pad=1\nrelu\nconv 32 3 pad=1\nrelu\nmaxpool 4\nflatten\ndense 4\n";
  REQUIRE(cpu::winograd_applies(Conv2dDesc{32, 32, 3, 3, 1, 1, 1, 1}, Shape{8, 32, 48, 48}, false, 2));
  auto train = [&] {
    Network net = parse_network(text, image, 4);
    CpuBackend backend(2);
    TrainerOptions options;
    options.batch = 8;
    options.seed = 3;
    options.optimizer.kind = OptimizerKind::sgd;
    options.optimizer.learning_rate = 0.01f;
    options.schedule.kind = ScheduleKind::constant;
    Trainer trainer(net, backend, memory::host_resource(), options);
    testing::SyntheticData data(8 * 4, image, 4, 5);
    std::vector<double> losses;
    for (int step = 0; step < 4; ++step) losses.push_back(trainer.train_step(data.batch(step * 8, 8)).loss);
    return losses;
  };
  const std::vector<double> first = train(), second = train();
  CHECK(first == second);
  CHECK(first.back() < first.front());
  std::vector<double> by_gemm;
  {
    const cpu::WinogradOff off;
    by_gemm = train();
  }
  for (std::size_t i = 0; i < first.size(); ++i) CHECK(first[i] == Approx(by_gemm[i]).epsilon(1e-5));
}
