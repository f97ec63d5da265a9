#pragma once
// train_images without --doctor: a new run, or (--resume) the continuation of a saved one.
#include "options.hpp"

namespace cnn::app {

// Returns the exit code (see main.cpp); throws what the run hit.
int train(Options o);

}  // namespace cnn::app
