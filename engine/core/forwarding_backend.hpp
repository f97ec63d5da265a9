#pragma once
// A Backend that hands every call to another one: the base of a wrapper that watches calls
// (tests/engine/recording_backend.hpp records them, benchmarks/cpu_profile/timing_backend.hpp
// times them). Every call that computes or copies passes through run(), so a wrapper overrides
// run() to watch them all, and a call's do_<name> only to look at that call's arguments (calling
// ForwardingBackend::do_<name> to pass it on). The calls come from CNN_BACKEND_CALLS (Note [One
// front per backend call], backend.hpp): a new one needs nothing here, nor in any wrapper.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>

#include <cnnengine/engine/core/backend.hpp>

namespace cnn {

// One call on its way to the inner backend.
struct BackendCall {
  const char* name = "";            // the Backend method's: "conv2d_forward"
  std::span<const Tensor> outputs;  // the tensors it writes; valid during run() only
  // A copy between host and device memory (copy_to_device, copy_to_host and their _async forms):
  // run() must do it before it returns, never keep it for later.
  bool host_transfer = false;
};

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(Backend& inner) : inner_(inner) {}

  DeviceKind kind() const override { return inner_.kind(); }
  std::string description() const override { return inner_.description(); }
  Precision precision() const override { return inner_.precision(); }
  bool takes_packed_values() const override { return inner_.takes_packed_values(); }
  bool fuses_batchnorm_relu() const override { return inner_.fuses_batchnorm_relu(); }
  bool fuses_batchnorm_add_relu() const override { return inner_.fuses_batchnorm_add_relu(); }
  bool fuses_conv_relu() const override { return inner_.fuses_conv_relu(); }
  bool takes_channels_last() const override { return inner_.takes_channels_last(); }
  memory::MemoryResource& device_memory() override { return inner_.device_memory(); }
  memory::MemoryResource& staging_memory() override { return inner_.staging_memory(); }
  memory::MemoryResource* set_query_memory(memory::MemoryResource* memory) override {
    return inner_.set_query_memory(memory);
  }
  std::size_t library_reserved_bytes() const override { return inner_.library_reserved_bytes(); }
  std::size_t available_memory() const override { return inner_.available_memory(); }
  std::size_t largest_tensor_elements() const override { return inner_.largest_tensor_elements(); }
  ComputeRates compute_rates() const override { return inner_.compute_rates(); }
  std::string determinism_report() const override { return inner_.determinism_report(); }

  void copy_to_device(const void* host, void* device, std::size_t bytes) override {
    transfer("copy_to_device", [&] { inner_.copy_to_device(host, device, bytes); });
  }
  void copy_to_host(const void* device, void* host, std::size_t bytes) override {
    transfer("copy_to_host", [&] { inner_.copy_to_host(device, host, bytes); });
  }
  void synchronize() override { inner_.synchronize(); }

  bool copies_overlap_compute() const override { return inner_.copies_overlap_compute(); }
  Fence copy_to_device_async(const void* host, void* device, std::size_t bytes) override {
    Fence fence;
    transfer("copy_to_device_async", [&] { fence = inner_.copy_to_device_async(host, device, bytes); });
    return fence;
  }
  Fence copy_to_host_async(const void* device, void* host, std::size_t bytes) override {
    Fence fence;
    transfer("copy_to_host_async", [&] { fence = inner_.copy_to_host_async(device, host, bytes); });
    return fence;
  }
  bool reached(Fence fence) override { return inner_.reached(fence); }
  void wait(Fence fence) override { inner_.wait(fence); }

  std::string capture_support() const override { return inner_.capture_support(); }
  void begin_capture() override { inner_.begin_capture(); }
  std::unique_ptr<CapturedCalls> end_capture() override { return inner_.end_capture(); }
  void abort_capture() noexcept override { inner_.abort_capture(); }

 protected:
  // Every call of CNN_BACKEND_CALLS: a compute call through run(), naming the tensors it writes; a
  // workspace query straight to the inner backend.
#define CNN_FORWARD_CALL(name, params, args, outputs) \
  void do_##name params override { call(#name, {CNN_FORWARD_UNPACK outputs}, [=, this] { inner_.name args; }); }
#define CNN_FORWARD_QUERY(name, params, args) \
  std::size_t do_##name params override { return inner_.name args; }
#define CNN_FORWARD_UNPACK(...) __VA_ARGS__
  CNN_BACKEND_CALLS(CNN_FORWARD_CALL, CNN_FORWARD_QUERY)
#undef CNN_FORWARD_CALL
#undef CNN_FORWARD_QUERY
#undef CNN_FORWARD_UNPACK

  // Where every call that computes or copies goes: `work` makes it on the inner backend. A
  // compute call's work holds its arguments by value and may be kept and run later (a recording);
  // a host transfer's must run before run() returns.
  virtual void run(const BackendCall& /*call*/, const std::function<void()>& work) { work(); }

  Backend& inner() { return inner_; }
  const Backend& inner() const { return inner_; }

 private:
  void call(const char* name, std::initializer_list<Tensor> outputs, const std::function<void()>& work) {
    run(BackendCall{name, std::span<const Tensor>(outputs.begin(), outputs.size()), false}, work);
  }
  void transfer(const char* name, const std::function<void()>& work) { run(BackendCall{name, {}, true}, work); }

  Backend& inner_;
};

}  // namespace cnn
