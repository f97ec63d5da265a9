// CPU kernels against plain reference loops on inputs that reach their special paths: the
// vector lanes and the scalar rest of a row, ties, accumulation.
#include <catch2/catch.hpp>

#include <vector>

#include "cnnengine/backends/cpu/cpu_backend.hpp"
#include "cnnengine/engine/detail/counter_rng.hpp"

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

}  // namespace

TEST_CASE("max pooling 2x2 routes ties to the first element, in vector lanes and the rest of a row",
          "[cpu][pool]") {
  for (int threads : {1, 2})
    for (const auto [h, w] : {std::pair{8, 8}, std::pair{6, 18}, std::pair{28, 28}, std::pair{14, 14}, std::pair{7, 11},
                              std::pair{5, 17}})
      for (bool accumulate : {false, true}) {
        CAPTURE(threads, h, w, accumulate);
        CpuBackend backend(threads);
        const int n = 3, c = 5, planes = n * c, ho = h / 2, wo = w / 2;
        std::vector<float> x(static_cast<std::size_t>(planes) * h * w), y(static_cast<std::size_t>(planes) * ho * wo),
            dy(y.size()), dx(x.size());
        // Four values only: most windows hold ties, some of them all four equal.
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(4 * uniform01(7, i))) - 1.f;
        for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = 2.f * uniform01(8, i) - 1.f;
        for (std::size_t i = 0; i < dx.size(); ++i) dx[i] = accumulate ? uniform01(9, i) : 123.f;
        const Pool2dDesc d;  // max, 2x2, stride 2
        backend.pool2d_forward(d, Tensor{x.data(), Shape{n, c, h, w}}, Tensor{y.data(), Shape{n, c, ho, wo}});
        std::vector<float> want = accumulate ? dx : std::vector<float>(dx.size(), 0.f);
        want = reference_max_pool_backward(x, y, dy, want, planes, h, w, 2);
        backend.pool2d_backward(d, Tensor{x.data(), Shape{n, c, h, w}}, Tensor{y.data(), Shape{n, c, ho, wo}},
                                Tensor{dy.data(), Shape{n, c, ho, wo}}, Tensor{dx.data(), Shape{n, c, h, w}}, accumulate);
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < dx.size(); ++i) wrong += dx[i] != want[i];
        CHECK(wrong == 0);
      }
}
