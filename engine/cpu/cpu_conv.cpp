// Convolution as im2col + one matrix product per image, images spread over threads; dense layers
// as single matrix products that Eigen parallelises itself.
#include <Eigen/Core>
#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "engine/cpu/cpu_backend.hpp"
#include "engine/cpu/parallel.hpp"

namespace cnn {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<RowMatrix>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;
using VectorMap = Eigen::Map<Eigen::VectorXf>;

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

void require_workspace(const Workspace& ws, std::size_t needed, const char* what) {
  if (ws.bytes < needed)
    throw std::logic_error(std::string(what) + ": workspace of " + std::to_string(ws.bytes) +
                           " bytes, " + std::to_string(needed) + " needed");
}

}  // namespace

std::size_t CpuBackend::conv2d_workspace_bytes(const Conv2dDesc& d, const Shape& x, const Shape& y,
                                               ConvPass pass, std::size_t) {
  const ConvGeometry g = geometry(d, x, y);
  const std::size_t workers = static_cast<std::size_t>(std::min(threads_, std::max(x[0], 1)));
  const std::size_t col = g.is_pointwise() ? 0 : static_cast<std::size_t>(g.patch()) * g.pixels();
  if (pass == ConvPass::forward) return workers * col * sizeof(float);
  const std::size_t partial_grads = static_cast<std::size_t>(g.cout) * g.patch() + g.cout;
  return workers * (col + partial_grads) * sizeof(float);
}

void CpuBackend::conv2d_forward(const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                                const Tensor& bias, Tensor y, Workspace ws) {
  const ConvGeometry g = geometry(d, x.shape, y.shape);
  const std::size_t K = static_cast<std::size_t>(g.patch()), P = static_cast<std::size_t>(g.pixels());
  const std::size_t col_floats = g.is_pointwise() ? 0 : K * P;
  require_workspace(ws, conv2d_workspace_bytes(d, x.shape, y.shape, ConvPass::forward, 0), "conv2d_forward");
  const std::size_t in_stride = x.sample_elements(), out_stride = y.sample_elements();
  ConstMatrixMap weights(w.data, g.cout, static_cast<Eigen::Index>(K));
  cpu::parallel_ranges(threads_, static_cast<std::size_t>(x.n()), [&](int t, std::size_t b, std::size_t e) {
    float* col = static_cast<float*>(ws.data) + static_cast<std::size_t>(t) * col_floats;
    for (std::size_t i = b; i < e; ++i) {
      const float* image = x.data + i * in_stride;
      if (!g.is_pointwise()) im2col(g, image, col);
      ConstMatrixMap columns(g.is_pointwise() ? image : col, static_cast<Eigen::Index>(K), static_cast<Eigen::Index>(P));
      MatrixMap out(y.data + i * out_stride, g.cout, static_cast<Eigen::Index>(P));
      out.noalias() = weights * columns;
      if (!bias.empty()) out.colwise() += Eigen::Map<const Eigen::VectorXf>(bias.data, g.cout);
    }
  });
}

void CpuBackend::conv2d_backward_data(const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor dx,
                                      bool accumulate, Workspace ws) {
  const ConvGeometry g = geometry(d, dx.shape, dy.shape);
  const std::size_t K = static_cast<std::size_t>(g.patch()), P = static_cast<std::size_t>(g.pixels());
  require_workspace(ws, conv2d_workspace_bytes(d, dx.shape, dy.shape, ConvPass::backward, 0), "conv2d_backward_data");
  const std::size_t per_thread = (g.is_pointwise() ? 0 : K * P) + static_cast<std::size_t>(g.cout) * K + g.cout;
  const std::size_t in_stride = dx.sample_elements(), out_stride = dy.sample_elements();
  ConstMatrixMap weights(w.data, g.cout, static_cast<Eigen::Index>(K));
  cpu::parallel_ranges(threads_, static_cast<std::size_t>(dx.n()), [&](int t, std::size_t b, std::size_t e) {
    float* col = static_cast<float*>(ws.data) + static_cast<std::size_t>(t) * per_thread;
    for (std::size_t i = b; i < e; ++i) {
      ConstMatrixMap grad_out(dy.data + i * out_stride, g.cout, static_cast<Eigen::Index>(P));
      float* image = dx.data + i * in_stride;
      if (g.is_pointwise()) {
        MatrixMap grad_in(image, static_cast<Eigen::Index>(K), static_cast<Eigen::Index>(P));
        if (accumulate) grad_in.noalias() += weights.transpose() * grad_out;
        else grad_in.noalias() = weights.transpose() * grad_out;
        continue;
      }
      MatrixMap columns(col, static_cast<Eigen::Index>(K), static_cast<Eigen::Index>(P));
      columns.noalias() = weights.transpose() * grad_out;
      if (!accumulate) std::memset(image, 0, in_stride * sizeof(float));
      col2im_add(g, col, image);
    }
  });
}

void CpuBackend::conv2d_backward_filter(const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor dw,
                                        Tensor dbias, Workspace ws) {
  const ConvGeometry g = geometry(d, x.shape, dy.shape);
  const std::size_t K = static_cast<std::size_t>(g.patch()), P = static_cast<std::size_t>(g.pixels());
  require_workspace(ws, conv2d_workspace_bytes(d, x.shape, dy.shape, ConvPass::backward, 0), "conv2d_backward_filter");
  const std::size_t col_floats = g.is_pointwise() ? 0 : K * P;
  const std::size_t grad_floats = static_cast<std::size_t>(g.cout) * K + g.cout;
  const std::size_t per_thread = col_floats + grad_floats;
  const std::size_t in_stride = x.sample_elements(), out_stride = dy.sample_elements();
  float* base = static_cast<float*>(ws.data);
  const int used = cpu::parallel_ranges(threads_, static_cast<std::size_t>(x.n()), [&](int t, std::size_t b, std::size_t e) {
    float* col = base + static_cast<std::size_t>(t) * per_thread;
    float* partial = col + col_floats;
    std::memset(partial, 0, grad_floats * sizeof(float));
    MatrixMap partial_w(partial, g.cout, static_cast<Eigen::Index>(K));
    VectorMap partial_b(partial + static_cast<std::size_t>(g.cout) * K, g.cout);
    for (std::size_t i = b; i < e; ++i) {
      const float* image = x.data + i * in_stride;
      if (!g.is_pointwise()) im2col(g, image, col);
      ConstMatrixMap columns(g.is_pointwise() ? image : col, static_cast<Eigen::Index>(K), static_cast<Eigen::Index>(P));
      ConstMatrixMap grad_out(dy.data + i * out_stride, g.cout, static_cast<Eigen::Index>(P));
      partial_w.noalias() += grad_out * columns.transpose();
      partial_b += grad_out.rowwise().sum();
    }
  });
  // Fixed-order reduction of the per-thread partials.
  const std::size_t weight_floats = static_cast<std::size_t>(g.cout) * K;
  cpu::parallel_elements(threads_, grad_floats, [&](std::size_t b, std::size_t e) {
    for (std::size_t j = b; j < e; ++j) {
      float sum = 0.f;
      for (int t = 0; t < used; ++t) sum += base[static_cast<std::size_t>(t) * per_thread + col_floats + j];
      if (j < weight_floats) dw.data[j] += sum;
      else if (!dbias.empty()) dbias.data[j - weight_floats] += sum;
    }
  });
}

void CpuBackend::dense_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y) {
  const Eigen::Index n = x.n(), in = static_cast<Eigen::Index>(x.sample_elements()),
                     out = static_cast<Eigen::Index>(y.sample_elements());
  ConstMatrixMap input(x.data, n, in);
  ConstMatrixMap weights(w.data, out, in);
  MatrixMap output(y.data, n, out);
  output.noalias() = input * weights.transpose();
  if (!bias.empty()) output.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(bias.data, out);
}

void CpuBackend::dense_backward_data(const Tensor& dy, const Tensor& w, Tensor dx, bool accumulate) {
  const Eigen::Index n = dy.n(), in = static_cast<Eigen::Index>(dx.sample_elements()),
                     out = static_cast<Eigen::Index>(dy.sample_elements());
  ConstMatrixMap grad_out(dy.data, n, out);
  ConstMatrixMap weights(w.data, out, in);
  MatrixMap grad_in(dx.data, n, in);
  if (accumulate) grad_in.noalias() += grad_out * weights;
  else grad_in.noalias() = grad_out * weights;
}

void CpuBackend::dense_backward_weights(const Tensor& x, const Tensor& dy, Tensor dw, Tensor dbias) {
  const Eigen::Index n = x.n(), in = static_cast<Eigen::Index>(x.sample_elements()),
                     out = static_cast<Eigen::Index>(dy.sample_elements());
  ConstMatrixMap input(x.data, n, in);
  ConstMatrixMap grad_out(dy.data, n, out);
  MatrixMap grad_w(dw.data, out, in);
  grad_w.noalias() += grad_out.transpose() * input;
  if (!dbias.empty()) Eigen::Map<Eigen::RowVectorXf>(dbias.data, out) += grad_out.colwise().sum();
}

}  // namespace cnn
