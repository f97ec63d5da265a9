// Batch normalisation on cuDNN, spatial mode: statistics per channel over N, H and W. cuDNN keeps
// the running variance unbiased and saves the batch mean and 1 / sqrt(biased variance + epsilon),
// which is what the interface asks for. Where a value comes in 16 bits (Tensor::packed16), or the
// images are channels last (Note [Channels-last images], tensor.hpp), the calls run the own kernels
// of batchnorm_kernels.cu and batchnorm_channels_last.cu instead, which compute the same.
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include "backends/cuda/detail/descriptors.hpp"
#include <cnnengine/base/error.hpp>

namespace cnn::cuda {
namespace {

constexpr float kOne = 1.0f, kZero = 0.0f;
constexpr cudnnBatchNormMode_t kMode = CUDNN_BATCHNORM_SPATIAL;

struct BatchnormDescriptors {
  TensorDescriptor x, params;
};

// Throws ShapeError naming `call` unless x has channels, each per-channel tensor given holds one
// value a channel (or none, where `may_be_empty`: cuDNN's float calls may be given no running
// statistics, the own 16-bit kernels of batchnorm_kernels.cu read and write every one), and each
// tensor in `like_x` holds as many values as x.
void check_channels(const Tensor& x, std::initializer_list<const Tensor*> params,
                    std::initializer_list<const Tensor*> like_x, bool may_be_empty, const char* call) {
  if (x.shape.rank < 2) throw ShapeError(std::string(call) + ": input " + x.shape.str() + " has no channels");
  for (const Tensor* p : params) {
    if (p->elements() != static_cast<std::size_t>(x.c()) && !(may_be_empty && p->empty())) {
      throw ShapeError(std::string(call) + ": a per-channel tensor " + p->shape.str() + " for input " +
                       x.shape.str() + " should hold " + std::to_string(x.c()) + " values");
    }
  }
  for (const Tensor* t : like_x) {
    if (t->elements() != x.elements())
      throw ShapeError(std::string(call) + ": a tensor " + t->shape.str() + " for input " + x.shape.str() +
                       " should hold " + std::to_string(x.elements()) + " values");
  }
}

// x as NCHW (rank 2 is [N, C, 1, 1]) and the per-channel parameter layout derived from it.
void describe(BatchnormDescriptors& d, const Tensor& x) {
  set_nchw(d.x, x.shape);
  CNN_CHECK(cudnnDeriveBNTensorDescriptor(d.params, d.x, kMode));
}

}  // namespace

void CudaBackend::check_saved_statistics_call(const char* call, const Tensor& x, const Tensor& gamma,
                                              const Tensor& beta, const Tensor& saved_mean,
                                              const Tensor& saved_inv_std, const Tensor& y) {
  check_channels(x, {&gamma, &beta, &saved_mean, &saved_inv_std}, {&y}, false, call);
  require_values(call, {x, y});
}

void CudaBackend::do_batchnorm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                                Tensor y, Tensor running_mean, Tensor running_var,
                                                float momentum, float epsilon, Tensor saved_mean,
                                                Tensor saved_inv_std) {
  activate();
  const bool own = require_values("batchnorm_forward_training", {x, y}) || x.shape.channels_last;
  check_channels(x, {&gamma, &beta, &running_mean, &running_var, &saved_mean, &saved_inv_std}, {&y}, !own,
                 "batchnorm_forward_training");
  if (own) {
    batchnorm_training16(x, gamma, beta, y, running_mean, running_var, momentum, epsilon, saved_mean, saved_inv_std);
    touched(x, packed_range(x), gamma, beta, y, packed_range(y), running_mean, running_var, saved_mean, saved_inv_std);
    return;
  }
  BatchnormDescriptors d;
  describe(d, x);
  CNN_CHECK(cudnnBatchNormalizationForwardTraining(
      cudnn_, kMode, &kOne, &kZero, d.x, x.data, d.x, y.data, d.params, gamma.data, beta.data,
      static_cast<double>(momentum), running_mean.data, running_var.data, static_cast<double>(epsilon),
      saved_mean.data, saved_inv_std.data));
  touched(x, gamma, beta, y, running_mean, running_var, saved_mean, saved_inv_std);
}

void CudaBackend::do_batchnorm_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                                     Tensor y, Tensor running_mean, Tensor running_var,
                                                     float momentum, float epsilon, Tensor saved_mean,
                                                     Tensor saved_inv_std) {
  activate();
  // NCHW floats: cuDNN's BatchNorm, then the ReLU.
  if (!require_values("batchnorm_relu_forward_training", {x, y}) && !x.shape.channels_last)
    return Backend::do_batchnorm_relu_forward_training(x, gamma, beta, y, running_mean, running_var, momentum,
                                                       epsilon, saved_mean, saved_inv_std);
  check_channels(x, {&gamma, &beta, &running_mean, &running_var, &saved_mean, &saved_inv_std}, {&y}, false,
                 "batchnorm_relu_forward_training");
  batchnorm_training16(x, gamma, beta, y, running_mean, running_var, momentum, epsilon, saved_mean, saved_inv_std,
                       true);
  touched(x, packed_range(x), gamma, beta, y, packed_range(y), running_mean, running_var, saved_mean, saved_inv_std);
}

// Own kernels where x or y is in 16 bits, as batchnorm_forward_training chooses them; else cuDNN's
// BatchNorm, the add and the ReLU.
void CudaBackend::do_batchnorm_add_relu_forward_training(const Tensor& x, const Tensor& residual, const Tensor& gamma,
                                                         const Tensor& beta, Tensor y, Tensor running_mean,
                                                         Tensor running_var, float momentum, float epsilon,
                                                         Tensor saved_mean, Tensor saved_inv_std) {
  activate();
  require_values("batchnorm_add_relu_forward_training", {residual});
  if (!require_values("batchnorm_add_relu_forward_training", {x, y}) && !x.shape.channels_last)
    return Backend::do_batchnorm_add_relu_forward_training(x, residual, gamma, beta, y, running_mean, running_var,
                                                           momentum, epsilon, saved_mean, saved_inv_std);
  check_channels(x, {&gamma, &beta, &running_mean, &running_var, &saved_mean, &saved_inv_std}, {&residual, &y}, false,
                 "batchnorm_add_relu_forward_training");
  batchnorm_training16(x, gamma, beta, y, running_mean, running_var, momentum, epsilon, saved_mean, saved_inv_std,
                       true, residual);
  touched(x, packed_range(x), residual, packed_range(residual), gamma, beta, y, packed_range(y), running_mean,
          running_var, saved_mean, saved_inv_std);
}

void CudaBackend::do_batchnorm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                                 const Tensor& running_mean, const Tensor& running_var,
                                                 float epsilon, Tensor y) {
  activate();
  const bool own = require_values("batchnorm_forward_inference", {x, y}) || x.shape.channels_last;
  check_channels(x, {&gamma, &beta, &running_mean, &running_var}, {&y}, !own, "batchnorm_forward_inference");
  if (own) {
    batchnorm_normalise(x, gamma, beta, running_mean, running_var, true, epsilon, y);
    touched(x, packed_range(x), gamma, beta, running_mean, running_var, y, packed_range(y));
    return;
  }
  BatchnormDescriptors d;
  describe(d, x);
  CNN_CHECK(cudnnBatchNormalizationForwardInference(cudnn_, kMode, &kOne, &kZero, d.x, x.data, d.x, y.data,
                                                    d.params, gamma.data, beta.data, running_mean.data,
                                                    running_var.data, static_cast<double>(epsilon)));
  touched(x, gamma, beta, running_mean, running_var, y);
}

void CudaBackend::do_batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                        const Tensor& saved_mean, const Tensor& saved_inv_std, float epsilon,
                                        Tensor dx, Tensor dgamma, Tensor dbeta, bool accumulate) {
  activate();
  const bool own = require_values("batchnorm_backward", {x, dy, dx}, 1) || x.shape.channels_last;
  check_channels(x, {&gamma, &saved_mean, &saved_inv_std}, {&dy, &dx}, !own, "batchnorm_backward");
  check_channels(x, {&dgamma, &dbeta}, {}, true, "batchnorm_backward");
  if (own) {
    batchnorm_backward16(x, dy, gamma, saved_mean, saved_inv_std, dx, dgamma, dbeta, accumulate);
    touched(x, packed_range(x), dy, gamma, saved_mean, saved_inv_std, dx, dgamma, dbeta);
    return;
  }
  BatchnormDescriptors d;
  describe(d, x);
  // With the saved statistics given cuDNN does not recompute them, but it wants forward's epsilon.
  const float beta_data = accumulate ? 1.0f : 0.0f;
  // betaParamDiff = 1: parameter gradients accumulate over micro-batches.
  CNN_CHECK(cudnnBatchNormalizationBackward(cudnn_, kMode, &kOne, &beta_data, &kOne, &kOne, d.x, x.data, d.x,
                                            dy.data, d.x, dx.data, d.params, gamma.data, dgamma.data,
                                            dbeta.data, static_cast<double>(epsilon), saved_mean.data,
                                            saved_inv_std.data));
  touched(x, dy, gamma, saved_mean, saved_inv_std, dx, dgamma, dbeta);
}

void CudaBackend::do_batchnorm_relu_backward(const Tensor& x, const Tensor& y, Tensor dy, const Tensor& gamma,
                                             const Tensor& saved_mean, const Tensor& saved_inv_std, float epsilon,
                                             Tensor dx, Tensor dgamma, Tensor dbeta, bool accumulate) {
  activate();
  // NCHW floats: the ReLU, then cuDNN's BatchNorm.
  if (!require_values("batchnorm_relu_backward", {x, y, dy, dx}, 2) && !x.shape.channels_last)
    return Backend::do_batchnorm_relu_backward(x, y, dy, gamma, saved_mean, saved_inv_std, epsilon, dx, dgamma,
                                               dbeta, accumulate);
  check_channels(x, {&gamma, &saved_mean, &saved_inv_std}, {&y, &dy, &dx}, false, "batchnorm_relu_backward");
  check_channels(x, {&dgamma, &dbeta}, {}, true, "batchnorm_relu_backward");
  batchnorm_backward16(x, dy, gamma, saved_mean, saved_inv_std, dx, dgamma, dbeta, accumulate, y);
  touched(x, packed_range(x), y, packed_range(y), dy, gamma, saved_mean, saved_inv_std, dx, dgamma, dbeta);
}

// Own kernels where x is in 16 bits, as batchnorm_backward chooses them; else the ReLU, the copy and
// cuDNN's BatchNorm.
void CudaBackend::do_batchnorm_add_relu_backward(const Tensor& x, const Tensor& y, Tensor dy, const Tensor& gamma,
                                                 const Tensor& saved_mean, const Tensor& saved_inv_std, float epsilon,
                                                 Tensor dx, Tensor dgamma, Tensor dbeta, bool accumulate,
                                                 Tensor dresidual, bool accumulate_residual) {
  activate();
  require_values("batchnorm_add_relu_backward", {y, dy, dx, dresidual}, 1);
  if (!require_values("batchnorm_add_relu_backward", {x}) && !x.shape.channels_last)
    return Backend::do_batchnorm_add_relu_backward(x, y, dy, gamma, saved_mean, saved_inv_std, epsilon, dx, dgamma,
                                                   dbeta, accumulate, dresidual, accumulate_residual);
  check_channels(x, {&gamma, &saved_mean, &saved_inv_std}, {&y, &dy, &dx}, false, "batchnorm_add_relu_backward");
  check_channels(x, {&dgamma, &dbeta}, {}, true, "batchnorm_add_relu_backward");
  batchnorm_backward16(x, dy, gamma, saved_mean, saved_inv_std, dx, dgamma, dbeta, accumulate, y, dresidual,
                       accumulate_residual);
  touched(x, packed_range(x), y, packed_range(y), dy, gamma, saved_mean, saved_inv_std, dx, dgamma, dbeta, dresidual);
}

}  // namespace cnn::cuda
