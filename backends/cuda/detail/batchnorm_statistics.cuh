#pragma once
// A channel's batch statistics from its sums, as BatchNorm's own training kernels compute them
// (batchnorm_kernels.cu, batchnorm_channels_last.cu): the CPU's arithmetic
// (backends/cpu/batchnorm_channel.cpp), the mean and biased variance in double and
// 1 / sqrt(var + epsilon) rounded to float.
#include <cstddef>

namespace cnn::cuda {

struct BatchStatistics {
  double mean, var;  // var biased
  float inv_std;
};

// From the sums of x and x^2 over `count` values. The variance comes from the two sums in one
// pass, where the CPU sums squares about the mean in a second: in double that loses nothing a
// float statistic keeps unless |mean| / std reaches about 10^4.
__device__ inline BatchStatistics batch_statistics(double sum, double squares, double count, float epsilon) {
  const double mean = sum / count;
  const double var = fmax(squares / count - mean * mean, 0.0);
  return {mean, var, static_cast<float>(1.0 / sqrt(var + epsilon))};
}

// Channel ch's saved statistics, and its running ones moved towards the batch's (the variance
// unbiased) by `momentum`.
__device__ inline void record_statistics(std::size_t ch, const BatchStatistics& s, double count, float momentum,
                                         float* running_mean, float* running_var, float* saved_mean,
                                         float* saved_inv_std) {
  saved_mean[ch] = static_cast<float>(s.mean);
  saved_inv_std[ch] = s.inv_std;
  const double unbiased = count > 1 ? s.var * count / (count - 1) : s.var;
  running_mean[ch] = static_cast<float>((1.0 - momentum) * running_mean[ch] + momentum * s.mean);
  running_var[ch] = static_cast<float>((1.0 - momentum) * running_var[ch] + momentum * unbiased);
}

}  // namespace cnn::cuda
