#pragma once
// Starting a run from a saved model (a checkpoint or an ONNX model another engine exported) on
// data of other classes: its network with a new head, Keras's and torchvision's way of fine-tuning
// (`model.fc = nn.Linear(features, classes)`). The new head is initialised by the run; the layers
// before it take the file's weights (load_matching_weights).
#include <filesystem>
#include <string>

#include <cnnengine/engine/core/network.hpp>
#include <cnnengine/models/checkpoint.hpp>

namespace cnn {

struct FineTuningNetwork {
  Network network;
  // What changed, to show: "dense 1000 -> dense 10"; empty where the head is the file's.
  std::string new_head;
};

// The network `info` (read from `path`) describes, with `classes` outputs: as it is where it
// gives them and `new_head` is false, else with its final dense layer replaced by one of
// `classes` units (its other options kept). A network whose last layer is not a dense layer cannot change its classes: a
// ShapeError naming that layer. A classification or multi-label network only (a segmentation's
// classes are its last convolution's channels: a ShapeError too).
FineTuningNetwork network_for_fine_tuning(const CheckpointInfo& info, const std::filesystem::path& path, int classes,
                                          bool new_head = false);

}  // namespace cnn
