#pragma once
// The epochs of a run: train, evaluate, report, and checkpoint the whole run (after every epoch,
// every --save-every steps, and when a stop is asked), from wherever the run stands.
#include <cstddef>
#include <nlohmann/json.hpp>

#include "cnnengine.hpp"
#include "metrics_file.hpp"
#include "options.hpp"

namespace cnn::app {

struct LoopSetup {
  const Options& options;
  Network& network;
  Backend& backend;
  Trainer& trainer;
  data::Loader& train_loader;
  data::Loader& test_loader;
  bool has_test = false;
  const ModelDescription& model;
  // What every checkpoint keeps of the run: {"options": run_settings(options), "data": its identity}.
  nlohmann::json settings;
  MetricsFile& metrics;
  std::size_t staging = 0;          // bytes the loaders hold
  std::size_t data_host_bytes = 0;  // what the data sets hold in host memory (outside the budget)
  // Over several ranks (mpirun): the ranks agree on a stop; only the one that `writes` (rank 0)
  // prints, writes metrics, checkpoints and plots.
  Communicator* communicator = nullptr;
  bool writes = true;
};

// Trains from `progress` (a new run's is the default) to the last epoch. Returns the exit code:
// 0, or 128 + the signal that stopped it, after the checkpoint was written where one was asked.
int run_epochs(LoopSetup& setup, RunProgress progress);

// Where --keep-best keeps the best checkpoint: NAME.best.EXT beside NAME.EXT.
std::string best_path(const std::string& save);

// The lines a metrics file holds for the steps and epochs of `progress`: written afresh for a
// resumed run whose earlier file is gone. `batches_per_epoch` gives each step its epoch.
void write_history(MetricsFile& metrics, const RunProgress& progress, std::size_t batches_per_epoch);

}  // namespace cnn::app
