// Writes small CIFAR folders for train_images' ctest checks (CMake cannot write the NUL byte that
// every label 0 is): FOLDER/cifar-10-batches-bin, 5 batches of 64 records that a network can
// learn and 64 test records, and FOLDER/cifar-100-binary, 200 training and 50 test records.
#include <exception>
#include <filesystem>
#include <iostream>

#include "tests/data/cifar_test_files.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_cifar_folder FOLDER\n";
    return 2;
  }
  namespace t = cnn::data::test;
  const std::filesystem::path folder = argv[1];
  try {
    t::write_cifar10_folder(folder / "cifar-10-batches-bin", 64, 64, /*learnable=*/true);
    t::write_cifar100_folder(folder / "cifar-100-binary", 200, 50);
  } catch (const std::exception& e) {
    std::cerr << "make_cifar_folder: " << e.what() << "\n";
    return 1;
  }
  std::cout << "wrote " << (folder / "cifar-10-batches-bin") << " and " << (folder / "cifar-100-binary") << "\n";
  return 0;
}
