#pragma once
// Weights on disk: a header (magic, version, a fingerprint of the network, the float count),
// the parameter block, and a CRC-32. Saving writes a temporary file and renames it over the
// target, so a crash or a full disk never leaves a half-written file where a good one was.
#include <filesystem>
#include <stdexcept>

#include "engine/parameter_store.hpp"

namespace cnn {

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void save_weights(const std::filesystem::path& path, const Network& network, const ParameterStore& params);
// Throws CheckpointError naming the file: not a checkpoint, truncated, corrupt, or for another network.
void load_weights(const std::filesystem::path& path, const Network& network, ParameterStore& params);

}  // namespace cnn
