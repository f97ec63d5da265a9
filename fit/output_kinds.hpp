#pragma once
// What each output of a run (Fit) or of train_images writes, and whether a file already at its
// path holds that: an output replaces, unless told to overwrite, only a file of its own kind (a
// rerun's), never an unrelated one a mistyped path names.
#include <filesystem>
#include <string>

namespace cnn {

enum class OutputKind {
  checkpoint,       // --save, --keep-best: a cnnengine checkpoint, replaced by rename
  onnx,             // --export-onnx: an ONNX model, replaced by rename
  plot,             // --plot: a PNG, replaced by rename
  metrics,          // --metrics-out: JSON lines, a stream
  csv,              // --csv: a CSV file of epochs, replaced by rename
  trace,            // --trace: a memory trace, a stream
  algorithm_cache,  // --algo-cache: read and merged by its own file code, which never replaces a foreign file
  folder,           // --tensorboard, --predict-out: a folder (made where missing) that new files go into
};

// Written through a temporary file renamed over the target (AtomicFile): never to a device.
bool replaced_by_rename(OutputKind kind);

// Whether the regular file at `path` holds what `kind` writes. An empty file holds nothing to
// lose and counts as one.
bool holds_output_of_kind(const std::filesystem::path& path, OutputKind kind);

// "a cnnengine checkpoint", "a PNG", ... for messages.
std::string describe(OutputKind kind);

}  // namespace cnn
