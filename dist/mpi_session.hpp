#pragma once
// One rank of a job that mpirun started: MPI set up once for the process, the communicator over
// every rank (sums in host memory: the CPU backend's, and the host values of any backend), and the
// way out that ends every rank instead of leaving the others waiting for this one.
#include <memory>
#include <string>

#include "engine/core/communicator.hpp"

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

  Communicator& world();
  // Ends every rank of the job (MPI_Abort, whose launcher kills the others) with exit code `code`,
  // after writing "rank R of N: message" to stderr.
  [[noreturn]] void abort(const std::string& message, int code);

  static bool available();  // whether this build has MPI
  static std::string version();  // the library's own words ("Open MPI v4.1.4, ..."); empty without

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace cnn::dist
