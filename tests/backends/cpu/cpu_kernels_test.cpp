// CPU kernels against plain reference loops on inputs that reach their special paths: the
// vector lanes and the scalar rest of a row, ties, accumulation, sums in lanes.
#include <catch2/catch.hpp>

#if defined(__linux__)
#include <sched.h>
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/batchnorm_channel.hpp"
#include "backends/cpu/detail/core_placement.hpp"
#include "backends/cpu/detail/parallel.hpp"
#include "tests/backends/cpu/conv_test_data.hpp"
#include "tests/backends/cpu/host_isas.hpp"
#include <cnnengine/engine/core/backend.hpp>

using namespace cnn;

namespace {

// Max pooling's backward as documented: each window's gradient goes to its first element (in
// row-major order) equal to the window's maximum.
std::vector<float> reference_max_pool_backward(const std::vector<float>& x, const std::vector<float>& y,
                                               const std::vector<float>& dy, std::vector<float> dx, int planes, int h,
                                               int w, int k) {
  const int ho = (h - k) / k + 1, wo = (w - k) / k + 1;
  for (int p = 0; p < planes; ++p)
    for (int oh = 0; oh < ho; ++oh)
      for (int ow = 0; ow < wo; ++ow) {
        const std::size_t o = (static_cast<std::size_t>(p) * ho + oh) * wo + ow;
        bool routed = false;
        for (int i = 0; i < k && !routed; ++i)
          for (int j = 0; j < k && !routed; ++j) {
            const std::size_t at = (static_cast<std::size_t>(p) * h + oh * k + i) * w + ow * k + j;
            if (x[at] == y[o]) {
              dx[at] += dy[o];
              routed = true;
            }
          }
      }
  return dx;
}

// Max pooling of k x k windows at stride s, padded by p, as documented: each window's maximum over
// its part inside the input (a chain from -inf, NaNs skipped), and backward its gradient added to
// the first element (in row-major order) equal to it, window after window.
struct PoolCase {
  int h, w, k, s, p;
  bool ceil = false;  // PyTorch's ceil_mode: one more window where the stride leaves inputs out
  int ho() const { return pooled(h); }
  int wo() const { return pooled(w); }
  int pooled(int in) const {
    int out = (in + 2 * p - k + (ceil ? s - 1 : 0)) / s + 1;
    if (ceil && (out - 1) * s >= in + p) --out;
    return out;
  }
};

template <class F>
void each_window_input(const PoolCase& c, int oh, int ow, F&& f) {
  for (int i = std::max(oh * c.s - c.p, 0); i < std::min(oh * c.s - c.p + c.k, c.h); ++i)
    for (int j = std::max(ow * c.s - c.p, 0); j < std::min(ow * c.s - c.p + c.k, c.w); ++j)
      if (!f(static_cast<std::size_t>(i) * c.w + j)) return;
}

std::vector<float> reference_max_pool_forward(const PoolCase& c, const std::vector<float>& x, int planes) {
  std::vector<float> y(static_cast<std::size_t>(planes) * c.ho() * c.wo());
  for (int p = 0; p < planes; ++p)
    for (int oh = 0; oh < c.ho(); ++oh)
      for (int ow = 0; ow < c.wo(); ++ow) {
        float m = -std::numeric_limits<float>::infinity();
        each_window_input(c, oh, ow, [&](std::size_t at) {
          m = std::max(m, x[static_cast<std::size_t>(p) * c.h * c.w + at]);
          return true;
        });
        y[(static_cast<std::size_t>(p) * c.ho() + oh) * c.wo() + ow] = m;
      }
  return y;
}

std::vector<float> reference_max_pool_backward(const PoolCase& c, const std::vector<float>& x,
                                               const std::vector<float>& y, const std::vector<float>& dy,
                                               std::vector<float> dx, int planes) {
  for (int p = 0; p < planes; ++p)
    for (int oh = 0; oh < c.ho(); ++oh)
      for (int ow = 0; ow < c.wo(); ++ow) {
        const std::size_t o = (static_cast<std::size_t>(p) * c.ho() + oh) * c.wo() + ow;
        each_window_input(c, oh, ow, [&](std::size_t at) {
          const std::size_t in = static_cast<std::size_t>(p) * c.h * c.w + at;
          if (x[in] != y[o]) return true;
          dx[in] += dy[o];
          return false;
        });
      }
  return dx;
}

}  // namespace

TEST_CASE("max pooling 2x2 routes ties to the first element, in vector lanes and the rest of a row", "[cpu][pool]") {
  for (cpu::CpuIsa isa : testing::host_isas()) {
    for (int threads : {1, 2})
      for (const auto [h, w] : {std::pair{8, 8}, std::pair{6, 18}, std::pair{28, 28}, std::pair{14, 14},
                                std::pair{7, 11}, std::pair{5, 17}, std::pair{4, 34}, std::pair{3, 40}})
        for (bool accumulate : {false, true}) {
          CAPTURE(cpu::isa_name(isa), threads, h, w, accumulate);
          const cpu::IsaLimit limit(isa);
          CpuBackend backend(threads);
          const int n = 3, c = 5, planes = n * c, ho = h / 2, wo = w / 2;
          std::vector<float> x(static_cast<std::size_t>(planes) * h * w), y(static_cast<std::size_t>(planes) * ho * wo),
              dy(y.size()), dx(x.size());
          // Four values only: most windows hold ties, some of them all four equal.
          for (std::size_t i = 0; i < x.size(); ++i)
            x[i] = static_cast<float>(static_cast<int>(4 * uniform01(7, i))) - 1.f;
          for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = 2.f * uniform01(8, i) - 1.f;
          for (std::size_t i = 0; i < dx.size(); ++i) dx[i] = accumulate ? uniform01(9, i) : 123.f;
          const Pool2dDesc d;  // max, 2x2, stride 2
          backend.pool2d_forward(d, Tensor{x.data(), Shape{n, c, h, w}}, Tensor{y.data(), Shape{n, c, ho, wo}});
          std::vector<float> want = accumulate ? dx : std::vector<float>(dx.size(), 0.f);
          want = reference_max_pool_backward(x, y, dy, want, planes, h, w, 2);
          backend.pool2d_backward(d, Tensor{x.data(), Shape{n, c, h, w}}, Tensor{y.data(), Shape{n, c, ho, wo}},
                                  Tensor{dy.data(), Shape{n, c, ho, wo}}, Tensor{dx.data(), Shape{n, c, h, w}},
                                  accumulate);
          std::size_t wrong = 0;
          for (std::size_t i = 0; i < dx.size(); ++i) wrong += dx[i] != want[i];
          CHECK(wrong == 0);
        }
  }
}

TEST_CASE("max pooling 3x3 at stride 2 gives the general path's bits, borders, ties and NaNs included",
          "[cpu][pool]") {
  // torchvision's stem (padded by 1) and unpadded, on even and odd sides, in ceil mode (a last
  // window reaching past the input), down to planes with no window whole inside them.
  const PoolCase cases[] = {{112, 112, 3, 2, 1}, {9, 13, 3, 2, 1}, {10, 7, 3, 2, 0},
                            {3, 3, 3, 2, 1},     {2, 5, 3, 2, 1},  {1, 1, 3, 2, 1},
                            {4, 3, 3, 2, 2},     {6, 6, 3, 2, 0},  {10, 12, 3, 2, 1, true},
                            {9, 12, 3, 2, 0, true}};
  for (const PoolCase& pc : cases)
    for (int threads : {1, 2})
      for (bool accumulate : {false, true}) {
        CAPTURE(pc.h, pc.w, pc.p, pc.ceil, threads, accumulate);
        CpuBackend backend(threads);
        const int n = 2, c = 3, planes = n * c, ho = pc.ho(), wo = pc.wo();
        std::vector<float> x(static_cast<std::size_t>(planes) * pc.h * pc.w);
        std::vector<float> y(static_cast<std::size_t>(planes) * ho * wo), dy(y.size()), dx(x.size());
        // Four values, so that most windows hold ties, and a NaN now and then.
        for (std::size_t i = 0; i < x.size(); ++i)
          x[i] = static_cast<float>(static_cast<int>(4 * uniform01(7, i))) - 1.f;
        for (std::size_t i = 0; i < x.size(); i += 7) x[i] = std::numeric_limits<float>::quiet_NaN();
        for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = 2.f * uniform01(8, i) - 1.f;
        for (std::size_t i = 0; i < dx.size(); ++i) dx[i] = accumulate ? uniform01(9, i) : 123.f;
        Pool2dDesc d;
        d.window_h = d.window_w = 3;
        d.pad_h = d.pad_w = pc.p;
        backend.pool2d_forward(d, Tensor{x.data(), Shape{n, c, pc.h, pc.w}}, Tensor{y.data(), Shape{n, c, ho, wo}});
        const std::vector<float> want_y = reference_max_pool_forward(pc, x, planes);
        CHECK(std::memcmp(y.data(), want_y.data(), y.size() * sizeof(float)) == 0);
        const std::vector<float> want_dx = reference_max_pool_backward(
            pc, x, want_y, dy, accumulate ? dx : std::vector<float>(dx.size(), 0.f), planes);
        backend.pool2d_backward(d, Tensor{x.data(), Shape{n, c, pc.h, pc.w}}, Tensor{y.data(), Shape{n, c, ho, wo}},
                                Tensor{dy.data(), Shape{n, c, ho, wo}}, Tensor{dx.data(), Shape{n, c, pc.h, pc.w}},
                                accumulate);
        CHECK(std::memcmp(dx.data(), want_dx.data(), dx.size() * sizeof(float)) == 0);
      }
}

namespace {

struct ConvCase {
  int cin, h, w, cout, kh, kw, stride, pad;
};

// y[n][o][oh][ow] = sum over c, i, j of x[n][c][oh*s - p + i][ow*s - p + j] w[o][c][i][j], in double.
void reference_conv(const ConvCase& k, int n, const std::vector<float>& x, const std::vector<float>& w,
                    std::vector<double>& y, int ho, int wo) {
  for (int b = 0; b < n; ++b)
    for (int o = 0; o < k.cout; ++o)
      for (int oh = 0; oh < ho; ++oh)
        for (int ow = 0; ow < wo; ++ow) {
          double sum = 0;
          for (int c = 0; c < k.cin; ++c)
            for (int i = 0; i < k.kh; ++i)
              for (int j = 0; j < k.kw; ++j) {
                const int ih = oh * k.stride - k.pad + i, iw = ow * k.stride - k.pad + j;
                if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
                sum += static_cast<double>(x[((static_cast<std::size_t>(b) * k.cin + c) * k.h + ih) * k.w + iw]) *
                       w[((static_cast<std::size_t>(o) * k.cin + c) * k.kh + i) * k.kw + j];
              }
          y[((static_cast<std::size_t>(b) * k.cout + o) * ho + oh) * wo + ow] = sum;
        }
}

}  // namespace

// The column matrix is built and added back as flat shifts for stride-1 convolutions with as many
// output columns as input columns, row by row otherwise: both against a direct convolution,
// forward, backward data (writing and accumulating) and backward filter, images as narrow as one
// column.
TEST_CASE("convolution forward and backward match a direct convolution", "[cpu][conv]") {
  const ConvCase cases[] = {{3, 6, 7, 4, 3, 3, 1, 1}, {2, 1, 1, 3, 3, 3, 1, 1}, {2, 2, 3, 2, 3, 3, 1, 1},
                            {2, 5, 4, 3, 1, 3, 1, 1}, {2, 6, 6, 2, 5, 5, 1, 2}, {3, 7, 6, 2, 3, 3, 2, 1},
                            {2, 5, 5, 3, 1, 1, 1, 0}, {1, 12, 20, 4, 3, 3, 1, 1}};
  for (int threads : {1, 2})
    for (const ConvCase& k : cases)
      for (bool accumulate : {false, true}) {
        CAPTURE(threads, k.cin, k.h, k.w, k.cout, k.kh, k.kw, k.stride, k.pad, accumulate);
        CpuBackend backend(threads);
        const int n = 3, ho = (k.h + 2 * k.pad - k.kh) / k.stride + 1, wo = (k.w + 2 * k.pad - k.kw) / k.stride + 1;
        const Conv2dDesc d{k.cin, k.cout, k.kh, k.kw, k.stride, k.pad};
        const Shape xs{n, k.cin, k.h, k.w}, ys{n, k.cout, ho, wo};
        std::vector<float> x(xs.elements()), w(static_cast<std::size_t>(k.cout) * k.cin * k.kh * k.kw), y(ys.elements()),
            dy(ys.elements()), dx(xs.elements());
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = 2.f * uniform01(11, i) - 1.f;
        for (std::size_t i = 0; i < w.size(); ++i) w[i] = 2.f * uniform01(12, i) - 1.f;
        for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = 2.f * uniform01(13, i) - 1.f;
        for (std::size_t i = 0; i < dx.size(); ++i) dx[i] = accumulate ? uniform01(14, i) : 7.f;
        const std::vector<float> dx_before = dx;
        std::vector<float> ws(backend.conv2d_workspace_bytes(d, xs, ys, ConvPass::backward, 0) / sizeof(float) + 16);
        std::vector<float> wf(backend.conv2d_workspace_bytes(d, xs, ys, ConvPass::forward, 0) / sizeof(float) + 16);
        auto aligned = [](std::vector<float>& v, std::size_t floats) {
          void* p = v.data();
          std::size_t space = v.size() * sizeof(float);
          return Workspace{std::align(64, floats * sizeof(float), p, space), floats * sizeof(float)};
        };
        backend.conv2d_forward(d, Tensor{x.data(), xs}, Tensor{w.data(), Shape{k.cout, k.cin, k.kh, k.kw}}, Tensor{},
                               Tensor{y.data(), ys}, false, aligned(wf, wf.size() - 16));
        std::vector<double> want(ys.elements());
        reference_conv(k, n, x, w, want, ho, wo);
        for (std::size_t i = 0; i < y.size(); ++i) REQUIRE(y[i] == Approx(want[i]).margin(1e-5));

        backend.conv2d_backward_data(d, Tensor{dy.data(), ys}, Tensor{w.data(), Shape{k.cout, k.cin, k.kh, k.kw}},
                                     Tensor{dx.data(), xs}, accumulate, aligned(ws, ws.size() - 16));
        // dx by the definition: the derivative of sum(y * dy) by x, from the same reference.
        for (std::size_t i = 0; i < x.size(); ++i) {
          std::vector<float> unit(x.size(), 0.f);
          unit[i] = 1.f;
          std::vector<double> response(ys.elements());
          reference_conv(k, n, unit, w, response, ho, wo);
          double grad = accumulate ? dx_before[i] : 0.0;
          for (std::size_t o = 0; o < response.size(); ++o) grad += response[o] * dy[o];
          REQUIRE(dx[i] == Approx(grad).margin(1e-5));
        }

        // dw (accumulating, as always): the derivative of sum(y * dy) by w.
        std::vector<float> dw(w.size(), 0.5f), dbias(static_cast<std::size_t>(k.cout), 0.25f);
        backend.conv2d_backward_filter(d, Tensor{x.data(), xs}, Tensor{dy.data(), ys},
                                       Tensor{dw.data(), Shape{k.cout, k.cin, k.kh, k.kw}},
                                       Tensor{dbias.data(), Shape{k.cout}}, aligned(ws, ws.size() - 16));
        for (std::size_t i = 0; i < w.size(); ++i) {
          std::vector<float> unit(w.size(), 0.f);
          unit[i] = 1.f;
          std::vector<double> response(ys.elements());
          reference_conv(k, n, x, unit, response, ho, wo);
          double grad = 0.5;
          for (std::size_t o = 0; o < response.size(); ++o) grad += response[o] * dy[o];
          REQUIRE(dw[i] == Approx(grad).margin(1e-4));
        }
      }
}

// Note [Images side by side]: on small maps backward-filter multiplies several images' dy and
// columns in one product. A 3x3 layer of 512 channels on 7 x 7 (its columns packed from the image:
// 3 images a product) and a 1x1 layer on 5 x 5 (7 images), over batches that leave a shorter
// last group, on one and two threads, against the definition; the workspace asked for is the one
// given (NaN-filled: a read of what the pass did not write would show).
TEST_CASE("backward-filter on small maps, several images a product, matches the definition", "[cpu][conv]") {
  const ConvCase cases[] = {{512, 7, 7, 8, 3, 3, 1, 1}, {16, 5, 5, 12, 1, 1, 1, 0}};
  for (int threads : {1, 2})
    for (const ConvCase& k : cases)
      for (int n : {1, 5, 9}) {
        CAPTURE(threads, k.cin, k.h, k.kh, n);
        CpuBackend backend(threads);
        const int ho = k.h + 2 * k.pad - k.kh + 1, wo = k.w + 2 * k.pad - k.kw + 1;
        const Conv2dDesc d{k.cin, k.cout, k.kh, k.kw, k.stride, k.pad};
        const Shape xs{n, k.cin, k.h, k.w}, ys{n, k.cout, ho, wo};
        std::vector<float> x(xs.elements()), dy(ys.elements());
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = 2.f * uniform01(21, i) - 1.f;
        for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = 2.f * uniform01(22, i) - 1.f;
        const std::size_t taps = static_cast<std::size_t>(k.kh) * k.kw;
        std::vector<float> dw(static_cast<std::size_t>(k.cout) * k.cin * taps, 0.5f), dbias(k.cout, 0.25f);
        const testing::NanWorkspace ws(backend.conv2d_workspace_bytes(d, xs, ys, ConvPass::backward, 0));
        backend.conv2d_backward_filter(d, Tensor{x.data(), xs}, Tensor{dy.data(), ys},
                                       Tensor{dw.data(), Shape{k.cout, k.cin, k.kh, k.kw}},
                                       Tensor{dbias.data(), Shape{k.cout}}, ws.ws);
        std::size_t wrong = 0;
        for (int o = 0; o < k.cout; ++o) {
          double bias = 0.25;
          for (int b = 0; b < n; ++b)
            for (int p = 0; p < ho * wo; ++p) bias += dy[(static_cast<std::size_t>(b) * k.cout + o) * ho * wo + p];
          wrong += !(std::abs(dbias[o] - bias) <= 1e-4);  // NaN counts as wrong
          for (int c = 0; c < k.cin; ++c)
            for (int i = 0; i < k.kh; ++i)
              for (int j = 0; j < k.kw; ++j) {
                double sum = 0.5;
                for (int b = 0; b < n; ++b)
                  for (int oh = 0; oh < ho; ++oh)
                    for (int ow = 0; ow < wo; ++ow) {
                      const int ih = oh - k.pad + i, iw = ow - k.pad + j;
                      if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
                      sum += static_cast<double>(dy[((static_cast<std::size_t>(b) * k.cout + o) * ho + oh) * wo + ow]) *
                             x[((static_cast<std::size_t>(b) * k.cin + c) * k.h + ih) * k.w + iw];
                    }
                wrong += !(std::abs(dw[((static_cast<std::size_t>(o) * k.cin + c) * k.kh + i) * k.kw + j] - sum) <= 1e-4);
              }
        }
        CHECK(wrong == 0);
      }
}

// Note [Work that waits for no one]: every range runs exactly once whoever runs it, also when
// two threads submit work at once (one of them then runs its ranges itself) and when a range
// submits work of its own.
TEST_CASE("the CPU work pool runs every range once, from several threads and nested", "[cpu][pool]") {
  cpu::WorkPool::instance().reserve(3);
  auto check = [](int threads, std::size_t n) {
    std::vector<std::atomic<int>> hits(n);
    std::vector<int> ranges_seen(static_cast<std::size_t>(threads), 0);
    const int count = cpu::parallel_ranges(threads, n, [&](int r, std::size_t b, std::size_t e) {
      ranges_seen[static_cast<std::size_t>(r)] += 1;
      for (std::size_t i = b; i < e; ++i) hits[i] += 1;
      // A kernel inside a range: runs inline, still once per range.
      std::atomic<int> inner{0};
      cpu::parallel_ranges(2, 10, [&](int, std::size_t ib, std::size_t ie) { inner += static_cast<int>(ie - ib); });
      if (inner != 10) hits[b] += 100;
    });
    bool ok = count == cpu::range_threads(threads, n);
    for (auto& h : hits) ok = ok && h == 1;
    for (int r = 0; r < count; ++r) ok = ok && ranges_seen[static_cast<std::size_t>(r)] == 1;
    return ok;
  };
  for (int round = 0; round < 200; ++round) REQUIRE(check(2, 1000));
  REQUIRE(check(4, 3));
  std::atomic<int> failures{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c)
    callers.emplace_back([&] {
      for (int round = 0; round < 300; ++round)
        if (!check(2 + round % 3, 257)) ++failures;
    });
  for (auto& t : callers) t.join();
  CHECK(failures == 0);
}

#if defined(__linux__)
// Note [A worker woken on its caller's core]: the move leaves the thread on another core and
// allowed everywhere it was; a thread allowed on one core alone stays there, its mask untouched.
// A thread of its own does the moving, so that the test runner's affinity is never touched.
TEST_CASE("a thread moved off its core runs on another and keeps every core it was allowed on", "[cpu][pool]") {
  struct Seen {
    int cores_allowed = 0, core = -1, core_after = -1;
    bool moved = false, same_mask = false;
    bool moved_from_its_one_core = true, one_core_mask_kept = false, moved_off_no_core = true;
  } seen;
  std::thread([&seen] {
    cpu_set_t before, after, one, still;
    if (sched_getaffinity(0, sizeof before, &before) != 0) return;
    seen.cores_allowed = CPU_COUNT(&before);
    seen.core = cpu::current_core();
    seen.moved = cpu::move_off_core(seen.core);
    seen.core_after = cpu::current_core();
    seen.same_mask = sched_getaffinity(0, sizeof after, &after) == 0 && CPU_EQUAL(&before, &after);

    CPU_ZERO(&one);
    CPU_SET(seen.core_after, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) return;
    seen.moved_from_its_one_core = cpu::move_off_core(seen.core_after);
    seen.one_core_mask_kept = sched_getaffinity(0, sizeof still, &still) == 0 && CPU_EQUAL(&one, &still);
    seen.moved_off_no_core = cpu::move_off_core(-1);
  }).join();
  REQUIRE(seen.cores_allowed >= 1);
  REQUIRE(seen.core >= 0);
  CHECK(seen.moved == (seen.cores_allowed >= 2));
  if (seen.cores_allowed >= 2) CHECK(seen.core_after != seen.core);
  CHECK(seen.same_mask);
  CHECK_FALSE(seen.moved_from_its_one_core);
  CHECK(seen.one_core_mask_kept);
  CHECK_FALSE(seen.moved_off_no_core);
}
#endif

TEST_CASE("batchnorm's channel sums in lanes match one running sum, whatever the plane's size and the threads",
          "[cpu][batchnorm]") {
  std::mt19937 random(7);
  std::normal_distribution<float> normal(3.0f, 2.0f);  // a mean away from zero
  // Planes of 1 ([N, C]), fewer values than lanes, exactly the lanes, one more, two lanes' worth,
  // three, and 63 (the loop's steps of 16 and 8 values and its tail).
  for (const Shape shape : {Shape{9, 3}, Shape{4, 3, 1, 7}, Shape{4, 3, 2, 4}, Shape{4, 3, 3, 3}, Shape{3, 2, 4, 4},
                            Shape{3, 2, 4, 6}, Shape{5, 2, 7, 9}}) {
    INFO(shape.str());
    std::vector<float> x(shape.elements()), dy(shape.elements());
    for (float& v : x) v = normal(random);
    for (float& v : dy) v = normal(random) - 3.0f;
    const Tensor xt{x.data(), shape};
    const int c = xt.c();
    const std::size_t hw = shape.elements() / static_cast<std::size_t>(xt.n()) / static_cast<std::size_t>(c);
    std::vector<double> sum(static_cast<std::size_t>(c)), sum_dy(sum.size()), sum_dy_x(sum.size());
    for (int i = 0; i < xt.n(); ++i)
      for (int ch = 0; ch < c; ++ch)
        for (std::size_t k = 0; k < hw; ++k) {
          const std::size_t at = (static_cast<std::size_t>(i) * c + ch) * hw + k;
          sum[ch] += x[at];
          sum_dy[ch] += dy[at];
          sum_dy_x[ch] += double(dy[at]) * x[at];
        }
    for (int ch = 0; ch < c; ++ch) {
      const auto channel = static_cast<std::size_t>(ch);
      CHECK(cpu::channel_sum(xt, channel, [&](std::size_t i) { return double(x[i]); }) ==
            Approx(sum[channel]).epsilon(1e-13));
      double lanes_dy = 0.0, lanes_dy_x = 0.0;
      cpu::channel_sums(
          xt, channel, [&](std::size_t i) { return double(dy[i]); },
          [&](std::size_t i) { return double(dy[i]) * x[i]; }, lanes_dy, lanes_dy_x);
      CHECK(lanes_dy == Approx(sum_dy[channel]).epsilon(1e-13));
      CHECK(lanes_dy_x == Approx(sum_dy_x[channel]).epsilon(1e-13));

      // The lanes exactly: value k of each plane into lane k % 8 in order, then the fixed tree;
      // the arrays fetched ahead change nothing. (Floats' sums in double are exact; thirds round.)
      const auto third = [&](std::size_t i) { return double(x[i]) / 3.0; };
      double lane[cpu::kSumLanes] = {};
      for (int i = 0; i < xt.n(); ++i)
        for (std::size_t k = 0; k < hw; ++k)
          lane[k % cpu::kSumLanes] += third((static_cast<std::size_t>(i) * c + ch) * hw + k);
      const double in_lanes = cpu::lanes_total(lane);
      CHECK(cpu::channel_sum(xt, channel, third) == in_lanes);
      CHECK(cpu::channel_sum(xt, channel, third, x.data(), dy.data()) == in_lanes);
    }

    // Training's statistics and gradients: the same bits on one thread and on two.
    auto run = [&](int threads) {
      CpuBackend cpu(threads);
      const Shape cs{c};
      std::vector<float> gamma(sum.size(), 1.5f), beta(sum.size(), 0.25f), mean(sum.size()), var(sum.size(), 1.0f);
      std::vector<float> saved_mean(sum.size()), saved_inv_std(sum.size()), dgamma(sum.size()), dbeta(sum.size());
      std::vector<float> y(x.size()), dx(x.size());
      auto t = [](std::vector<float>& v, Shape s) { return Tensor{v.data(), s}; };
      cpu.batchnorm_forward_training(xt, t(gamma, cs), t(beta, cs), t(y, shape), t(mean, cs), t(var, cs), 0.1f, 1e-5f,
                                     t(saved_mean, cs), t(saved_inv_std, cs));
      cpu.batchnorm_backward(xt, t(dy, shape), t(gamma, cs), t(saved_mean, cs), t(saved_inv_std, cs), 1e-5f,
                             t(dx, shape), t(dgamma, cs), t(dbeta, cs), false);
      for (int ch = 0; ch < c; ++ch) {
        const double count = static_cast<double>(x.size()) / c;
        CHECK(saved_mean[ch] == Approx(sum[ch] / count).epsilon(1e-6));
        CHECK(dbeta[ch] == Approx(sum_dy[ch]).epsilon(1e-6).margin(1e-5));
      }
      y.insert(y.end(), dx.begin(), dx.end());
      y.insert(y.end(), saved_inv_std.begin(), saved_inv_std.end());
      y.insert(y.end(), dgamma.begin(), dgamma.end());
      return y;
    };
    CHECK(run(1) == run(2));
  }
}

// Note [A convolution and its ReLU in one pass] (step_plan.cpp): on every kernel a forward pass
// may take (along the pixels, the ImageNet stem, the direct kernel at stride 1 and 2, 1x1, the
// Winograd tiles, depthwise, grouped, the matrix product), on every instruction set the host has.
TEST_CASE("a convolution and its ReLU in one call give the bits of the two calls", "[cpu][conv][fusion]") {
  struct Case {
    Conv2dDesc d;
    int h, w;
  };
  const Case cases[] = {
      {{3, 16, 3, 3, 1, 1}, 9, 9},         {{3, 16, 7, 7, 2, 3}, 30, 30},     {{16, 32, 3, 3, 1, 1}, 12, 12},
      {{32, 64, 3, 3, 2, 1}, 7, 7},        {{64, 64, 1, 1, 1, 0}, 8, 8},      {{64, 64, 3, 3, 1, 1}, 20, 20},
      {{16, 16, 3, 3, 1, 1, 1, 16}, 10, 10}, {{16, 16, 3, 3, 1, 1, 1, 4}, 10, 10}, {{5, 7, 3, 3, 1, 1}, 11, 13}};
  for (cpu::CpuIsa isa : testing::host_isas())
    for (int threads : {1, 2})
      for (const Case& k : cases)
        for (bool bias : {false, true}) {
          const Conv2dDesc& d = k.d;
          CAPTURE(cpu::isa_name(isa), threads, d.in_channels, d.out_channels, d.kernel_h, d.stride, d.groups, k.h,
                  bias);
          const cpu::IsaLimit limit(isa);
          CpuBackend backend(threads);
          const int ho = (k.h + 2 * d.padding - d.kernel_h) / d.stride + 1;
          const int wo = (k.w + 2 * d.padding - d.kernel_w) / d.stride + 1;
          const Shape xs{2, d.in_channels, k.h, k.w}, ys{2, d.out_channels, ho, wo};
          const Shape ws{d.out_channels, d.in_channels / d.groups, d.kernel_h, d.kernel_w}, bs{d.out_channels};
          std::vector<float> x = testing::pattern(xs.elements(), 3), w = testing::pattern(ws.elements(), 4);
          std::vector<float> b = testing::pattern(static_cast<std::size_t>(d.out_channels), 5);
          b[1] = std::numeric_limits<float>::quiet_NaN();  // a channel of NaN: max(NaN, 0) is 0 either way
          const Tensor bias_tensor = bias ? Tensor{b.data(), bs} : Tensor{};
          std::vector<float> fused(ys.elements(), 7.f), calls(ys.elements(), 9.f);
          const testing::NanWorkspace space(backend.conv2d_workspace_bytes(d, xs, ys, ConvPass::forward, 0));
          backend.conv2d_relu_forward(d, Tensor{x.data(), xs}, Tensor{w.data(), ws}, bias_tensor,
                                      Tensor{fused.data(), ys}, space.ws);
          backend.conv2d_forward(d, Tensor{x.data(), xs}, Tensor{w.data(), ws}, bias_tensor, Tensor{calls.data(), ys},
                                 false, space.ws);
          backend.relu_forward(Tensor{calls.data(), ys}, Tensor{calls.data(), ys});
          CHECK(testing::same_bits(fused, calls));
          CHECK(std::count(calls.begin(), calls.end(), 0.f) > 0);  // the ReLU cut some
          CHECK(*std::min_element(fused.begin(), fused.end()) >= 0.f);
        }
}

TEST_CASE("BatchNorm, add and ReLU in one pass each way give the bits of the calls they are made of",
          "[cpu][batchnorm][fusion]") {
  std::mt19937 random(11);
  std::normal_distribution<float> normal(0.5f, 2.0f);
  // Planes of 1, fewer values than the lanes, one more than them, and 63.
  for (const Shape shape : {Shape{9, 3}, Shape{4, 3, 1, 7}, Shape{4, 3, 3, 3}, Shape{5, 2, 7, 9}}) {
    const std::size_t size = shape.elements();
    const int c = shape[1];
    const Shape cs{c};
    std::vector<float> x(size), residual(size), dy(size), before_dx(size), before_dresidual(size);
    for (float& v : x) v = normal(random);
    for (float& v : residual) v = normal(random);
    for (float& v : dy) v = normal(random);
    for (float& v : before_dx) v = normal(random);
    for (float& v : before_dresidual) v = normal(random);
    residual[1] = std::numeric_limits<float>::quiet_NaN();  // max(NaN, 0) is 0 either way
    residual[2] = -0.0f;
    auto t = [](std::vector<float>& v, Shape s) { return Tensor{v.data(), s}; };
    struct Outputs {
      std::vector<float> y, mean, var, saved_mean, saved_inv_std, dx, dgamma, dbeta, dresidual;
    };
    // accumulate: dx is added to; residual_gradient: 0 none, 1 written, 2 added to.
    auto run = [&](bool fused, bool accumulate, int residual_gradient) {
      CpuBackend cpu(2);
      std::vector<float> gamma(static_cast<std::size_t>(c), 1.5f), beta(gamma.size(), -0.25f);
      Outputs o{std::vector<float>(size), std::vector<float>(gamma.size(), 0.1f), std::vector<float>(gamma.size(), 1.f),
                std::vector<float>(gamma.size()), std::vector<float>(gamma.size()), before_dx,
                std::vector<float>(gamma.size(), 0.5f), std::vector<float>(gamma.size(), 0.5f), before_dresidual};
      std::vector<float> grad = dy;
      const Tensor xt = t(x, shape), rt = t(residual, shape), y = t(o.y, shape), dyt = t(grad, shape);
      const Tensor dres = residual_gradient == 0 ? Tensor{} : t(o.dresidual, shape);
      if (fused) {
        cpu.batchnorm_add_relu_forward_training(xt, rt, t(gamma, cs), t(beta, cs), y, t(o.mean, cs), t(o.var, cs),
                                                0.1f, 1e-5f, t(o.saved_mean, cs), t(o.saved_inv_std, cs));
        cpu.batchnorm_add_relu_backward(xt, y, dyt, t(gamma, cs), t(o.saved_mean, cs), t(o.saved_inv_std, cs), 1e-5f,
                                        t(o.dx, shape), t(o.dgamma, cs), t(o.dbeta, cs), accumulate, dres,
                                        residual_gradient == 2);
        return o;
      }
      cpu.batchnorm_forward_training(xt, t(gamma, cs), t(beta, cs), y, t(o.mean, cs), t(o.var, cs), 0.1f, 1e-5f,
                                     t(o.saved_mean, cs), t(o.saved_inv_std, cs));
      cpu.add(y, rt, y);
      cpu.relu_forward(y, y);
      cpu.relu_backward(y, dyt, dyt, false);
      if (residual_gradient != 0) cpu.copy_or_add(dyt, dres, residual_gradient == 2);
      cpu.batchnorm_backward(xt, dyt, t(gamma, cs), t(o.saved_mean, cs), t(o.saved_inv_std, cs), 1e-5f,
                             t(o.dx, shape), t(o.dgamma, cs), t(o.dbeta, cs), accumulate);
      return o;
    };
    for (bool accumulate : {false, true})
      for (int residual_gradient : {0, 1, 2}) {
        INFO(shape.str() << (accumulate ? ", dx added to" : "") << ", residual gradient " << residual_gradient);
        const Outputs calls = run(false, accumulate, residual_gradient);
        const Outputs one_pass = run(true, accumulate, residual_gradient);
        CHECK(std::count(calls.y.begin(), calls.y.end(), 0.f) > 0);  // the ReLU cut some
        CHECK(std::memcmp(one_pass.y.data(), calls.y.data(), size * sizeof(float)) == 0);
        CHECK(one_pass.mean == calls.mean);
        CHECK(one_pass.var == calls.var);
        CHECK(one_pass.saved_inv_std == calls.saved_inv_std);
        CHECK(std::memcmp(one_pass.dx.data(), calls.dx.data(), size * sizeof(float)) == 0);
        CHECK(one_pass.dgamma == calls.dgamma);
        CHECK(one_pass.dbeta == calls.dbeta);
        CHECK(std::memcmp(one_pass.dresidual.data(), calls.dresidual.data(), size * sizeof(float)) == 0);
        if (residual_gradient == 0) CHECK(one_pass.dresidual == before_dresidual);
      }
  }
}

TEST_CASE("AdamW's update gives the same bits on every instruction set, its vector lanes and the rest alike",
          "[cpu][optimizer]") {
  // 4099 parameters: whole vectors of 16 and 8 and a tail, split at odd places by 1 to 3 threads.
  const std::size_t n = 4099;
  std::vector<float> p0(n), g(n);
  for (std::size_t i = 0; i < n; ++i) {
    p0[i] = (2.f * uniform01(11, i) - 1.f) * std::ldexp(1.f, static_cast<int>(i % 9) - 4);
    g[i] = i % 13 == 0 ? 0.f : (2.f * uniform01(12, i) - 1.f) * std::ldexp(1.f, static_cast<int>(i % 7) - 6);
  }
  auto run = [&](cpu::CpuIsa isa, int threads) {
    const cpu::IsaLimit limit(isa);
    CpuBackend backend(threads);
    std::vector<float> p = p0, m(n, 0.f), v(n, 0.f);
    const AdamWConfig c;
    for (long step = 1; step <= 3; ++step)
      backend.adamw_update(Tensor{p.data(), Shape{static_cast<int>(n)}}, Tensor{g.data(), Shape{static_cast<int>(n)}},
                           Tensor{m.data(), Shape{static_cast<int>(n)}}, Tensor{v.data(), Shape{static_cast<int>(n)}},
                           c, 0.01f, step, nullptr);
    p.insert(p.end(), m.begin(), m.end());
    p.insert(p.end(), v.begin(), v.end());
    return p;
  };
  const std::vector<float> want = run(cpu::CpuIsa::portable, 1);
  for (cpu::CpuIsa isa : testing::host_isas())
    for (int threads : {1, 2, 3}) {
      INFO(cpu::isa_name(isa) << ", " << threads << " threads");
      CHECK(testing::same_bits(run(isa, threads), want));
    }
}
