// Dense layers on cuBLAS. The engine's matrices are row-major; cuBLAS is column-major, so each
// row-major product is computed as its transpose: row-major y[N,out] is column-major y^T[out,N].
// In bf16 and fp16 the operands are 16-bit copies in the layer's workspace and the result float
// (Note [16-bit products on CUDA], conv.cpp).
#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string>

#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include "backends/cuda/detail/descriptors.hpp"
#include "backends/cuda/detail/operand_copies.hpp"
#include <cnnengine/base/error.hpp>

namespace cnn::cuda {
namespace {

constexpr float kOne = 1.0f;

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

std::size_t elements(std::size_t rows, std::size_t columns) { return rows * columns; }

cudaDataType_t data_type(ValueFormat format) { return format == ValueFormat::bf16 ? CUDA_R_16BF : CUDA_R_16F; }

// The 16-bit copy of a dense operand, taken from what is left of the layer's workspace.
void* take_copy(OperandCopies& copies, std::size_t elements, const char* call) {
  void* copy = copies.take(elements);
  if (!copy)
    throw DeviceError(std::string(call) +
                      ": its workspace cannot hold the 16-bit copies of its operands "
                      "(dense_workspace_bytes says what it needs)");
  return copy;
}

}  // namespace

void CudaBackend::dense_product(cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k, const Tensor& a,
                                int lda, const Tensor& b, int ldb, float beta, Tensor c, int ldc, Workspace ws,
                                const char* call) {
  if (!products16()) {
    CNN_CHECK(cublasSgemm(cublas_, op_a, op_b, m, n, k, &kOne, a.data, lda, b.data, ldb, &beta, c.data, ldc));
    return;
  }
  OperandCopies copies(ws);
  const void* a16 = operand16(a, take_copy(copies, a.elements(), call));
  const void* b16 = operand16(b, take_copy(copies, b.elements(), call));
  const cudaDataType_t type = data_type(product_format());
  CNN_CHECK(cublasGemmEx(cublas_, op_a, op_b, m, n, k, &kOne, a16, type, lda, b16, type, ldb, &beta, c.data, CUDA_R_32F,
                         ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

std::size_t CudaBackend::do_dense_workspace_bytes(const Shape& x, int out, ConvPass pass) {
  if (!products16() || x.rank < 1 || x[0] <= 0) return 0;
  const std::size_t n = static_cast<std::size_t>(x[0]), in = x.elements() / n, units = static_cast<std::size_t>(out);
  if (pass == ConvPass::forward) return copies_bytes({elements(in, units), elements(n, in)});
  // Backward-weights copies x and dy, backward-data w and dy, one after the other.
  return std::max(copies_bytes({elements(n, in), elements(n, units)}),
                  copies_bytes({elements(in, units), elements(n, units)}));
}

void CudaBackend::do_dense_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y, Workspace ws) {
  activate();
  const DenseDims d = dense_dims(x, y, w, "dense_forward");
  dense_product(CUBLAS_OP_T, CUBLAS_OP_N, d.out, d.n, d.in, w, d.in, x, d.in, 0.0f, y, d.out, ws, "dense_forward");
  if (!bias.empty()) {
    // y as [N, out, 1, 1] plus bias as [1, out, 1, 1], broadcast over N.
    TensorDescriptor y_desc, bias_desc;
    set_nchw(y_desc, d.n, d.out, 1, 1);
    set_nchw(bias_desc, 1, d.out, 1, 1);
    CNN_CHECK(cudnnAddTensor(cudnn_, &kOne, bias_desc, bias.data, &kOne, y_desc, y.data));
  }
  touched(x, packed_range(x), w, bias, y, ws);
}

void CudaBackend::do_dense_backward_data(const Tensor& dy, const Tensor& w, Tensor dx, bool accumulate, Workspace ws) {
  activate();
  const DenseDims d = dense_dims(dx, dy, w, "dense_backward_data");
  // dx[N,in] = dy[N,out] * w[out,in]
  dense_product(CUBLAS_OP_N, CUBLAS_OP_N, d.in, d.n, d.out, w, d.in, dy, d.out, accumulate ? 1.0f : 0.0f, dx, d.in, ws,
                "dense_backward_data");
  touched(dy, w, dx, ws);
}

void CudaBackend::do_dense_backward_weights(const Tensor& x, const Tensor& dy, Tensor dw, Tensor dbias, Workspace ws) {
  activate();
  const DenseDims d = dense_dims(x, dy, dw, "dense_backward_weights");
  // dw[out,in] += dy^T[out,N] * x[N,in]
  dense_product(CUBLAS_OP_N, CUBLAS_OP_T, d.in, d.out, d.n, x, d.in, dy, d.out, 1.0f, dw, d.in, ws,
                "dense_backward_weights");
  if (!dbias.empty()) {
    // dbias[out] += the sum of dy over N: cuDNN's bias gradient with dy as [N, out, 1, 1].
    TensorDescriptor dy_desc, bias_desc;
    set_nchw(dy_desc, d.n, d.out, 1, 1);
    set_nchw(bias_desc, 1, d.out, 1, 1);
    CNN_CHECK(cudnnConvolutionBackwardBias(cudnn_, &kOne, dy_desc, dy.data, &kOne, bias_desc, dbias.data));
  }
  touched(x, packed_range(x), dy, dw, dbias, ws);
}

}  // namespace cnn::cuda
