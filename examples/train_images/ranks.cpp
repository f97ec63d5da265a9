#include "ranks.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <span>
#include <thread>

#include "usage_error.hpp"

namespace cnn::app {

Ranks::Ranks() : launched_(dist::launched_rank()) {}

void Ranks::start(int* argc, char*** argv) {
  // mpirun -np 1 runs over MPI too (the data-parallel path with one rank) where the build has it.
  if (!launched_ || (!several() && !dist::MpiSession::available())) return;
  session_ = std::make_unique<dist::MpiSession>(argc, argv);
}

std::string Ranks::prefix() const { return several() ? "rank " + std::to_string(rank()) + ": " : std::string(); }

int Ranks::cpu_threads() const {
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const int bound = sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : cores;
  if (bound > 0 && bound < cores) return bound;
  return std::max(1, cores / local_count());
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
  double differing_rank[1] = {differs ? static_cast<double>(rank()) : -1.0};  // the last one that differs
  c->max_host(differing_rank);
  if (differing_rank[0] < 0) return;
  const std::string who = "rank " + std::to_string(static_cast<int>(differing_rank[0]));
  if (!differs)
    throw UsageError(who + " is not running rank 0's job (another data set, network, setting or build): see its "
                      "message");
  // The first line that differs, as each has it.
  std::size_t at = 0;
  while (at < job.size() && at < rank0.size() && job[at] == rank0[at]) ++at;
  const std::size_t newline = at == 0 ? std::string::npos : job.rfind('\n', at - 1);
  const std::size_t begin = newline == std::string::npos ? 0 : newline + 1;
  const auto line_from = [begin](const std::string& text) {
    const std::size_t first = std::min(text.find_first_not_of(' ', begin), text.size());
    return text.substr(first, text.find('\n', first) - first);
  };
  throw UsageError(who + " is not running rank 0's job: rank 0 has '" + line_from(rank0) + "', this rank '" +
                    line_from(job) + "'");
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
