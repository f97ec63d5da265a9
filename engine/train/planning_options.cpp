#include "engine/train/planning_options.hpp"

#include <algorithm>

#include "engine/train/detail/replicas.hpp"
#include "engine/train/detail/trainer_slots.hpp"

namespace cnn {

AccountSetAside trainer_set_aside(const TrainerOptions& options, const Network& network, const Backend& backend) {
  AccountSetAside aside;
  aside.libraries = backend.library_reserved_bytes();
  if (options.communicator) aside.communication = Replicas::communication_bytes(options, network);
  return aside;
}

BatchPlanOptions planning_options(const TrainerOptions& options, const Network& network, const Backend& backend,
                                  const memory::BudgetAccount& account) {
  BatchPlanOptions planning;
  planning.batch = options.batch;
  planning.micro_batch = options.micro_batch;
  planning.accumulate = options.accumulate;
  planning.account = account;
  planning.strategy = options.memory_strategy;
  planning.workspace_limit = options.workspace_limit;
  planning.rewrite_graph = options.rewrite_graph;
  planning.recompute = options.recompute;
  planning.values = value_format(backend.precision());
  planning.narrow_values = options.narrow_values;
  planning.optimizer_slots = make_optimizer(options.optimizer)->state_slots();
  planning.extra_persistent = trainer_slots_bytes(network.loss());
  if (const Communicator* c = options.communicator) {
    // A rank plans for its share of the batch: the largest one (share_of_batch).
    planning.batch = std::max(1, share_of_batch(options.batch, 0, c->ranks()).size);
    if (options.accumulate > 0) {  // k micro-batches per step on every rank
      planning.micro_batch = (planning.batch + options.accumulate - 1) / options.accumulate;
      planning.accumulate = 0;
    }
    if (options.sync_batchnorm) planning.extra_persistent += Replicas::scratch_floats(network) * sizeof(float);
  }
  return planning;
}

BatchPlanOptions planning_options(const TrainerOptions& options, const Network& network, const Backend& backend) {
  const AccountSetAside aside = trainer_set_aside(options, network, backend);
  memory::BudgetAccount account(options.memory_budget);
  account.set_aside(aside.libraries, aside.communication);
  return planning_options(options, network, backend, account);
}

BatchPlanOptions planning_options(const TrainerOptions& options, const Network& network, const Backend& backend,
                                  const memory::MemoryStack& stack) {
  const TrainerOptions on_stack = with_memory_options(options, stack.options());
  // The account the stack settles to when a trainer is built on it now (MemoryStack::settle_account).
  const AccountSetAside aside = trainer_set_aside(on_stack, network, backend);
  memory::BudgetAccount account(on_stack.memory_budget);
  account.set_aside(aside.libraries, aside.communication);
  account.add_loader_staging(stack.account().loader_staging());
  return planning_options(on_stack, network, backend, account);
}

}  // namespace cnn
