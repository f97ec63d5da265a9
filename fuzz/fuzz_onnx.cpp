// libFuzzer harness: see run_onnx in fuzz_targets.hpp.
#include "fuzz_targets.hpp"

#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  cnn::fuzz::run_onnx(data, size);
  return 0;
}
