#include "ranks.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <span>
#include <thread>
#include <vector>

#include "usage_error.hpp"

namespace cnn::app {

Ranks::Ranks() : launched_(dist::launched_rank()) {}

void Ranks::start(int* argc, char*** argv) {
  // mpirun -np 1 runs over MPI too (the data-parallel path with one rank) where the build has it.
  if (!launched_ || (!several() && !dist::MpiSession::available())) return;
  session_ = std::make_unique<dist::MpiSession>(argc, argv);
  // The launcher's environment and MPI must name the same job, or the ranks' shares would overlap.
  if (session_->rank() != rank() || session_->ranks() != count())
    throw UsageError("the launcher (" + launched_->launcher + ") calls this process rank " + std::to_string(rank()) +
                     " of " + std::to_string(count()) + ", MPI rank " + std::to_string(session_->rank()) + " of " +
                     std::to_string(session_->ranks()));
}

std::string Ranks::prefix() const { return several() ? "rank " + std::to_string(rank()) + ": " : std::string(); }

namespace {

// FNV-1a over `bytes`, continuing from `hash`.
std::uint64_t fnv1a(std::span<const std::byte> bytes, std::uint64_t hash = 14695981039346656037ull) {
  for (std::byte b : bytes) hash = (hash ^ static_cast<std::uint64_t>(b)) * 1099511628211ull;
  return hash;
}

}  // namespace

int Ranks::cpu_threads() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);  // stays empty (and names no cores) where the affinity cannot be read
  const int cores = sched_getaffinity(0, sizeof allowed, &allowed) == 0
                        ? std::max(1, CPU_COUNT(&allowed))
                        : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  Communicator* c = world();
  if (!c || !several()) return cores;
  // The ranks on this machine bound to the same cores share them: mpirun binds each rank of a
  // small job to a core of its own, larger jobs to a socket each, a container or a batch system
  // may give them all one set. Every rank learns every rank's (machine, cores) in one sum.
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::uint64_t key = fnv1a(std::as_bytes(std::span<const char>(host, std::strlen(host))));
  key = fnv1a(std::as_bytes(std::span<const cpu_set_t>(&allowed, 1)), key);
  std::vector<double> keys(static_cast<std::size_t>(count()), 0.0);
  keys[static_cast<std::size_t>(rank())] = static_cast<double>(key >> 12) + 1.0;  // 52 bits: exact in a double
  c->sum_host(keys);
  const auto sharing = std::count(keys.begin(), keys.end(), keys[static_cast<std::size_t>(rank())]);
  return std::max(1, cores / static_cast<int>(sharing));
}

Communicator* Ranks::world() { return session_ ? &session_->world() : nullptr; }

void Ranks::agree_on_device(DeviceKind kind) {
  Communicator* c = world();
  if (!c || !several()) return;
  double chose[2] = {kind == DeviceKind::cpu ? 1.0 : 0.0, kind == DeviceKind::cuda ? 1.0 : 0.0};
  c->max_host(chose);
  if (chose[0] > 0 && chose[1] > 0)
    throw UsageError("the ranks chose different devices (a GPU on some, the CPU on others): give --device cuda or "
                      "--device cpu");
}

void Ranks::check_same_job(const std::string& job) {
  Communicator* c = world();
  if (!c || !several()) return;
  // Rank 0's words, length first, to every rank.
  std::uint64_t length = job.size();
  c->broadcast_host(std::as_writable_bytes(std::span<std::uint64_t>(&length, 1)));
  std::string rank0(length, '\0');
  if (rank() == 0) rank0 = job;
  c->broadcast_host(std::as_writable_bytes(std::span<char>(rank0.data(), rank0.size())));
  const bool differs = rank0 != job;
  double differing_rank[1] = {differs ? static_cast<double>(rank()) : -1.0};
  c->max_host(differing_rank);
  if (differing_rank[0] < 0) return;
  // The last rank that differs says how, and every rank ends with the same words (whichever
  // rank's MPI_Abort wins, the message is whole).
  const int who = static_cast<int>(differing_rank[0]);
  constexpr std::size_t kWords = 400;
  std::string words;
  if (rank() == who) {
    // The first line that differs, as rank 0 and this rank have it.
    std::size_t at = 0;
    while (at < job.size() && at < rank0.size() && job[at] == rank0[at]) ++at;
    const std::size_t newline = at == 0 ? std::string::npos : job.rfind('\n', at - 1);
    const std::size_t begin = newline == std::string::npos ? 0 : newline + 1;
    const auto line_from = [begin](const std::string& text) {
      const std::size_t first = std::min(text.find_first_not_of(' ', begin), text.size());
      return text.substr(first, std::min<std::size_t>(text.find('\n', first) - first, kWords / 3));
    };
    words = "rank 0 has '" + line_from(rank0) + "', rank " + std::to_string(who) + " '" + line_from(job) + "'";
  }
  std::vector<double> shared(kWords, 0.0);  // the words as byte values, summed: zeros elsewhere
  for (std::size_t i = 0; i < words.size() && i < kWords; ++i) shared[i] = static_cast<unsigned char>(words[i]);
  c->sum_host(shared);
  words.clear();
  for (double b : shared) {
    if (b == 0) break;
    words += static_cast<char>(static_cast<unsigned char>(b));
  }
  throw UsageError("rank " + std::to_string(who) + " is not running rank 0's job (its settings, network, data or "
                   "device): " + words);
}

void Ranks::fail(const std::string& message, int code) {
  std::cout.flush();
  std::fflush(stdout);
  if (session_) session_->abort(message, code);
  std::cerr << (several() ? "rank " + std::to_string(rank()) + " of " + std::to_string(count()) + ": " : "")
            << message << "\n";
  std::exit(code);
}

}  // namespace cnn::app
