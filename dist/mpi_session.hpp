#pragma once
// One rank of a job that mpirun started: MPI set up once for the process, the communicator over
// every rank (sums in host memory: the CPU backend's, and the host values of any backend), and the
// way out that ends every rank instead of leaving the others waiting for this one. And, before
// any of that, whether a launcher started this process as one rank of a job.
#include <memory>
#include <optional>
#include <string>

#include <cnnengine/engine/core/communicator.hpp>

namespace cnn::dist {

class MpiSession {
 public:
  // Starts MPI (MPI_Init_thread, the main thread alone calling MPI). A ConfigError when this build
  // has no MPI (CNN_MPI=OFF, or libopenmpi-dev was not there), or MPI cannot start.
  MpiSession(int* argc, char*** argv);
  // MPI_Finalize: every rank must get here (after its last collective call), or abort().
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  // Every rank: a trainer's TrainerOptions::communicator.
  Communicator& world();
  // This process's rank and the job's ranks (a loader's LoaderOptions::rank and ranks).
  int rank() const;
  int ranks() const;
  // Ends every rank of the job (MPI_Abort, whose launcher kills the others) with exit code `code`,
  // after writing "rank R of N: message" to stderr.
  [[noreturn]] void abort(const std::string& message, int code);

  static bool available();  // whether this build has MPI
  static std::string version();  // the library's own words ("Open MPI v4.1.4, ..."); empty without

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Whether this process is one rank of a job that a launcher (mpirun, mpiexec, srun) started, read
// from the environment the launcher sets, before and without MPI: a program built without MPI can
// then refuse to run as N copies that would each train alone and write the same files.
struct LaunchedRank {
  int rank = 0, ranks = 1;              // in the job
  int local_rank = 0, local_ranks = 1;  // on this machine (to share its cores or pick its GPU)
  std::string launcher;                 // "Open MPI", "PMI"
};

// The job's shape when a launcher started this process (`mpirun -np 1` too); nullopt when none
// did. Values that do not read as a rank in a job are a ConfigError.
std::optional<LaunchedRank> launched_rank();

}  // namespace cnn::dist
