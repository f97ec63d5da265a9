#pragma once
// Weights on disk: a header (magic, version, a fingerprint of the network, the float count),
// the parameter block, and a CRC-32. Saving writes a temporary file (named with the process id,
// so that two runs saving to one path do not share it) and renames it over the target, so a
// crash, a full disk or weights that diverged never leave a bad file where a good one was.
#include <filesystem>

#include "cnnengine/base/error.hpp"
#include "cnnengine/engine/parameter_store.hpp"

namespace cnn {

// Before training: throws CheckpointError saying why weights could not be saved at `path`
// (its folder is missing, it is a folder or a device, nothing can be created beside it).
void check_save_path(const std::filesystem::path& path);

// Throws CheckpointError, leaving `path` as it was, when the weights hold NaN or infinity or
// the file cannot be written.
void save_weights(const std::filesystem::path& path, const Network& network, const ParameterStore& params);
// Throws CheckpointError naming the file: not a regular file, not a checkpoint, truncated,
// corrupt, or for another network.
void load_weights(const std::filesystem::path& path, const Network& network, ParameterStore& params);

}  // namespace cnn
