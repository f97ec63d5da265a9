#include <cnnengine/dist/mpi_session.hpp>

#include <charconv>
#include <cstdlib>
#include <cstring>

#include <cnnengine/base/error.hpp>

namespace cnn::dist {
namespace {

// The variable's value as a number, nullopt when it is not set.
std::optional<int> number(const char* name) {
  const char* text = std::getenv(name);
  if (!text) return std::nullopt;
  int value = 0;
  const char* end = text + std::strlen(text);
  const auto [last, error] = std::from_chars(text, end, value);
  if (error != std::errc() || last != end || value < 0)
    throw ConfigError(std::string("the launcher's ") + name + "=\"" + text + "\" is not a number");
  return value;
}

struct Names {
  const char *launcher, *rank, *ranks, *local_rank, *local_ranks;
};
// Open MPI's mpirun; MPICH's and Intel MPI's hydra and Slurm's srun (PMI).
constexpr Names kLaunchers[] = {
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
};

}  // namespace

std::optional<LaunchedRank> launched_rank() {
  for (const Names& names : kLaunchers) {
    const std::optional<int> ranks = number(names.ranks);
    if (!ranks) continue;
    LaunchedRank r;
    r.launcher = names.launcher;
    r.ranks = *ranks;
    r.rank = number(names.rank).value_or(0);
    r.local_ranks = number(names.local_ranks).value_or(1);
    r.local_rank = number(names.local_rank).value_or(0);
    if (r.ranks < 1 || r.rank >= r.ranks || r.local_ranks < 1 || r.local_rank >= r.local_ranks)
      throw ConfigError("the launcher (" + r.launcher + ") says rank " + std::to_string(r.rank) + " of " +
                        std::to_string(r.ranks) + ", local rank " + std::to_string(r.local_rank) + " of " +
                        std::to_string(r.local_ranks) + ": not a rank of the job");
    return r;
  }
  return std::nullopt;
}

}  // namespace cnn::dist
