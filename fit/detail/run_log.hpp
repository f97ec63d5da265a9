#pragma once
// What a run writes of its steps and epochs: the metrics file (JSON lines) and the CSV file.
#include <cstddef>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "fit/metrics_file.hpp"
#include <cnnengine/models/checkpoint.hpp>

namespace cnn::detail {

nlohmann::json epoch_line(const EpochRecord& epoch);

// The lines a metrics file holds for the steps and epochs of `progress`: written afresh for a
// resumed run whose earlier file is gone. `batches_per_epoch` gives each step its epoch.
void write_history(MetricsFile& metrics, const RunProgress& progress, std::size_t batches_per_epoch);

// The CSV file (Keras's CSVLogger's): a header, then a row an epoch (epoch, train_loss,
// train_accuracy, val_loss, val_accuracy, test_loss, test_accuracy, lr, seconds,
// images_per_second), an empty cell where an epoch has no value. Rewritten whole from the run's
// epochs, so a resumed run's file is what the uninterrupted run's would be.
void write_csv(const std::filesystem::path& path, const std::vector<EpochRecord>& epochs);

}  // namespace cnn::detail
