// libFuzzer harness: see run_image in fuzz_targets.hpp.
#include "fuzz_targets.hpp"

#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  cnn::fuzz::run_image(data, size);
  return 0;
}
