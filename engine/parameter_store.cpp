#include "engine/parameter_store.hpp"

#include <cmath>

#include "engine/counter_rng.hpp"
#include "memory/bytes.hpp"

namespace cnn {
namespace {

constexpr std::size_t kFloatAlignment = 16;  // 64 bytes between tensors

std::size_t padded(std::size_t floats) { return memory::align_up(floats, kFloatAlignment); }

void initialise(const ParamSpec& spec, float* out, std::uint64_t seed) {
  const std::size_t n = spec.shape.elements();
  switch (spec.init) {
    case Init::zeros: std::fill(out, out + n, 0.f); break;
    case Init::ones: std::fill(out, out + n, 1.f); break;
    case Init::he_normal: {
      const float stddev = std::sqrt(2.0f / static_cast<float>(spec.fan_in));
      for (std::size_t i = 0; i < n; ++i) {  // Box-Muller on counter-based uniforms
        const float u1 = std::max(uniform01(seed, 2 * i), 1e-7f), u2 = uniform01(seed, 2 * i + 1);
        out[i] = stddev * std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
      }
      break;
    }
    case Init::glorot_uniform: {
      const float limit = std::sqrt(6.0f / static_cast<float>(spec.fan_in + spec.fan_out));
      for (std::size_t i = 0; i < n; ++i) out[i] = limit * (2.0f * uniform01(seed, i) - 1.0f);
      break;
    }
  }
}

}  // namespace

ParameterStore::ParameterStore(const Network& network, Backend& backend, memory::MemoryResource& resource,
                               int optimizer_slots, std::uint64_t seed)
    : backend_(backend), resource_(resource), slots_(optimizer_slots) {
  // Layout: trainable tensors first (they share offsets with the gradient block), state after.
  struct Slot { int node; std::size_t index; ParamSpec spec; std::size_t offset; };
  std::vector<Slot> slots;
  for (int pass = 0; pass < 2; ++pass)
    for (int id = 1; id < network.size(); ++id) {
      const auto specs = network.node(id).layer->parameters();
      for (std::size_t k = 0; k < specs.size(); ++k) {
        if (specs[k].trainable != (pass == 0)) continue;
        slots.push_back({id, k, specs[k], total_floats_});
        total_floats_ += padded(specs[k].shape.elements());
        if (pass == 0) trainable_count_ += specs[k].shape.elements();
      }
      if (pass == 0) trainable_floats_ = total_floats_;
    }

  using memory::Category;
  params_block_ = static_cast<float*>(resource_.allocate(std::max<std::size_t>(total_floats_, 1) * sizeof(float),
                                                         memory::kDefaultAlignment, Category::parameters));
  try {
    grads_block_ = static_cast<float*>(resource_.allocate(std::max<std::size_t>(trainable_floats_, 1) * sizeof(float),
                                                          memory::kDefaultAlignment, Category::parameter_gradients));
    state_block_ = static_cast<float*>(resource_.allocate(
        std::max<std::size_t>(trainable_floats_ * static_cast<std::size_t>(slots_), 1) * sizeof(float),
        memory::kDefaultAlignment, Category::optimizer_state));
  } catch (...) {
    if (grads_block_) resource_.deallocate(grads_block_, std::max<std::size_t>(trainable_floats_, 1) * sizeof(float),
                                           memory::kDefaultAlignment, Category::parameter_gradients);
    resource_.deallocate(params_block_, std::max<std::size_t>(total_floats_, 1) * sizeof(float),
                         memory::kDefaultAlignment, Category::parameters);
    throw;
  }

  params_.resize(static_cast<std::size_t>(network.size()));
  grads_.resize(static_cast<std::size_t>(network.size()));
  for (int id = 1; id < network.size(); ++id) {
    const auto count = network.node(id).layer->parameters().size();
    params_[static_cast<std::size_t>(id)].resize(count);
    grads_[static_cast<std::size_t>(id)].resize(count);
  }
  std::vector<float> host(total_floats_, 0.f);
  for (const Slot& s : slots) {
    params_[static_cast<std::size_t>(s.node)][s.index] = Tensor{params_block_ + s.offset, s.spec.shape};
    if (s.spec.trainable) grads_[static_cast<std::size_t>(s.node)][s.index] = Tensor{grads_block_ + s.offset, s.spec.shape};
    initialise(s.spec, host.data() + s.offset, splitmix64(seed ^ splitmix64(static_cast<std::uint64_t>(s.node) * 64 + s.index)));
  }
  upload(host);
  zero_gradients();
  backend_.fill(flat(state_block_, trainable_floats_ * static_cast<std::size_t>(slots_)), 0.f);
}

ParameterStore::~ParameterStore() {
  using memory::Category;
  resource_.deallocate(state_block_, std::max<std::size_t>(trainable_floats_ * static_cast<std::size_t>(slots_), 1) * sizeof(float),
                       memory::kDefaultAlignment, Category::optimizer_state);
  resource_.deallocate(grads_block_, std::max<std::size_t>(trainable_floats_, 1) * sizeof(float),
                       memory::kDefaultAlignment, Category::parameter_gradients);
  resource_.deallocate(params_block_, std::max<std::size_t>(total_floats_, 1) * sizeof(float),
                       memory::kDefaultAlignment, Category::parameters);
}

void ParameterStore::zero_gradients() { backend_.fill(gradients(), 0.f); }

memory::CategoryBytes ParameterStore::bytes() const {
  memory::CategoryBytes b;
  b[memory::Category::parameters] = total_floats_ * sizeof(float);
  b[memory::Category::parameter_gradients] = trainable_floats_ * sizeof(float);
  b[memory::Category::optimizer_state] = trainable_floats_ * static_cast<std::size_t>(slots_) * sizeof(float);
  return b;
}

std::vector<float> ParameterStore::download() const {
  std::vector<float> host(total_floats_);
  backend_.copy_to_host(params_block_, host.data(), total_floats_ * sizeof(float));
  return host;
}

void ParameterStore::upload(const std::vector<float>& values) {
  if (values.size() != total_floats_)
    throw std::invalid_argument("parameter upload: " + std::to_string(values.size()) + " values for " +
                                std::to_string(total_floats_) + " slots");
  backend_.copy_to_device(values.data(), params_block_, total_floats_ * sizeof(float));
}

}  // namespace cnn
