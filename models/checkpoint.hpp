#pragma once
// Checkpoints: one self-describing file. It holds the network (its text form), what an image
// goes through to be fed to it and the names of its classes, the parameters with the BatchNorm
// statistics, and, for a run to continue exactly, the optimizer's state, the trainer's position
// and the run's progress (epoch, batch, metrics so far, the application's settings).
//
// A file is written atomically (to a temporary file beside it, then renamed): a kill, a crash, a power loss or
// a full disk never leaves a half-written file where a good one was. It is checked whole when
// read, before anything is taken from it: its format version, its exact size and a CRC-32. A
// truncated, corrupt, newer or foreign file, or one of another network, is a CheckpointError
// naming it, and is never modified. A description that does not hold together is corrupt too,
// whatever its CRC says: images brought to another shape than the network's input, a network
// whose parameters are not the values the file holds (checkpoint_network, before anything is
// allocated for it). The parameters go to and from the file in chunks: saving
// and loading hold no host copy of the whole parameter block (ParameterStore::kCopyChunkFloats).
#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <cnnengine/base/error.hpp>
#include <cnnengine/data/dataset.hpp>
#include <cnnengine/engine/core/parameter_store.hpp>
#include <cnnengine/engine/train/trainer.hpp>

namespace cnn {

// What a program that knows nothing of the run needs to use the model.
struct ModelDescription {
  std::string network;                   // its text form (models/network_text.hpp)
  Shape input;                           // C x H x W of one sample
  std::vector<std::string> class_names;  // one per class or target (none saved: "0", "1", ...)
  data::Preprocessing preprocessing;     // how an image becomes an input
  LossOptions loss;                      // the task it was trained for, and its loss (base/task.hpp)
};

// A description of `network` with no class names and no normalisation.
ModelDescription describe_model(const Network& network);

struct StepRecord {
  float loss = 0, accuracy = 0, learning_rate = 0;
};

struct EpochRecord {
  int epoch = 0;
  double train_loss = 0, train_accuracy = 0;
  std::optional<double> test_loss, test_accuracy;              // none where the test set was not evaluated
  double seconds = 0, images_per_second = 0;
  std::optional<double> validation_loss, validation_accuracy;  // none without a validation set
  double learning_rate = 0;                                    // the epoch's last step's
  // The task's headline scores (headline_scores: "mean_iou", "mae", ...) where a side was
  // evaluated; none for a classification.
  std::map<std::string, double> validation_scores, test_scores;
  // The share of the epoch's training loop spent waiting for the next batch, and the training
  // loader's images a second while it worked (all its threads); none from runs before they were
  // measured.
  std::optional<double> data_wait_share, loader_images_per_second;
};

// Where a run is in its data, and what it has measured.
struct RunProgress {
  int epoch = 1;                     // the epoch in progress, from 1
  std::size_t batches_done = 0;      // batches of it already trained
  double loss_sum = 0, correct = 0;  // over those batches' samples
  std::size_t seen = 0;
  double seconds = 0;                // their training time
  std::vector<StepRecord> steps;     // every optimizer step so far, step 1 first
  std::vector<EpochRecord> epochs;   // every finished epoch
};

// What a resumed run needs beyond the model and its parameters.
struct TrainingCheckpoint {
  TrainerState trainer;
  RunProgress progress;
  std::string settings;  // the application's own (train_images: its options, as JSON)
};

struct CheckpointInfo {
  int version = 0;
  ModelDescription model;
  std::optional<TrainingCheckpoint> training;  // none: a file of weights only
  std::size_t parameter_floats = 0, optimizer_floats = 0;
};

inline constexpr int kCheckpointVersion = 2;

// Before training: throws CheckpointError saying why a checkpoint could not be written at
// `path` (its folder is missing, it is a folder or a device, nothing can be created beside it,
// or, unless `overwrite`, it is a file that is not a cnnengine checkpoint).
void check_save_path(const std::filesystem::path& path, bool overwrite = false);
// Whether `path` is a regular file that begins as a cnnengine checkpoint of any version.
bool is_checkpoint(const std::filesystem::path& path);

// With `training`, the optimizer state and the run's position too. Throws CheckpointError,
// leaving `path` as it was, when the weights hold NaN or infinity or the file cannot be written.
void save_checkpoint(const std::filesystem::path& path, const Network& network, const ParameterStore& params,
                     const ModelDescription& model, const TrainingCheckpoint* training = nullptr);
// Reads and checks the whole file (not the parameters' values into memory). Here, in
// load_parameters and in load_matching_weights, an ONNX model (is_onnx_file,
// models/onnx_import.hpp) is imported: its network, description and weights, no training state; a
// model that cannot be imported is a CheckpointError saying why.
CheckpointInfo read_checkpoint(const std::filesystem::path& path);
// The parameters and BatchNorm statistics into `params`, and with `optimizer_state` the
// optimizer's state (the file must hold it). The file must be of `network`.
void load_parameters(const std::filesystem::path& path, const Network& network, ParameterStore& params,
                     bool optimizer_state = false);

// Throws CheckpointError naming `path` when the file holds no network (weights of version 1).
void require_network(const CheckpointInfo& info, const std::filesystem::path& path);
// The network a checkpoint describes (its text, on its input shape), with `classes` outputs (0:
// as the text says; otherwise a ShapeError when it ends with other). It is checked against the
// values the file holds before anything is allocated for it: a few bytes of altered text could
// otherwise ask for any amount of memory. Throws CheckpointError naming `path` when the file
// holds no network (require_network) or a network that does not match its values.
Network checkpoint_network(const CheckpointInfo& info, const std::filesystem::path& path, int classes = 0);

// Weights only: save_checkpoint with describe_model(network), and load_parameters. load_weights
// also reads the files of version 1.
void save_weights(const std::filesystem::path& path, const Network& network, const ParameterStore& params);
void load_weights(const std::filesystem::path& path, const Network& network, ParameterStore& params);

// Fine-tuning from another network's checkpoint (a new head, other classes): the layers that match
// (at the same place in both networks, of the same kind, with parameters of the same names and
// shapes) take the file's values; the others keep what they hold (their initialisation). With
// `through` >= 0, the nodes after it keep theirs too (a new head of the file's shape).
struct WeightTransfer {
  std::vector<std::string> loaded, kept;  // the layers with parameters, "3 conv2d 3x3/64 ..."
};
WeightTransfer load_matching_weights(const std::filesystem::path& path, const Network& network,
                                     ParameterStore& params, int through = -1);

}  // namespace cnn
