// The CPU's grouped convolution kernels (backends/cpu/cpu_grouped_conv.cpp) against PyTorch's
// Conv2d written out in double precision: forward (with bias and accumulation), backward-data and
// backward-filter, on shapes that reach their edges (group rows short of a register block, a
// last batch of images short, kernels taller than wide, dilation, 1x1, a channel multiplier),
// with exactly the workspace asked for (filled with NaN first), and the same bits on 1, 2 and 3
// threads.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/grouped_conv.hpp"
#include "tests/backends/cpu/conv_test_data.hpp"
#include "tests/backends/cpu/host_isas.hpp"
#include <cnnengine/engine/core/backend.hpp>

using namespace cnn;
using cnn::testing::NanWorkspace;
using cnn::testing::pattern;
using cnn::testing::same_bits;

namespace {

struct Case {
  std::string name;
  int n, cin, h, w, cout, kh, kw, stride, pad, dilation, groups;
  int ho() const { return (h + 2 * pad - dilation * (kh - 1) - 1) / stride + 1; }
  int wo() const { return (w + 2 * pad - dilation * (kw - 1) - 1) / stride + 1; }
  Conv2dDesc desc() const { return Conv2dDesc{cin, cout, kh, kw, stride, pad, dilation, groups}; }
};

// Visits every (image, out channel, output pixel, in channel of the group, tap) that adds
// x[at_x] * w[at_w] to y[at_y].
template <class Fn>
void each_term(const Case& c, Fn fn) {
  const int cg = c.cin / c.groups, kg = c.cout / c.groups;
  for (int i = 0; i < c.n; ++i)
    for (int o = 0; o < c.cout; ++o)
      for (int oh = 0; oh < c.ho(); ++oh)
        for (int ow = 0; ow < c.wo(); ++ow)
          for (int ci = 0; ci < cg; ++ci)
            for (int ki = 0; ki < c.kh; ++ki)
              for (int kj = 0; kj < c.kw; ++kj) {
                const int ih = oh * c.stride - c.pad + ki * c.dilation, iw = ow * c.stride - c.pad + kj * c.dilation;
                if (ih < 0 || ih >= c.h || iw < 0 || iw >= c.w) continue;
                const int ch = o / kg * cg + ci;
                fn(((static_cast<std::size_t>(i) * c.cin + ch) * c.h + ih) * c.w + iw,
                   ((static_cast<std::size_t>(o) * cg + ci) * c.kh + ki) * c.kw + kj,
                   ((static_cast<std::size_t>(i) * c.cout + o) * c.ho() + oh) * c.wo() + ow);
              }
}

struct Results {
  std::vector<float> y, dx, dw, db;
};

// The backend's passes: y = start_y + conv + bias (accumulating), dx = start_dx + conv^T dy,
// dw = start_dw + dL/dw, db = start_db + dL/db.
Results run(const Case& c, int threads) {
  CpuBackend cpu(threads);
  const Conv2dDesc d = c.desc();
  const Shape xs{c.n, c.cin, c.h, c.w}, ys{c.n, c.cout, c.ho(), c.wo()}, wsh{c.cout, c.cin / c.groups, c.kh, c.kw};
  std::vector<float> x = pattern(xs.elements(), 1), w = pattern(wsh.elements(), 2), bias = pattern(c.cout, 3),
                     dy = pattern(ys.elements(), 4);
  Results r{pattern(ys.elements(), 5), pattern(xs.elements(), 6), pattern(wsh.elements(), 7), pattern(c.cout, 8)};
  const std::size_t limit = std::numeric_limits<std::size_t>::max();
  {
    NanWorkspace ws(cpu.conv2d_workspace_bytes(d, xs, ys, ConvPass::forward, limit));
    cpu.conv2d_forward(d, Tensor{x.data(), xs}, Tensor{w.data(), wsh}, Tensor{bias.data(), Shape{c.cout}},
                       Tensor{r.y.data(), ys}, true, ws.ws);
  }
  NanWorkspace ws(cpu.conv2d_workspace_bytes(d, xs, ys, ConvPass::backward, limit));
  cpu.conv2d_backward_data(d, Tensor{dy.data(), ys}, Tensor{w.data(), wsh}, Tensor{r.dx.data(), xs}, true, ws.ws);
  cpu.conv2d_backward_filter(d, Tensor{x.data(), xs}, Tensor{dy.data(), ys}, Tensor{r.dw.data(), wsh},
                             Tensor{r.db.data(), Shape{c.cout}}, ws.ws);
  return r;
}

Results reference(const Case& c) {
  const Shape xs{c.n, c.cin, c.h, c.w}, ys{c.n, c.cout, c.ho(), c.wo()}, wsh{c.cout, c.cin / c.groups, c.kh, c.kw};
  const std::vector<float> x = pattern(xs.elements(), 1), w = pattern(wsh.elements(), 2), bias = pattern(c.cout, 3),
                           dy = pattern(ys.elements(), 4);
  std::vector<double> y(ys.elements()), dx(xs.elements()), dw(wsh.elements()), db(c.cout);
  each_term(c, [&](std::size_t at_x, std::size_t at_w, std::size_t at_y) {
    y[at_y] += static_cast<double>(x[at_x]) * w[at_w];
    dx[at_x] += static_cast<double>(dy[at_y]) * w[at_w];
    dw[at_w] += static_cast<double>(dy[at_y]) * x[at_x];
  });
  const std::size_t plane = static_cast<std::size_t>(c.ho()) * c.wo();
  for (std::size_t at = 0; at < y.size(); ++at) {
    const std::size_t o = at / plane % static_cast<std::size_t>(c.cout);
    y[at] += bias[o];
    db[o] += dy[at];
  }
  auto plus = [](std::vector<float> start, const std::vector<double>& add) {
    for (std::size_t i = 0; i < start.size(); ++i) start[i] = static_cast<float>(start[i] + add[i]);
    return start;
  };
  return {plus(pattern(ys.elements(), 5), y), plus(pattern(xs.elements(), 6), dx), plus(pattern(wsh.elements(), 7), dw),
          plus(pattern(c.cout, 8), db)};
}

void require_close(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO(what << "[" << i << "]");
    REQUIRE(got[i] == Approx(want[i]).margin(1e-4).epsilon(1e-4));
  }
}

}  // namespace

TEST_CASE("grouped convolutions match PyTorch's Conv2d and give the same bits whatever the thread count", "[conv][cpu]") {
  const Case cases[] = {
      // name                                      n  cin  h   w cout kh kw s  p  d  g
      {"3x3 pad 1, 4 groups of 8 rows",           3, 16, 9, 11, 32, 3, 3, 1, 1, 1, 4},
      {"3x3 pad 1, 32 groups of 4 (ResNeXt)",     2, 64, 7, 7, 64, 3, 3, 1, 1, 1, 32},
      {"3x3, group rows short of a block (5)",     3, 6, 6, 13, 10, 3, 3, 1, 1, 1, 2},
      {"3x3 dilation 2 pad 2, 3 groups",          1, 9, 8, 8, 12, 3, 3, 1, 2, 2, 3},
      {"5x3 pad 1 (taller than wide), no pad to spare", 2, 8, 10, 7, 8, 5, 3, 1, 1, 1, 2},
      {"3x3 no padding, 2 groups",                5, 4, 6, 6, 6, 3, 3, 1, 0, 1, 2},
      {"1x1, 4 groups",                           2, 8, 5, 5, 12, 1, 1, 1, 0, 1, 4},
      {"channel multiplier (groups = in)",        2, 3, 6, 6, 6, 3, 3, 1, 1, 1, 3},
      {"stride 2 (im2col + GEMM)",                2, 8, 9, 9, 8, 3, 3, 2, 1, 1, 2},
  };
  for (const Case& c : cases) {
    SECTION(c.name) {
      const Results want = reference(c);
      for (cpu::CpuIsa isa : testing::host_isas()) {
        INFO("kernels on " << cpu::isa_name(isa));
        const cpu::IsaLimit limit(isa);
        const bool vectors = CNN_ISA_REGIONS && isa >= cpu::CpuIsa::avx2;
        CHECK(cpu::grouped_kernels_apply(c.desc()) == (c.stride == 1 && vectors));
        const Results one = run(c, 1);
        require_close(one.y, want.y, "y");
        require_close(one.dx, want.dx, "dx");
        require_close(one.dw, want.dw, "dw");
        require_close(one.db, want.db, "db");
        for (int threads : {2, 3}) {
          INFO(threads << " threads");
          const Results other = run(c, threads);
          CHECK(same_bits(other.y, one.y));
          CHECK(same_bits(other.dx, one.dx));
          // im2col's filter gradients (stride 2, or no vector kernels) add per-thread partials
          // (the same bits for one thread count), and Eigen's bias sums take their order from the data's alignment, which the step arena
          // fixes (64 bytes) and these vectors do not: held to the reference above only.
          if (cpu::grouped_kernels_apply(c.desc())) {
            CHECK(same_bits(other.dw, one.dw));
            CHECK(same_bits(other.db, one.db));
          }
        }
      }
    }
  }
}

TEST_CASE("grouped convolution workspace: far less than im2col's column matrix", "[conv][cpu]") {
  // 32 images of 128 channels 28x28 in 4 groups, 2 threads: the padded planes of two (image,
  // group) pairs and the packed weights; backward adds backward-filter's two images side by side.
  CpuBackend cpu(2);
  const Conv2dDesc d{128, 128, 3, 3, 1, 1, 1, 4};
  const Shape s{32, 128, 28, 28};
  const std::size_t bytes = cpu.conv2d_workspace_bytes(d, s, s, ConvPass::forward, 0);
  const std::size_t columns = 2 * std::size_t{32 * 9} * (28 * 28) * sizeof(float);  // im2col's, one per thread
  if (CNN_ISA_REGIONS && cpu::isa() >= cpu::CpuIsa::avx2) CHECK(bytes < columns / 2);  // else im2col's
  if (CNN_ISA_REGIONS && cpu::isa() >= cpu::CpuIsa::avx512) {  // the exact layout, for 16-float vectors
    const std::size_t packed = 4 * 4 * 8 * 32 * 9;       // groups x row blocks x rows x in x taps
    const std::size_t planes = 31 * 900 + 18 * 48 + 62;  // 32 padded 30x30 planes, the last read to chunk 18
    const std::size_t slot = (planes + 15) / 16 * 16;
    CHECK(bytes == (packed + 2 * slot) * sizeof(float));
  }
}
