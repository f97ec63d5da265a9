// Convolution as im2col + one matrix product per image, images spread over threads. Each
// product's packing buffers come from the layer's planned workspace (backends/cpu/detail/gemm.hpp).
#include <Eigen/Core>
#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "cnnengine/backends/cpu/cpu_backend.hpp"
#include "cnnengine/backends/cpu/detail/gemm.hpp"
#include "cnnengine/backends/cpu/detail/parallel.hpp"

namespace cnn {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<RowMatrix>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;
using cpu::aligned_floats;
using cpu::GemmOperand;
using cpu::GemmOutput;

struct ConvGeometry {
  int cin, h, w, cout, hout, wout, kh, kw, stride, pad;
  int patch() const { return cin * kh * kw; }          // K: rows of the column matrix
  int pixels() const { return hout * wout; }           // P: its columns
  bool is_pointwise() const { return kh == 1 && kw == 1 && stride == 1 && pad == 0; }
};

ConvGeometry geometry(const Conv2dDesc& d, const Shape& x, const Shape& y) {
  return {x[1], x[2], x[3], d.out_channels, y[2], y[3], d.kernel_h, d.kernel_w, d.stride, d.padding};
}

// The output columns [lo, hi) whose input column ow * stride - pad + kj lies inside the image.
struct ColumnRange {
  int lo, hi;
};

ColumnRange valid_columns(const ConvGeometry& g, int kj) {
  const int offset = kj - g.pad;  // iw = ow * stride + offset
  int lo = offset >= 0 ? 0 : (-offset + g.stride - 1) / g.stride;
  int hi = g.w - offset <= 0 ? 0 : (g.w - offset + g.stride - 1) / g.stride;
  hi = std::min(hi, g.wout);
  lo = std::min(lo, hi);
  return {lo, hi};
}

void im2col(const ConvGeometry& g, const float* image, float* col) {
  const int P = g.pixels();
  for (int c = 0; c < g.cin; ++c)
    for (int ki = 0; ki < g.kh; ++ki)
      for (int kj = 0; kj < g.kw; ++kj) {
        float* row = col + static_cast<std::size_t>((c * g.kh + ki) * g.kw + kj) * P;
        const float* plane = image + static_cast<std::size_t>(c) * g.h * g.w;
        const ColumnRange cols = valid_columns(g, kj);
        const int offset = kj - g.pad;
        for (int oh = 0; oh < g.hout; ++oh) {
          const int ih = oh * g.stride - g.pad + ki;
          float* out = row + oh * g.wout;
          if (ih < 0 || ih >= g.h) {
            std::fill(out, out + g.wout, 0.f);
            continue;
          }
          const float* in = plane + static_cast<std::size_t>(ih) * g.w + offset;
          std::fill(out, out + cols.lo, 0.f);
          if (g.stride == 1) std::copy(in + cols.lo, in + cols.hi, out + cols.lo);
          else
            for (int ow = cols.lo; ow < cols.hi; ++ow) out[ow] = in[ow * g.stride];
          std::fill(out + cols.hi, out + g.wout, 0.f);
        }
      }
}

void col2im_add(const ConvGeometry& g, const float* col, float* image) {
  const int P = g.pixels();
  for (int c = 0; c < g.cin; ++c)
    for (int ki = 0; ki < g.kh; ++ki)
      for (int kj = 0; kj < g.kw; ++kj) {
        const float* row = col + static_cast<std::size_t>((c * g.kh + ki) * g.kw + kj) * P;
        float* plane = image + static_cast<std::size_t>(c) * g.h * g.w;
        const ColumnRange cols = valid_columns(g, kj);
        const int offset = kj - g.pad;
        for (int oh = 0; oh < g.hout; ++oh) {
          const int ih = oh * g.stride - g.pad + ki;
          if (ih < 0 || ih >= g.h) continue;
          float* out = plane + static_cast<std::size_t>(ih) * g.w + offset;
          const float* in = row + oh * g.wout;
          if (g.stride == 1)
            for (int ow = cols.lo; ow < cols.hi; ++ow) out[ow] += in[ow];
          else
            for (int ow = cols.lo; ow < cols.hi; ++ow) out[ow * g.stride] += in[ow];
        }
      }
}

// One thread's share of a convolution's workspace, in floats (each part 64-byte aligned): the
// column matrix, the partial weight and bias gradients (backward), the products' packing.
struct ConvThreadSpace {
  std::size_t col = 0, partial = 0, packing = 0;
  std::size_t total() const { return col + partial + packing; }
};

ConvThreadSpace thread_space(const ConvGeometry& g, ConvPass pass) {
  const std::size_t K = static_cast<std::size_t>(g.patch()), P = static_cast<std::size_t>(g.pixels()),
                    C = static_cast<std::size_t>(g.cout);
  ConvThreadSpace s;
  s.col = g.is_pointwise() ? 0 : aligned_floats(K * P);
  if (pass == ConvPass::forward) {
    s.packing = cpu::gemm_packing_floats(C, P, K);  // y[C x P] = w[C x K] col[K x P]
  } else {
    s.partial = aligned_floats(C * K + C);
    s.packing = std::max(cpu::gemm_packing_floats(K, P, C),   // dcol[K x P] = w^T dy
                         cpu::gemm_packing_floats(C, K, P));  // dw[C x K] += dy col^T
  }
  return s;
}

void require_workspace(const Workspace& ws, std::size_t needed, const char* what) {
  if (ws.bytes < needed)
    throw std::logic_error(std::string(what) + ": workspace of " + std::to_string(ws.bytes) +
                           " bytes, " + std::to_string(needed) + " needed");
}

}  // namespace

std::size_t CpuBackend::conv2d_workspace_bytes(const Conv2dDesc& d, const Shape& x, const Shape& y,
                                               ConvPass pass, std::size_t) {
  // One share per thread that parallel_ranges runs over the images.
  const auto workers = static_cast<std::size_t>(cpu::range_threads(threads_, static_cast<std::size_t>(std::max(x[0], 1))));
  return workers * thread_space(geometry(d, x, y), pass).total() * sizeof(float);
}

void CpuBackend::conv2d_forward(const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                                const Tensor& bias, Tensor y, Workspace ws) {
  const ConvGeometry g = geometry(d, x.shape, y.shape);
  const std::size_t K = static_cast<std::size_t>(g.patch()), P = static_cast<std::size_t>(g.pixels()),
                    C = static_cast<std::size_t>(g.cout);
  require_workspace(ws, conv2d_workspace_bytes(d, x.shape, y.shape, ConvPass::forward, 0), "conv2d_forward");
  const ConvThreadSpace space = thread_space(g, ConvPass::forward);
  const std::size_t in_stride = x.sample_elements(), out_stride = y.sample_elements();
  cpu::parallel_ranges(threads_, static_cast<std::size_t>(x.n()), [&](int t, std::size_t b, std::size_t e) {
    float* col = static_cast<float*>(ws.data) + static_cast<std::size_t>(t) * space.total();
    const cpu::Packing packing{col + space.col, space.packing};
    for (std::size_t i = b; i < e; ++i) {
      const float* image = x.data + i * in_stride;
      if (!g.is_pointwise()) im2col(g, image, col);
      float* out = y.data + i * out_stride;
      cpu::gemm(C, P, K, GemmOperand{w.data, K}, GemmOperand{g.is_pointwise() ? image : col, P}, GemmOutput{out, P},
                packing);
      if (!bias.empty())
        MatrixMap(out, g.cout, static_cast<Eigen::Index>(P)).colwise() += Eigen::Map<const Eigen::VectorXf>(bias.data, g.cout);
    }
  });
}

void CpuBackend::conv2d_backward_data(const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor dx,
                                      bool accumulate, Workspace ws) {
  const ConvGeometry g = geometry(d, dx.shape, dy.shape);
  const std::size_t K = static_cast<std::size_t>(g.patch()), P = static_cast<std::size_t>(g.pixels()),
                    C = static_cast<std::size_t>(g.cout);
  require_workspace(ws, conv2d_workspace_bytes(d, dx.shape, dy.shape, ConvPass::backward, 0), "conv2d_backward_data");
  const ConvThreadSpace space = thread_space(g, ConvPass::backward);
  const std::size_t in_stride = dx.sample_elements(), out_stride = dy.sample_elements();
  const GemmOperand weights_transposed{w.data, K, true};  // w^T: w is stored [C x K]
  cpu::parallel_ranges(threads_, static_cast<std::size_t>(dx.n()), [&](int t, std::size_t b, std::size_t e) {
    float* col = static_cast<float*>(ws.data) + static_cast<std::size_t>(t) * space.total();
    const cpu::Packing packing{col + space.col + space.partial, space.packing};
    for (std::size_t i = b; i < e; ++i) {
      const GemmOperand grad_out{dy.data + i * out_stride, P};
      float* image = dx.data + i * in_stride;
      if (g.is_pointwise()) {
        cpu::gemm(K, P, C, weights_transposed, grad_out, GemmOutput{image, P, accumulate}, packing);
        continue;
      }
      cpu::gemm(K, P, C, weights_transposed, grad_out, GemmOutput{col, P}, packing);
      if (!accumulate) std::memset(image, 0, in_stride * sizeof(float));
      col2im_add(g, col, image);
    }
  });
}

void CpuBackend::conv2d_backward_filter(const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor dw,
                                        Tensor dbias, Workspace ws) {
  const ConvGeometry g = geometry(d, x.shape, dy.shape);
  const std::size_t K = static_cast<std::size_t>(g.patch()), P = static_cast<std::size_t>(g.pixels()),
                    C = static_cast<std::size_t>(g.cout);
  require_workspace(ws, conv2d_workspace_bytes(d, x.shape, dy.shape, ConvPass::backward, 0), "conv2d_backward_filter");
  const ConvThreadSpace space = thread_space(g, ConvPass::backward);
  const std::size_t grad_floats = C * K + C;
  const std::size_t in_stride = x.sample_elements(), out_stride = dy.sample_elements();
  float* base = static_cast<float*>(ws.data);
  const int used = cpu::parallel_ranges(threads_, static_cast<std::size_t>(x.n()), [&](int t, std::size_t b, std::size_t e) {
    float* col = base + static_cast<std::size_t>(t) * space.total();
    float* partial = col + space.col;
    const cpu::Packing packing{partial + space.partial, space.packing};
    std::memset(partial, 0, grad_floats * sizeof(float));
    Eigen::Map<Eigen::VectorXf> partial_b(partial + C * K, g.cout);
    for (std::size_t i = b; i < e; ++i) {
      const float* image = x.data + i * in_stride;
      if (!g.is_pointwise()) im2col(g, image, col);
      const GemmOperand columns_transposed{g.is_pointwise() ? image : col, P, true};  // col^T: col is [K x P]
      const float* grad_out = dy.data + i * out_stride;
      cpu::gemm(C, K, P, GemmOperand{grad_out, P}, columns_transposed, GemmOutput{partial, K, true}, packing);
      partial_b += ConstMatrixMap(grad_out, g.cout, static_cast<Eigen::Index>(P)).rowwise().sum();
    }
  });
  // Fixed-order reduction of the per-thread partials.
  const std::size_t weight_floats = C * K;
  cpu::parallel_elements(threads_, grad_floats, [&](std::size_t b, std::size_t e) {
    for (std::size_t j = b; j < e; ++j) {
      float sum = 0.f;
      for (int t = 0; t < used; ++t) sum += base[static_cast<std::size_t>(t) * space.total() + space.col + j];
      if (j < weight_floats) dw.data[j] += sum;
      else if (!dbias.empty()) dbias.data[j - weight_floats] += sum;
    }
  });
}

}  // namespace cnn
