#pragma once
// A checkpoint's description (its JSON part) to and from the structures of checkpoint.hpp:
// everything but the floats, whose block sizes it records.
#include <cstdint>
#include <string>

#include <cnnengine/models/checkpoint.hpp>

namespace cnn {

struct CheckpointMeta {
  ModelDescription model;
  std::uint32_t fingerprint = 0;  // of the parameters' names and shapes (checkpoint.cpp)
  std::uint64_t parameter_floats = 0, optimizer_floats = 0, history_steps = 0;
  std::optional<TrainingCheckpoint> training;  // progress.steps left empty: they are a float block
};

std::string write_meta(const CheckpointMeta& meta);
// Throws CheckpointError naming `source` when the text is not a description this version reads.
CheckpointMeta read_meta(const std::string& text, const std::string& source);

}  // namespace cnn
