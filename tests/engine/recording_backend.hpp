#pragma once
// A CPU backend that captures as CUDA graphs do: between begin_capture and end_capture each
// compute call is recorded, with its tensors by address and every other argument by value, and
// runs only when replayed; copies and synchronisation while capturing are refused. Training
// with it must give the eager run's results to the bit: a per-step value that reached a kernel
// as an argument instead of through device memory would be replayed stale and show.
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "engine/core/forwarding_backend.hpp"

namespace cnn::testing {

class RecordingBackend final : public ForwardingBackend {
 public:
  explicit RecordingBackend(int threads) : ForwardingBackend(cpu_), cpu_(threads) {}

  // The n-th recorded call of the next capture throws (n >= 1; 0: none), as a library call
  // that cannot be captured would.
  void fail_next_capture_at(int call) { fail_at_ = call; }

  std::string description() const override { return "recording " + cpu_.description(); }
  void synchronize() override {
    refuse("synchronize");
    ForwardingBackend::synchronize();
  }

  std::string capture_support() const override { return {}; }
  void begin_capture() override {
    if (recording_) throw std::logic_error("begin_capture while capturing");
    recording_ = std::make_unique<Calls>();
  }
  std::unique_ptr<CapturedCalls> end_capture() override {
    if (!recording_) throw std::logic_error("end_capture without begin_capture");
    return std::make_unique<Recording>(*this, std::move(*std::exchange(recording_, nullptr)));
  }
  void abort_capture() noexcept override { recording_.reset(); }

 private:
  using Calls = std::vector<std::function<void()>>;
  class Recording final : public CapturedCalls {
   public:
    Recording(RecordingBackend& backend, Calls calls) : backend_(backend), calls_(std::move(calls)) {}
    void replay() override {
      backend_.refuse("a replay");
      for (auto& c : calls_) c();
    }

   private:
    RecordingBackend& backend_;
    Calls calls_;
  };

  void run(const BackendCall& call, const std::function<void()>& work) override {
    if (call.host_transfer) refuse(call.name);
    if (!recording_) return work();
    if (fail_at_ > 0 && static_cast<int>(recording_->size()) + 1 == fail_at_) {
      fail_at_ = 0;
      throw std::runtime_error("this call cannot be captured (injected)");
    }
    recording_->push_back(work);
  }
  void refuse(const char* what) const {
    if (recording_) throw std::logic_error(std::string(what) + " while capturing");
  }

  CpuBackend cpu_;
  std::unique_ptr<Calls> recording_;
  int fail_at_ = 0;
};

}  // namespace cnn::testing
