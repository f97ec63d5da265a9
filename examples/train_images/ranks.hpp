#pragma once
// This process's place in a data-parallel job: `mpirun -np N train_images ...` trains one model
// over N processes. Rank 0 prints and writes every file; the others only train.
#include <memory>
#include <optional>
#include <string>

#include <cnnengine/cnnengine.hpp>

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
  // "rank R: " over several ranks, else nothing: for the warnings every rank prints itself.
  std::string prefix() const;
  // CPU threads for this process: the cores it may run on (taskset, mpirun's binding, a
  // container), over the ranks on this machine that may run on the same ones. Over several ranks
  // a collective call: every rank calls it.
  int cpu_threads();
  // The host communicator over the ranks; null without MPI.
  Communicator* world();
  // Over several ranks: a UsageError on every rank unless all chose the same kind of device
  // (--device auto may find a GPU on one machine and none on another).
  void agree_on_device(DeviceKind kind);
  // Over several ranks: a UsageError on every rank, naming one, unless every rank's `job` (its
  // settings, network, data and device in words) is rank 0's, so that no two ranks train
  // different models while summing each other's gradients.
  void check_same_job(const std::string& job);
  // Ends the process with `code` after `message` on stderr: for several ranks, the whole job
  // (MPI_Abort), the message naming the rank.
  [[noreturn]] void fail(const std::string& message, int code);

 private:
  std::optional<dist::LaunchedRank> launched_;
  std::unique_ptr<dist::MpiSession> session_;
};

}  // namespace cnn::app
