#pragma once
// What a run writes to its metrics file (JSON lines) for its steps and epochs.
#include <cstddef>
#include <nlohmann/json.hpp>

#include "fit/metrics_file.hpp"
#include "models/checkpoint.hpp"

namespace cnn::detail {

nlohmann::json epoch_line(const EpochRecord& epoch);

// The lines a metrics file holds for the steps and epochs of `progress`: written afresh for a
// resumed run whose earlier file is gone. `batches_per_epoch` gives each step its epoch.
void write_history(MetricsFile& metrics, const RunProgress& progress, std::size_t batches_per_epoch);

}  // namespace cnn::detail
