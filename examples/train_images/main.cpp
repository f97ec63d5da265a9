// train_images: train a convolutional network on an image folder, IDX files (Fashion-MNIST) or
// CIFAR's binary files; on one process, or on several with `mpirun -np N train_images ...`.
// Its exit codes: command_line.hpp.
#include "command_line.hpp"

int main(int argc, char** argv) { return cnn::app::run_train_images(argc, argv); }
