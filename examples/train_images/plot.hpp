#pragma once
// --plot: the learning curves as a PNG drawn by gnuplot: train, validation and test loss and
// accuracy per epoch, and the loss of every step. Written beside the target and renamed over it, so a
// viewer never sees half a file; rewritten after every epoch, so a long run can be watched.
#include <cstddef>
#include <string>
#include <vector>

#include <cnnengine/models/checkpoint.hpp>

namespace cnn::app {

// Throws cnn::Error when gnuplot cannot run here (before training, not after an epoch).
void check_plotting();
// Throws cnn::Error naming the file when gnuplot fails.
void write_plot(const std::string& path, const RunProgress& progress, std::size_t batches_per_epoch);
// --find-lr --plot: the smoothed loss against the rate (a log scale), the suggestion marked.
void write_range_plot(const std::string& path, const std::vector<float>& rates, const std::vector<double>& losses,
                      float suggestion);

}  // namespace cnn::app
