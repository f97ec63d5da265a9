#pragma once
// TensorBoard's event files, for scalars: what `tensorboard --logdir DIR` and its Python readers
// open. A file is a sequence of TFRecords (length, masked CRC-32C of the length, data, masked
// CRC-32C of the data), each an `Event` protocol buffer: the first names the format
// ("brain.Event:2"), the rest carry a wall time, a step and a summary of (tag, value) pairs. The
// few fields written are encoded here by hand (tensorflow/core/util/event.proto, summary.proto).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cnn::detail {

// CRC-32C (Castagnoli), as TFRecord checks its records.
std::uint32_t crc32c(const void* data, std::size_t size);

class EventFile {
 public:
  // A new file in `folder` (made if missing), named as TensorBoard looks for them
  // (events.out.tfevents.<seconds>.<host>.<pid>), after the files already there; ConfigError
  // naming it when it cannot be written.
  explicit EventFile(const std::filesystem::path& folder);
  // A session start at `step`: TensorBoard drops what earlier files logged from that step on (a
  // resumed run's steps after its checkpoint, logged before a crash, are logged again).
  void start_session(long step);
  // Scalars at `step`, written and flushed at once (a run killed any time leaves what it logged).
  void scalars(long step, const std::vector<std::pair<std::string, float>>& values);
  const std::filesystem::path& path() const { return path_; }

 private:
  void write_event(const std::string& event);

  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace cnn::detail
