#include "ranks.hpp"

#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace cnn::app {

Ranks::Ranks() : launched_(dist::launched_rank()) {}

void Ranks::start(int* argc, char*** argv) {
  // mpirun -np 1 runs over MPI too (the data-parallel path with one rank) where the build has it.
  if (!launched_ || (!several() && !dist::MpiSession::available())) return;
  session_ = std::make_unique<dist::MpiSession>(argc, argv);
}

Communicator* Ranks::world() { return session_ ? &session_->world() : nullptr; }

void Ranks::fail(const std::string& message, int code) {
  std::cout.flush();
  std::fflush(stdout);
  if (session_) session_->abort(message, code);
  std::cerr << (several() ? "rank " + std::to_string(rank()) + " of " + std::to_string(count()) + ": " : "")
            << message << "\n";
  std::exit(code);
}

}  // namespace cnn::app
