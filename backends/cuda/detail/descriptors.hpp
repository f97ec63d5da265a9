#pragma once
// Owning wrappers for cuDNN descriptors, and setters for the layouts the engine uses: NCHW, or
// NHWC for channels-last images (Note [Channels-last images]), float or a convolution's 16-bit
// copies.
#include <cudnn.h>

#include <utility>

#include "backends/cuda/detail/check.hpp"
#include <cnnengine/engine/core/tensor.hpp>

namespace cnn::cuda {

template <class Handle, cudnnStatus_t (*Create)(Handle*), cudnnStatus_t (*Destroy)(Handle)>
class Descriptor {
 public:
  Descriptor() { CNN_CHECK(Create(&handle_)); }
  ~Descriptor() {
    if (handle_) Destroy(handle_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  Descriptor(Descriptor&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Descriptor& operator=(Descriptor&& other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  operator Handle() const { return handle_; }

 private:
  Handle handle_ = nullptr;
};

using TensorDescriptor =
    Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDescriptor =
    Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor = Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                                         cudnnDestroyConvolutionDescriptor>;

inline void set_nchw(const TensorDescriptor& d, int n, int c, int h, int w, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  CNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, type, n, c, h, w));
}

// An image [n, c, h, w] whose values lie as NHWC where channels_last, else NCHW.
inline void set_image(const TensorDescriptor& d, int n, int c, int h, int w, bool channels_last,
                      cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  CNN_CHECK(cudnnSetTensor4dDescriptor(d, channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, type, n, c, h, w));
}

// A tensor of any rank as NCHW: dimensions past its rank are 1 ([N, C] is N x C x 1 x 1).
inline void set_nchw(const TensorDescriptor& d, const Shape& s) {
  set_nchw(d, s[0], s.rank > 1 ? s[1] : 1, s.rank > 2 ? s[2] : 1, s.rank > 3 ? s[3] : 1);
}

}  // namespace cnn::cuda
