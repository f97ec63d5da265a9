#pragma once
// Parameters, their gradients and the optimizer state, each in one contiguous block on the
// backend's device: a checkpoint is one write, the optimizer update one call over a flat block,
// and (later) data-parallel training one all-reduce of the gradient block.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <cnnengine/engine/core/network.hpp>
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn {

class ParameterStore {
 public:
  // Allocates the three blocks from `resource` and initialises the parameters from `seed`
  // (each tensor by its ParamSpec's Init, counter-based: the same on every backend). `state_copies`: how many
  // saved copies of the non-trainable state it keeps (see save_state).
  ParameterStore(const Network& network, Backend& backend, memory::MemoryResource& resource,
                 int optimizer_slots, std::uint64_t seed, int state_copies = 1);
  // A predictor's store: the parameters and their state (BatchNorm running statistics) only, no
  // gradient block, no optimizer state, no saved copy of the state (inference never changes it).
  // grads() are empty views, gradients() and the optimizer state empty, save_state() refused.
  static std::unique_ptr<ParameterStore> for_inference(const Network& network, Backend& backend,
                                                       memory::MemoryResource& resource, std::uint64_t seed = 1);
  ~ParameterStore();
  ParameterStore(const ParameterStore&) = delete;
  ParameterStore& operator=(const ParameterStore&) = delete;

  std::span<const Tensor> params(int node) const { return params_[static_cast<std::size_t>(node)]; }
  std::span<const Tensor> grads(int node) const { return grads_[static_cast<std::size_t>(node)]; }

  // Flat views over every trainable parameter (with alignment padding, which stays zero), and
  // over those the optimizer trains: all but a frozen network's first nodes' (Network::
  // freeze_through), which lie first. Gradients and optimizer state exist for those alone.
  Tensor trainable() const { return flat(params_data_, trainable_floats_); }
  Tensor trained() const { return flat(params_data_ + frozen_floats_, trained_floats()); }
  Tensor gradients() const { return training_ ? flat(grads_data_, trained_floats()) : Tensor{}; }
  Tensor optimizer_slot(int slot) const {
    return flat(state_data_ + static_cast<std::size_t>(slot) * trained_floats(), trained_floats());
  }
  std::size_t trainable_count() const { return trainable_count_; }  // trained, without padding
  // The trained floats of the nodes before `node` (padding included): where its own begin in
  // trained() (node order), or all of them. Found at construction: a step may ask it.
  std::size_t trained_floats_before(int node) const;
  // The non-trainable state (BatchNorm running statistics) as one flat view; empty without any.
  Tensor running_state() const {
    return state_floats() ? flat(params_data_ + trainable_floats_, state_floats()) : Tensor{};
  }

  // The state copies a trainer keeps on `backend`: two where copies overlap compute (a step's
  // failure is learnt one step late: Trainer::submit_step), else one. The plan and the trainer
  // both ask here.
  static int state_copies_for(const Backend& backend);
  // The bytes a store for this network and optimizer would take, without allocating.
  static memory::CategoryBytes planned_bytes(const Network& network, int optimizer_slots, int state_copies = 1);
  // The bytes of for_inference's store: the parameters alone.
  static memory::CategoryBytes planned_inference_bytes(const Network& network);
  // False for an inference store.
  bool has_gradients() const { return training_; }
  // floats(Block::parameters) of a store for this network, without allocating.
  static std::size_t planned_parameter_floats(const Network& network);
  // Where each of `network`'s parameter tensors lies in the parameters block (the trainable ones
  // first, then the state such as running statistics), computed without allocating.
  struct Place {
    int node;
    std::string name;  // the layer's ("weight", "running_mean", ...)
    Shape shape;
    std::size_t offset;  // floats from the block's start
  };
  static std::vector<Place> places(const Network& network);

  void zero_gradients();
  memory::CategoryBytes bytes() const;

  // Non-trainable state (BatchNorm running statistics) is saved before a step and restored if
  // the step is replayed after an out-of-memory failure, so a replay never counts twice. With two
  // copies, the state before a step survives the next step's save: a trainer that learns of a
  // step's failure one step late (Trainer::submit_step) restores it from there.
  void save_state(int copy = 0);
  void restore_state(int copy = 0);

  // All parameters and state (running statistics) as host floats, in a fixed order.
  std::vector<float> download() const;
  void upload(const std::vector<float>& values);
  std::size_t total_floats() const { return total_floats_; }

  // The blocks a checkpoint holds, read and written a range at a time (no host copy of a whole
  // block: see kCopyChunkFloats): the parameters with their state (total_floats()), and the
  // optimizer's state (optimizer_floats()). Ranges are in floats; one out of bounds is a
  // ConfigError.
  enum class Block { parameters, optimizer_state };
  std::size_t floats(Block block) const;
  // A block as one flat view (for data-parallel replicas kept alike).
  Tensor block_view(Block block) const { return flat(block_data(block, 0, floats(block)), floats(block)); }
  void download(Block block, std::size_t first, std::size_t count, float* host) const;
  void upload(Block block, std::size_t first, std::size_t count, const float* host);
  // The host memory a range copy needs at most (the initialisation, save and load use chunks
  // of this many floats).
  static constexpr std::size_t kCopyChunkFloats = std::size_t{1} << 18;  // 1 MiB

 private:
  ParameterStore(const Network& network, Backend& backend, memory::MemoryResource& resource, int optimizer_slots,
                 std::uint64_t seed, int state_copies, bool training);
  static Tensor flat(float* data, std::size_t n) { return Tensor{data, Shape{static_cast<int>(n)}}; }
  struct Slot {
    int node;
    std::size_t index;
    ParamSpec spec;
    std::size_t offset;  // floats from the block's start
  };
  struct Layout {
    std::vector<Slot> slots;
    std::size_t trainable_floats = 0, total_floats = 0, trainable_count = 0;
    std::size_t frozen_floats = 0;  // the frozen nodes' trainable tensors, first among them
  };
  static Layout layout(const Network& network);
  std::size_t block_bytes(memory::Category category) const;
  std::size_t state_floats() const { return total_floats_ - trainable_floats_; }
  std::size_t trained_floats() const { return trainable_floats_ - frozen_floats_; }
  float* block_data(Block block, std::size_t first, std::size_t count) const;
  Tensor state_copy(int copy) const;

  Backend& backend_;
  bool training_;
  int slots_;
  int state_copies_;  // 0 in an inference store
  std::size_t trainable_floats_ = 0, total_floats_ = 0, trainable_count_ = 0, frozen_floats_ = 0;
  struct Blocks;  // the three blocks, each a memory::Buffer (parameter_store.cpp)
  std::unique_ptr<Blocks> blocks_;
  float* params_data_ = nullptr;  // the blocks' floats, for the flat views
  float* grads_data_ = nullptr;
  float* state_data_ = nullptr;
  std::vector<std::vector<Tensor>> params_, grads_;
  std::vector<std::size_t> trained_before_;  // trained_floats_before(node), a node an entry
};

}  // namespace cnn
