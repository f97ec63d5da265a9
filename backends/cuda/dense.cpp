// Dense layers on cuBLAS. The engine's matrices are row-major; cuBLAS is column-major, so each
// row-major product is computed as its transpose: row-major y[N,out] is column-major y^T[out,N].
#include <climits>
#include <stdexcept>
#include <string>

#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include "backends/cuda/detail/descriptors.hpp"
#include "base/error.hpp"

namespace cnn::cuda {
namespace {

constexpr float kOne = 1.0f, kZero = 0.0f;

struct DenseDims {
  int n, in, out;
};

int as_int(std::size_t v, const char* what) {
  if (v > static_cast<std::size_t>(INT_MAX)) throw ShapeError(std::string(what) + " is too large for cuBLAS");
  return static_cast<int>(v);
}

DenseDims dense_dims(const Tensor& x, const Tensor& y, const Tensor& w, const char* call) {
  DenseDims d{x.n(), as_int(x.sample_elements(), "dense input"), as_int(y.sample_elements(), "dense output")};
  if (y.n() != d.n || w.elements() != static_cast<std::size_t>(d.in) * static_cast<std::size_t>(d.out)) {
    throw ShapeError(std::string(call) + ": input " + x.shape.str() + ", weights " + w.shape.str() +
                     " and output " + y.shape.str() + " do not fit together");
  }
  return d;
}

}  // namespace

void CudaBackend::dense_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y, Workspace) {
  activate();
  const DenseDims d = dense_dims(x, y, w, "dense_forward");
  CNN_CHECK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, d.out, d.n, d.in, &kOne, w.data, d.in, x.data,
                        d.in, &kZero, y.data, d.out));
  if (!bias.empty()) {
    // y as [N, out, 1, 1] plus bias as [1, out, 1, 1], broadcast over N.
    TensorDescriptor y_desc, bias_desc;
    set_nchw(y_desc, d.n, d.out, 1, 1);
    set_nchw(bias_desc, 1, d.out, 1, 1);
    CNN_CHECK(cudnnAddTensor(cudnn_, &kOne, bias_desc, bias.data, &kOne, y_desc, y.data));
  }
  touched(x, w, bias, y);
}

void CudaBackend::dense_backward_data(const Tensor& dy, const Tensor& w, Tensor dx, bool accumulate, Workspace) {
  activate();
  const DenseDims d = dense_dims(dx, dy, w, "dense_backward_data");
  const float beta = accumulate ? 1.0f : 0.0f;
  // dx[N,in] = dy[N,out] * w[out,in]
  CNN_CHECK(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, d.in, d.n, d.out, &kOne, w.data, d.in, dy.data,
                        d.out, &beta, dx.data, d.in));
  touched(dy, w, dx);
}

void CudaBackend::dense_backward_weights(const Tensor& x, const Tensor& dy, Tensor dw, Tensor dbias, Workspace) {
  activate();
  const DenseDims d = dense_dims(x, dy, dw, "dense_backward_weights");
  // dw[out,in] += dy^T[out,N] * x[N,in]
  CNN_CHECK(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_T, d.in, d.out, d.n, &kOne, x.data, d.in, dy.data,
                        d.out, &kOne, dw.data, d.in));
  if (!dbias.empty()) {
    // dbias[out] += the sum of dy over N: cuDNN's bias gradient with dy as [N, out, 1, 1].
    TensorDescriptor dy_desc, bias_desc;
    set_nchw(dy_desc, d.n, d.out, 1, 1);
    set_nchw(bias_desc, 1, d.out, 1, 1);
    CNN_CHECK(cudnnConvolutionBackwardBias(cudnn_, &kOne, dy_desc, dy.data, &kOne, bias_desc, dbias.data));
  }
  touched(x, dy, dw, dbias);
}

}  // namespace cnn::cuda
