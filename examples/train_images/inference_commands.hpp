#pragma once
// The commands that use a saved model (--load FILE): --evaluate it on a data set's test split,
// --predict the classes of image files. Neither trains; neither needs --model.
#include "options.hpp"

namespace cnn::app {

// Each returns the exit code: 0, or 1 when an image could not be classified (--predict).
int evaluate_command(const Options& o);
int predict_command(const Options& o);

}  // namespace cnn::app
