#pragma once
// What each fuzzer does with one input, shared by the libFuzzer harnesses (fuzz_*.cpp) and the
// regression test of the normal test suite (tests/fuzz/fuzz_regression_test.cpp), so that both
// run an input through the same code path. Each returns normally when the reader accepts the
// input or refuses it with its own error (a cnn::Error: DataError, CheckpointError, the
// parser's ConfigError and ShapeError); anything else escapes, and a crash, hang or leak is the sanitizers' to find.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "cnnengine/backends/cpu/cpu_backend.hpp"
#include "cnnengine/data/data_error.hpp"
#include "cnnengine/data/detail/idx_file.hpp"
#include "cnnengine/data/detail/image_codec.hpp"
#include "cnnengine/engine/parameter_store.hpp"
#include "cnnengine/memory/host_resource.hpp"
#include "cnnengine/models/checkpoint.hpp"
#include "cnnengine/models/network_text.hpp"

namespace cnn::fuzz {

// A file of this process that the readers, which take paths, are given each input through.
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& suffix)
      : path_(std::filesystem::temp_directory_path() /
              ("cnn_fuzz_" + std::to_string(::getpid()) + "_" + suffix)) {}
  ~ScratchFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  const std::filesystem::path& write(const std::uint8_t* data, std::size_t size) const {
    std::FILE* file = std::fopen(path_.c_str(), "wb");
    if (!file) throw std::runtime_error("cannot write " + path_.string());
    const bool written = std::fwrite(data, 1, size, file) == size;
    if (std::fclose(file) != 0 || !written) throw std::runtime_error("cannot write " + path_.string());
    return path_;
  }

 private:
  std::filesystem::path path_;
};

// IDX, raw or gzip (the reader tells them by their first bytes): images (rank 3) unless the
// magic says labels (rank 1).
inline void run_idx(const std::uint8_t* data, std::size_t size) {
  static const ScratchFile file("idx");
  const int rank = size >= 4 && data[3] == 1 ? 1 : 3;
  try {
    data::read_idx(file.write(data, size), rank, rank == 1 ? "labels" : "pixels");
  } catch (const data::DataError&) {
  }
}

// Small enough that a fuzzed image decodes well under libFuzzer's memory limit.
inline constexpr std::size_t kFuzzMaxDecodedImageBytes = std::size_t{16} << 20;

// PNG, JPEG or BMP (stb_image tells them by their content): the header probe, then the checks
// and the decode, grey and colour.
inline void run_image(const std::uint8_t* data, std::size_t size) {
  static const ScratchFile file("image");
  const std::filesystem::path& path = file.write(data, size);
  std::vector<std::uint8_t> out(3 * 16 * 16);
  try {
    data::probe_image(path, kFuzzMaxDecodedImageBytes);
  } catch (const data::DataError&) {
  }
  for (int channels : {1, 3}) {
    try {
      data::decode_image(path, data::SampleShape{channels, 16, 16}, out.data(), kFuzzMaxDecodedImageBytes);
    } catch (const data::DataError&) {
    }
  }
}

inline void run_network_text(const std::uint8_t* data, std::size_t size) {
  try {
    parse_network(std::string(reinterpret_cast<const char*>(data), size), Shape{1, 28, 28}, 10, "<fuzz>");
  } catch (const Error&) {  // the parser's ConfigError and ShapeError
  }
}

// The network the checkpoint fuzzer loads weights into: small, so that a valid file is too.
inline const char* const kCheckpointNetwork = "conv 2 3\nflatten\ndense 3\n";
inline const Shape kCheckpointInput{1, 6, 6};
inline constexpr int kCheckpointClasses = 3;

// The whole file read (its description, history and blocks), then loaded into the network with
// the optimizer state of AdamW (two slots) where it holds one.
inline void run_checkpoint(const std::uint8_t* data, std::size_t size) {
  static const ScratchFile file("checkpoint");
  static CpuBackend backend(1);
  static const Network network = parse_network(kCheckpointNetwork, kCheckpointInput, kCheckpointClasses);
  static ParameterStore params(network, backend, memory::host_resource(), 2, 1);
  const std::filesystem::path& path = file.write(data, size);
  try {
    const CheckpointInfo info = read_checkpoint(path);
    load_parameters(path, network, params, info.training.has_value());
  } catch (const CheckpointError&) {
  }
}

}  // namespace cnn::fuzz
