#pragma once
// This process's place in a data-parallel job: `mpirun -np N train_images ...` trains one model
// over N processes. Rank 0 prints and writes every file; the others only train.
#include <memory>
#include <optional>
#include <string>

#include "cnnengine/cnnengine.hpp"

namespace cnn::app {

class Ranks {
 public:
  // From the launcher's environment, before MPI starts: rank and size (one process: 0 of 1).
  // A ConfigError where the environment does not read.
  Ranks();
  // Starts MPI when a launcher started this process (as one of several: a ConfigError where this
  // build has no MPI, as N copies would each train alone and write the same files).
  void start(int* argc, char*** argv);

  int rank() const { return launched_ ? launched_->rank : 0; }
  int count() const { return launched_ ? launched_->ranks : 1; }
  int local_rank() const { return launched_ ? launched_->local_rank : 0; }
  int local_count() const { return launched_ ? launched_->local_ranks : 1; }
  bool several() const { return count() > 1; }
  bool writes() const { return rank() == 0; }  // prints, writes metrics, checkpoints, plots, exports
  // The host communicator over the ranks; null without MPI.
  Communicator* world();
  // Ends the process with `code` after `message` on stderr: for several ranks, the whole job
  // (MPI_Abort), the message naming the rank.
  [[noreturn]] void fail(const std::string& message, int code);

 private:
  std::optional<dist::LaunchedRank> launched_;
  std::unique_ptr<dist::MpiSession> session_;
};

}  // namespace cnn::app
