#include <cnnengine/dist/mpi_session.hpp>

#include <cstdio>
#include <cstdlib>

#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/communicator.hpp>

#if CNN_HAVE_MPI
#include "dist/detail/mpi_communicator.hpp"
#endif

namespace cnn::dist {

#if CNN_HAVE_MPI

struct MpiSession::State {
  MpiCommunicator world;
};

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) throw ConfigError("MPI was already started in this process: one MpiSession per process");
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
    throw ConfigError("MPI could not start (MPI_Init_thread failed)");
  // Errors come back as codes (DeviceError), so that the rank can say what failed before it ends the job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  state_ = std::make_unique<State>();
}

MpiSession::~MpiSession() {
  if (state_) MPI_Finalize();
}

Communicator& MpiSession::world() { return state_->world; }
int MpiSession::rank() const { return state_->world.rank(); }
int MpiSession::ranks() const { return state_->world.ranks(); }

void MpiSession::abort(const std::string& message, int code) {
  std::fprintf(stderr, "rank %d of %d: %s\n", state_->world.rank(), state_->world.ranks(), message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; should it, the rank ends anyway
}

bool MpiSession::available() { return true; }

std::string MpiSession::version() { return mpi_library_version(); }

#else

struct MpiSession::State {};

MpiSession::MpiSession(int*, char***) {
  throw ConfigError("this cnnengine was built without MPI (CNN_MPI=OFF, or libopenmpi-dev was not installed when "
                    "it was configured): it cannot train over several processes");
}
MpiSession::~MpiSession() = default;
Communicator& MpiSession::world() { throw ConfigError("no MPI in this build"); }
int MpiSession::rank() const { throw ConfigError("no MPI in this build"); }
int MpiSession::ranks() const { throw ConfigError("no MPI in this build"); }
void MpiSession::abort(const std::string& message, int code) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::_Exit(code);
}
bool MpiSession::available() { return false; }
std::string MpiSession::version() { return {}; }

#endif

}  // namespace cnn::dist
