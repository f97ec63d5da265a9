// train_images, held for a while after it has planned and before its first step (outside the
// training loop, where no signal handler of the run's is installed yet): for the test that stops it
// there with a signal.
//   train_images_paused_before_training SECONDS TRAIN_IMAGES_ARGUMENTS...
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>
#include <vector>

#include "examples/train_images/command_line.hpp"

int main(int argc, char** argv) {
  std::vector<char*> arguments(argv, argv + argc);
  const double seconds = arguments.size() > 1 ? std::atof(arguments[1]) : 0;
  if (seconds <= 0) {
    std::fprintf(stderr, "usage: %s SECONDS TRAIN_IMAGES_ARGUMENTS...\n", argv[0]);
    return 2;
  }
  arguments.erase(arguments.begin() + 1);

  cnn::FitCallbacks pause;
  pause.on_start = [seconds](cnn::Trainer&) {
    std::cout << "paused before training" << std::endl;  // for the test to see where it is
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  };
  int count = static_cast<int>(arguments.size());
  arguments.push_back(nullptr);
  return cnn::app::run_train_images(count, arguments.data(), pause);
}
