#include <cnnengine/engine/core/parameter_store.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/backend.hpp>
#include "memory/buffer.hpp"
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn {

int ParameterStore::state_copies_for(const Backend& backend) { return backend.copies_overlap_compute() ? 2 : 1; }

struct ParameterStore::Blocks {
  memory::Buffer params, grads, state;
};

ParameterStore::~ParameterStore() = default;

namespace {

constexpr std::size_t kFloatAlignment = 16;  // 64 bytes between tensors

std::size_t padded(std::size_t floats) { return memory::align_up(floats, kFloatAlignment); }

// Elements [begin, end) of a parameter's initial values into out[0, end - begin): counter-based,
// so any range is computed alone.
void initialise(const ParamSpec& spec, float* out, std::uint64_t seed, std::size_t begin, std::size_t end) {
  const std::size_t n = end - begin;
  switch (spec.init) {
    case Init::zeros: std::fill(out, out + n, 0.f); break;
    case Init::ones: std::fill(out, out + n, 1.f); break;
    case Init::he_normal: {
      const float stddev = std::sqrt(2.0f / static_cast<float>(spec.fan_in));
      for (std::size_t i = begin; i < end; ++i) {  // Box-Muller on counter-based uniforms
        const float u1 = std::max(uniform01(seed, 2 * i), 1e-7f), u2 = uniform01(seed, 2 * i + 1);
        out[i - begin] = stddev * std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
      }
      break;
    }
    case Init::glorot_uniform: {
      const float limit = std::sqrt(6.0f / static_cast<float>(spec.fan_in + spec.fan_out));
      for (std::size_t i = begin; i < end; ++i) out[i - begin] = limit * (2.0f * uniform01(seed, i) - 1.0f);
      break;
    }
    case Init::fan_in_uniform: {
      const float limit = 1.0f / std::sqrt(static_cast<float>(spec.fan_in));
      for (std::size_t i = begin; i < end; ++i) out[i - begin] = limit * (2.0f * uniform01(seed, i) - 1.0f);
      break;
    }
  }
}

// Each block is at least one float, so that every allocation is a real one. The parameter block
// also holds the copies of the non-trainable state (see save_state); gradients and optimizer
// state are of the trained floats alone (not the frozen ones).
memory::CategoryBytes block_sizes(std::size_t total, std::size_t trainable, std::size_t trained, int slots,
                                  int state_copies) {
  memory::CategoryBytes b;
  const std::size_t copies = (total - trainable) * static_cast<std::size_t>(state_copies);
  b[memory::Category::parameters] = std::max<std::size_t>(total + copies, 1) * sizeof(float);
  if (state_copies == 0) return b;  // an inference store: the parameters alone
  b[memory::Category::parameter_gradients] = std::max<std::size_t>(trained, 1) * sizeof(float);
  b[memory::Category::optimizer_state] = std::max<std::size_t>(trained * static_cast<std::size_t>(slots), 1) * sizeof(float);
  return b;
}

}  // namespace

ParameterStore::Layout ParameterStore::layout(const Network& network) {
  // Trainable tensors first (they share offsets with the gradient block), state after.
  Layout l;
  for (int pass = 0; pass < 2; ++pass) {
    for (int id = 1; id < network.size(); ++id) {
      const auto specs = network.node(id).layer->parameters();
      for (std::size_t k = 0; k < specs.size(); ++k) {
        if (specs[k].trainable != (pass == 0)) continue;
        l.slots.push_back({id, k, specs[k], l.total_floats});
        l.total_floats += padded(specs[k].shape.elements());
        if (pass == 0 && network.frozen(id)) l.frozen_floats = l.total_floats;  // node order: a prefix
        if (pass == 0 && !network.frozen(id)) l.trainable_count += specs[k].shape.elements();
      }
    }
    if (pass == 0) l.trainable_floats = l.total_floats;
  }
  return l;
}

memory::CategoryBytes ParameterStore::planned_bytes(const Network& network, int optimizer_slots, int state_copies) {
  const Layout l = layout(network);
  return block_sizes(l.total_floats, l.trainable_floats, l.trainable_floats - l.frozen_floats, optimizer_slots,
                     state_copies);
}

memory::CategoryBytes ParameterStore::planned_inference_bytes(const Network& network) {
  const Layout l = layout(network);
  return block_sizes(l.total_floats, l.trainable_floats, 0, 0, 0);
}

std::size_t ParameterStore::planned_parameter_floats(const Network& network) { return layout(network).total_floats; }

std::vector<ParameterStore::Place> ParameterStore::places(const Network& network) {
  std::vector<Place> places;
  for (const Slot& slot : layout(network).slots) places.push_back({slot.node, slot.spec.name, slot.spec.shape, slot.offset});
  return places;
}

std::size_t ParameterStore::block_bytes(memory::Category category) const { return bytes()[category]; }

ParameterStore::ParameterStore(const Network& network, Backend& backend, memory::MemoryResource& resource,
                               int optimizer_slots, std::uint64_t seed, int state_copies)
    : ParameterStore(network, backend, resource, optimizer_slots, seed, state_copies, true) {
  if (state_copies < 1 || state_copies > 2)
    throw ConfigError("a parameter store keeps 1 or 2 copies of its state, not " + std::to_string(state_copies));
}

std::unique_ptr<ParameterStore> ParameterStore::for_inference(const Network& network, Backend& backend,
                                                              memory::MemoryResource& resource, std::uint64_t seed) {
  return std::unique_ptr<ParameterStore>(new ParameterStore(network, backend, resource, 0, seed, 0, false));
}

ParameterStore::ParameterStore(const Network& network, Backend& backend, memory::MemoryResource& resource,
                               int optimizer_slots, std::uint64_t seed, int state_copies, bool training)
    : backend_(backend), training_(training), slots_(optimizer_slots), state_copies_(state_copies) {
  if (state_copies < 0 || state_copies > 2)
    throw ConfigError("a parameter store keeps 1 or 2 copies of its state, not " + std::to_string(state_copies));
  const Layout l = layout(network);
  trainable_floats_ = l.trainable_floats;
  total_floats_ = l.total_floats;
  trainable_count_ = l.trainable_count;
  frozen_floats_ = training ? l.frozen_floats : 0;

  using memory::Category;
  blocks_ = std::make_unique<Blocks>();
  blocks_->params = memory::Buffer(resource, block_bytes(Category::parameters), Category::parameters);
  params_data_ = blocks_->params.floats();
  if (training_) {
    blocks_->grads = memory::Buffer(resource, block_bytes(Category::parameter_gradients), Category::parameter_gradients);
    blocks_->state = memory::Buffer(resource, block_bytes(Category::optimizer_state), Category::optimizer_state);
    grads_data_ = blocks_->grads.floats();
    state_data_ = blocks_->state.floats();
  }

  params_.resize(static_cast<std::size_t>(network.size()));
  grads_.resize(static_cast<std::size_t>(network.size()));
  for (int id = 1; id < network.size(); ++id) {
    const auto count = network.node(id).layer->parameters().size();
    params_[static_cast<std::size_t>(id)].resize(count);
    grads_[static_cast<std::size_t>(id)].resize(count);
  }
  // Padding and the state's copy stay zero; each parameter is initialised a chunk at a time.
  backend_.fill(flat(params_data_, blocks_->params.bytes() / sizeof(float)), 0.f);
  std::vector<float> chunk(std::min(kCopyChunkFloats, std::max<std::size_t>(total_floats_, 1)));
  for (const Slot& s : l.slots) {
    params_[static_cast<std::size_t>(s.node)][s.index] = Tensor{params_data_ + s.offset, s.spec.shape};
    if (s.spec.trainable && training_ && !network.frozen(s.node))
      grads_[static_cast<std::size_t>(s.node)][s.index] = Tensor{grads_data_ + s.offset - frozen_floats_, s.spec.shape};
    const std::uint64_t stream = static_cast<std::uint64_t>(s.node) * 64 + s.index;
    const std::size_t n = s.spec.shape.elements();
    for (std::size_t begin = 0; begin < n; begin += chunk.size()) {
      const std::size_t end = std::min(n, begin + chunk.size());
      initialise(s.spec, chunk.data(), splitmix64(seed ^ splitmix64(stream)), begin, end);
      upload(Block::parameters, s.offset + begin, end - begin, chunk.data());
    }
  }
  zero_gradients();
  if (slots_) backend_.fill(flat(state_data_, trained_floats() * static_cast<std::size_t>(slots_)), 0.f);
  // Where each node's trained floats begin (those of the nodes after it where it has none).
  trained_before_.assign(grads_.size() + 1, trained_floats());
  for (std::size_t id = grads_.size(); id-- > 1;) {
    trained_before_[id] = trained_before_[id + 1];
    for (const Tensor& g : grads_[id])
      if (!g.empty()) trained_before_[id] = std::min(trained_before_[id], static_cast<std::size_t>(g.data - grads_data_));
  }
  trained_before_[0] = grads_.size() > 1 ? trained_before_[1] : 0;
}

std::size_t ParameterStore::trained_floats_before(int node) const {
  const auto id = static_cast<std::size_t>(std::clamp<long>(node, 0, static_cast<long>(trained_before_.size()) - 1));
  return trained_before_[id];
}

void ParameterStore::zero_gradients() {
  if (training_) backend_.fill(gradients(), 0.f);
}

Tensor ParameterStore::state_copy(int copy) const {
  if (copy < 0 || copy >= state_copies_)
    throw ConfigError("state copy " + std::to_string(copy) + " of a store that keeps " + std::to_string(state_copies_));
  return flat(params_data_ + total_floats_ + static_cast<std::size_t>(copy) * state_floats(), state_floats());
}

void ParameterStore::save_state(int copy) {
  if (!state_floats()) return;
  backend_.copy_or_add(running_state(), state_copy(copy), false);
}

void ParameterStore::restore_state(int copy) {
  if (!state_floats()) return;
  backend_.copy_or_add(state_copy(copy), running_state(), false);
}

memory::CategoryBytes ParameterStore::bytes() const {
  return block_sizes(total_floats_, trainable_floats_, trained_floats(), slots_, state_copies_);
}

std::vector<float> ParameterStore::download() const {
  std::vector<float> host(total_floats_);
  download(Block::parameters, 0, total_floats_, host.data());
  return host;
}

void ParameterStore::upload(const std::vector<float>& values) {
  if (values.size() != total_floats_)
    throw ConfigError("parameter upload: " + std::to_string(values.size()) + " values for " +
                      std::to_string(total_floats_) + " slots");
  upload(Block::parameters, 0, total_floats_, values.data());
}

std::size_t ParameterStore::floats(Block block) const {
  return block == Block::parameters ? total_floats_ : trained_floats() * static_cast<std::size_t>(slots_);
}

float* ParameterStore::block_data(Block block, std::size_t first, std::size_t count) const {
  if (first > floats(block) || count > floats(block) - first)
    throw ConfigError("parameter store: floats " + std::to_string(first) + " to " + std::to_string(first + count) +
                      " of a block of " + std::to_string(floats(block)));
  return (block == Block::parameters ? params_data_ : state_data_) + first;
}

void ParameterStore::download(Block block, std::size_t first, std::size_t count, float* host) const {
  float* data = block_data(block, first, count);
  if (count) backend_.copy_to_host(data, host, count * sizeof(float));
}

void ParameterStore::upload(Block block, std::size_t first, std::size_t count, const float* host) {
  float* data = block_data(block, first, count);
  if (count) backend_.copy_to_device(host, data, count * sizeof(float));
}

}  // namespace cnn
