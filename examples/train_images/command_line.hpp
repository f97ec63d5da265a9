#pragma once
// train_images' whole command: the command line read, checked and run.
//
// Exit codes: 0 success; 1 an error (a corrupt file, a run that diverged: the message names it);
// 2 a command line that cannot run as given; 3 the budget cannot hold the network; 128 + N when
// signal N (SIGINT 130, SIGTERM 143) stopped the run, after it was saved where one was asked.
// Over several ranks an error on one ends them all (the message names the rank).
#include <cnnengine/fit/fit.hpp>

namespace cnn::app {

// Runs train_images with these arguments and returns its exit code. A training run calls
// `extra`'s callbacks after its own (a test's, to stop the process at a chosen step).
int run_train_images(int argc, char** argv, const FitCallbacks& extra = {});

}  // namespace cnn::app
