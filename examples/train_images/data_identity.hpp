#pragma once
// What identifies the data set a run trained on, kept in its checkpoints, so that --resume finds
// the same data under another path (another working folder, another mount) and refuses other data
// at the same path.
#include <nlohmann/json.hpp>
#include <string>

#include <cnnengine/cnnengine.hpp>

namespace cnn::app {

// The data's kind, its splits' sizes, its class names, and a CRC-32 over its files: each one's
// name relative to `folder`, its size, and its bytes (the files' first kHashedBytes in all; the
// files past them by name and size only, so that a large image folder opens as fast as before).
inline constexpr std::uintmax_t kHashedBytes = std::uintmax_t{256} << 20;
nlohmann::json data_identity(const std::string& folder, const data::DatasetSplits& splits);

// A UsageError naming what differs, where `now` (the data at `folder`) is not the data the run
// recorded (`recorded`, from data_identity at `recorded_folder`).
void require_same_data(const nlohmann::json& recorded, const std::string& recorded_folder, const nlohmann::json& now,
                       const std::string& folder);

}  // namespace cnn::app
