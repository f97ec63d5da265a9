#pragma once
// Whether this process is one rank of a job that a launcher (mpirun, mpiexec, srun) started, read
// from the environment the launcher sets, before and without MPI: a program built without MPI can
// then refuse to run as N copies that would each train alone and write the same files.
#include <optional>
#include <string>

namespace cnn::dist {

struct LaunchedRank {
  int rank = 0, ranks = 1;              // in the job
  int local_rank = 0, local_ranks = 1;  // on this machine (to share its cores or pick its GPU)
  std::string launcher;                 // "Open MPI", "PMI"
};

// The job's shape when a launcher started this process (`mpirun -np 1` too); nullopt when none
// did. Values that do not read as a rank in a job are a ConfigError.
std::optional<LaunchedRank> launched_rank();

}  // namespace cnn::dist
