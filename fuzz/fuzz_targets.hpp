#pragma once
// What each fuzzer does with one input, shared by the libFuzzer harnesses (fuzz_*.cpp) and the
// regression test of the normal test suite (tests/fuzz/fuzz_regression_test.cpp), so that both
// run an input through the same code path. Each returns normally when the reader accepts the
// input or refuses it with its own error (a cnn::Error: DataError, CheckpointError, the
// parser's ConfigError and ShapeError); anything else escapes, and a crash, hang or leak is the sanitizers' to find.
#include <unistd.h>
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "data/data_error.hpp"
#include "data/detail/idx_file.hpp"
#include "data/detail/image_codec.hpp"
#include <cnnengine/engine/core/parameter_store.hpp>
#include "memory/host_resource.hpp"
#include <cnnengine/models/checkpoint.hpp>
#include <cnnengine/models/network_text.hpp>
#include <cnnengine/models/onnx_import.hpp>

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
    // An empty input may come with no buffer at all, which fwrite may not be given.
    const bool written = size == 0 || std::fwrite(data, 1, size, file) == size;
    if (std::fclose(file) != 0 || !written) throw std::runtime_error("cannot write " + path_.string());
    return path_;
  }

 private:
  std::filesystem::path path_;
};

// IDX, raw or gzip (the reader tells them by their first bytes): images (rank 3) unless the
// magic says labels (rank 1). Whether the reader accepted the input.
inline bool run_idx(const std::uint8_t* data, std::size_t size) {
  static const ScratchFile file("idx");
  const int rank = size >= 4 && data[3] == 1 ? 1 : 3;
  try {
    data::read_idx(file.write(data, size), rank, rank == 1 ? "labels" : "pixels");
    return true;
  } catch (const data::DataError&) {
    return false;
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

// As train_images --load and --resume read a file: the whole file (its description, history and
// blocks), then its values loaded into the fixed network above with the optimizer state of AdamW
// (two slots) where it holds one; and, where the file holds a network, that network as its text
// describes it (checked against the file's values), then the values loaded into it. So hostile
// metadata is fuzzed too: the network text, the input shape, the block sizes. Whether the file
// was accepted as a network with its values.
inline bool read_checkpoint_as_train_images_does(const std::filesystem::path& path) {
  static CpuBackend backend(1);
  static const Network network = parse_network(kCheckpointNetwork, kCheckpointInput, kCheckpointClasses);
  static ParameterStore params(network, backend, memory::host_resource(), 2, 1);
  std::optional<CheckpointInfo> info;
  try {
    info = read_checkpoint(path);
    load_parameters(path, network, params, info->training.has_value());
  } catch (const CheckpointError&) {
  }
  if (!info || info->model.network.empty()) return false;
  try {
    const Network own = checkpoint_network(*info, path);
    ParameterStore own_params(own, backend, memory::host_resource(), 2, 1);
    load_parameters(path, own, own_params, info->training.has_value() && info->optimizer_floats > 0);
    return true;
  } catch (const Error&) {  // CheckpointError, and the parser's ConfigError and ShapeError
    return false;
  }
}

// The input as it is, then, for a checkpoint of version 2, with its last four bytes made the
// CRC-32 of all before them (what an attacker writes: tests/tools/alter_checkpoint.cpp), so that
// the fuzzer's changes reach the description and the blocks past the checksum. Whether the input
// as it is was accepted.
inline bool run_checkpoint(const std::uint8_t* data, std::size_t size) {
  static const ScratchFile file("checkpoint");
  const bool accepted = read_checkpoint_as_train_images_does(file.write(data, size));
  constexpr char kMagic[8] = {'C', 'N', 'N', 'C', 'K', 'P', 'T', '\n'};
  if (size >= 28 && size < (std::size_t{1} << 30) && std::memcmp(data, kMagic, sizeof kMagic) == 0) {
    std::vector<std::uint8_t> made_right(data, data + size);
    const auto sum = static_cast<std::uint32_t>(crc32(0, data, static_cast<uInt>(size - 4)));
    std::memcpy(made_right.data() + size - 4, &sum, sizeof sum);  // little-endian, as the files are
    if (std::memcmp(made_right.data() + size - 4, data + size - 4, 4) != 0)
      read_checkpoint_as_train_images_does(file.write(made_right.data(), size));
  }
  return accepted;
}

// As train_images --load reads an ONNX model: imported (every bound checked before allocating),
// then its weights laid into a store of its network. Whether the model was imported.
inline bool run_onnx(const std::uint8_t* data, std::size_t size) {
  static CpuBackend backend(1);
  static const ScratchFile file("model.onnx");
  try {
    const ImportedModel model = import_onnx(file.write(data, size));
    ParameterStore params(model.network, backend, memory::host_resource(), 0, 1);
    params.upload(model.parameters);
    return true;
  } catch (const Error&) {  // the import's ConfigError, a file that cannot be read
    return false;
  }
}

}  // namespace cnn::fuzz
