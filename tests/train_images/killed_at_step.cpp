// train_images, killed with SIGKILL right after an optimizer step: what a kill -9 there leaves
// behind, for the tests that resume from it.
//   train_images_killed_at_step [--rank R] STEP TRAIN_IMAGES_ARGUMENTS...
// With --rank R only rank R of a data-parallel run is killed; else every rank.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "examples/train_images/command_line.hpp"

int main(int argc, char** argv) {
  std::vector<char*> arguments(argv, argv + argc);
  int rank = -1;
  if (arguments.size() > 2 && std::string(arguments[1]) == "--rank") {
    rank = std::atoi(arguments[2]);
    arguments.erase(arguments.begin() + 1, arguments.begin() + 3);
  }
  const long step = arguments.size() > 1 ? std::atol(arguments[1]) : 0;
  if (step < 1) {
    std::fprintf(stderr, "usage: %s [--rank R] STEP TRAIN_IMAGES_ARGUMENTS...\n", argv[0]);
    return 2;
  }
  arguments.erase(arguments.begin() + 1);

  cnn::FitCallbacks kill;
  kill.on_step = [step, rank](const cnn::StepReport& report, cnn::FitControl& control) {
    if (report.step == step && (rank < 0 || control.trainer().rank() == rank)) std::raise(SIGKILL);
  };
  int count = static_cast<int>(arguments.size());
  arguments.push_back(nullptr);
  char** words = arguments.data();
  return cnn::app::run_train_images(count, words, kill);
}
