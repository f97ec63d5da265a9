#pragma once
// N data-parallel ranks as N threads of one process, for the tests that need no MPI: every
// collective waits for all ranks, adds their values in rank order (the same bits on each) and
// writes the result into every rank's buffer. CPU memory only. A rank that does not arrive within
// the timeout makes the others throw, so that a test with a mismatched call fails instead of hanging.
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <cnnengine/engine/core/communicator.hpp>

namespace cnn::testing {

class ThreadRanks {
 public:
  explicit ThreadRanks(int ranks) : ranks_(ranks), arrived_(static_cast<std::size_t>(ranks)) {
    for (int r = 0; r < ranks; ++r) members_.push_back(std::make_unique<Member>(*this, r));
  }

  Communicator& rank(int r) { return *members_[static_cast<std::size_t>(r)]; }
  int count() const { return ranks_; }
  // Collectives made so far (every rank's call counts once).
  long collectives() const { return generation_; }

  // fn(rank) on one thread per rank; the first exception is rethrown once all have ended.
  void run(const std::function<void(int)>& fn) {
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks_));
    for (int r = 0; r < ranks_; ++r)
      threads.emplace_back([&, r] {
        try {
          fn(r);
        } catch (...) {
          errors[static_cast<std::size_t>(r)] = std::current_exception();
        }
      });
    for (auto& t : threads) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }

 private:
  enum class Op { sum_floats, sum_doubles, max_doubles, broadcast_bytes };
  struct Contribution {
    Op op;
    void* data;
    std::size_t count;
  };

  class Member final : public Communicator {
   public:
    Member(ThreadRanks& all, int rank) : all_(all), rank_(rank) {}
    int rank() const override { return rank_; }
    int ranks() const override { return all_.ranks_; }
    std::string describe() const override { return "threads, " + std::to_string(all_.ranks_) + " ranks"; }
    DeviceKind memory_kind() const override { return DeviceKind::cpu; }
    std::size_t reserved_bytes(std::size_t) const override { return 0; }
    void sum_host(std::span<double> v) override { all_.collective(rank_, {Op::sum_doubles, v.data(), v.size()}); }
    void max_host(std::span<double> v) override { all_.collective(rank_, {Op::max_doubles, v.data(), v.size()}); }
    void broadcast_host(std::span<std::byte> b) override {
      all_.collective(rank_, {Op::broadcast_bytes, b.data(), b.size()});
    }
    void sum(const Tensor& t) override { all_.collective(rank_, {Op::sum_floats, t.data, t.elements()}); }
    void start_sum(const Tensor& t) override {
      ++started_;
      sum(t);
    }
    void wait_started() override { started_ = 0; }
    long started() const { return started_; }

   private:
    ThreadRanks& all_;
    int rank_;
    long started_ = 0;
  };

  void collective(int rank, Contribution mine) {
    std::unique_lock lock(mutex_);
    const long generation = generation_;
    arrived_[static_cast<std::size_t>(rank)] = mine;
    if (++count_ == ranks_) {
      mismatched_ = mismatched_ || !same_calls();
      if (!mismatched_) combine();
      count_ = 0;
      ++generation_;
      changed_.notify_all();
    } else if (!changed_.wait_for(lock, std::chrono::seconds(60), [&] { return generation_ != generation; })) {
      throw std::runtime_error("thread ranks: rank " + std::to_string(rank) + " waited 60 s for the others");
    }
    // Every rank fails, outside the combining, rather than one throwing while the others wait.
    if (mismatched_) throw std::logic_error("thread ranks: the ranks made different collective calls");
  }

  bool same_calls() const {
    for (const Contribution& c : arrived_)
      if (c.op != arrived_[0].op || c.count != arrived_[0].count) return false;
    return true;
  }

  // Every rank's contribution is in arrived_; they all wait, so their buffers may be written.
  void combine() {
    const Contribution& first = arrived_[0];
    for (std::size_t i = 0; i < first.count; ++i) {
      switch (first.op) {
        case Op::sum_floats: {
          float sum = 0;
          for (const Contribution& c : arrived_) sum += static_cast<float*>(c.data)[i];
          for (const Contribution& c : arrived_) static_cast<float*>(c.data)[i] = sum;
          break;
        }
        case Op::sum_doubles:
        case Op::max_doubles: {
          double value = first.op == Op::sum_doubles ? 0 : static_cast<double*>(first.data)[i];
          for (const Contribution& c : arrived_) {
            const double v = static_cast<double*>(c.data)[i];
            value = first.op == Op::sum_doubles ? value + v : std::max(value, v);
          }
          for (const Contribution& c : arrived_) static_cast<double*>(c.data)[i] = value;
          break;
        }
        case Op::broadcast_bytes: break;
      }
    }
    if (first.op == Op::broadcast_bytes)
      for (const Contribution& c : arrived_) std::memmove(c.data, first.data, first.count);
  }

  const int ranks_;
  std::vector<std::unique_ptr<Member>> members_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Contribution> arrived_;
  int count_ = 0;
  long generation_ = 0;
  bool mismatched_ = false;  // once the ranks' calls differed, every later call fails too
};

}  // namespace cnn::testing
