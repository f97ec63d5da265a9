#include "resource_stacks.hpp"

#include "memory/arena_resource.hpp"
#include "memory/budget_adaptor.hpp"
#include "memory/direct_resource.hpp"
#include "memory/fault_injection_adaptor.hpp"
#include "memory/host_resource.hpp"
#include "memory/pool_resource.hpp"
#include "memory/statistics_adaptor.hpp"
#include "memory/trace_adaptor.hpp"
#include "page_offset_upstream.hpp"

namespace cnn::memory::test {
namespace {

// Pushes the named strategy over host memory.
void push_strategy(ResourceStack& stack, const std::string& strategy) {
  MemoryResource& host = host_resource();
  if (strategy == "direct") stack.push<DirectResource>(host);
  else if (strategy == "pool") stack.push<PoolResource>(host);
  else if (strategy == "small-chunk pool")
    stack.push<PoolResource>(host, PoolOptions{64 * 1024, 8 * 1024, 256 * 1024});
  else stack.push<ArenaResource>(host, kStackArenaCapacity);
}

}  // namespace

std::vector<StackFactory> all_stacks() {
  std::vector<StackFactory> stacks;
  for (const std::string strategy : {"direct", "pool", "small-chunk pool", "arena"}) {
    stacks.push_back([=] {
      auto s = std::make_unique<ResourceStack>(strategy);
      push_strategy(*s, strategy);
      return s;
    });
    stacks.push_back([=] {
      auto s = std::make_unique<ResourceStack>("statistics over " + strategy);
      push_strategy(*s, strategy);
      s->push<StatisticsAdaptor>(s->below());
      return s;
    });
    stacks.push_back([=] {
      auto s = std::make_unique<ResourceStack>("budget over " + strategy);
      push_strategy(*s, strategy);
      s->push<BudgetAdaptor>(s->below(), std::size_t{48} << 20);
      return s;
    });
    stacks.push_back([=] {
      auto s = std::make_unique<ResourceStack>("trace over " + strategy);
      push_strategy(*s, strategy);
      s->push<TraceAdaptor>(s->below(), static_cast<std::ostream&>(s->trace_stream()));
      return s;
    });
    stacks.push_back([=] {
      auto s = std::make_unique<ResourceStack>("fault injection (unarmed) over " + strategy);
      push_strategy(*s, strategy);
      s->push<FaultInjectionAdaptor>(s->below());
      return s;
    });
    stacks.push_back([=] {
      auto s = std::make_unique<ResourceStack>("statistics/budget/trace/faults over " + strategy);
      push_strategy(*s, strategy);
      s->push<FaultInjectionAdaptor>(s->below());
      s->push<TraceAdaptor>(s->below(), static_cast<std::ostream&>(s->trace_stream()));
      s->push<BudgetAdaptor>(s->below(), std::size_t{48} << 20);
      s->push<StatisticsAdaptor>(s->below());
      return s;
    });
  }
  // A strategy over an adaptor over the host: the adaptor sees the strategy's upstream calls.
  stacks.push_back([] {
    auto s = std::make_unique<ResourceStack>("pool over statistics over host");
    s->push<StatisticsAdaptor>(host_resource());
    s->push<PoolResource>(s->below());
    return s;
  });
  // Upstreams that align to 256 and no more, like cudaMalloc: larger alignments are padding.
  stacks.push_back([] {
    auto s = std::make_unique<ResourceStack>("pool over a 256-aligned upstream");
    s->push<PageOffsetUpstream>(256);
    s->push<PoolResource>(s->below());
    return s;
  });
  stacks.push_back([] {
    auto s = std::make_unique<ResourceStack>("arena over a 256-aligned upstream");
    s->push<PageOffsetUpstream>(768);
    s->push<ArenaResource>(s->below(), kStackArenaCapacity);
    return s;
  });
  stacks.push_back([] {
    auto s = std::make_unique<ResourceStack>("arena over budget over host");
    s->push<BudgetAdaptor>(host_resource(), kStackArenaCapacity);
    s->push<ArenaResource>(s->below(), kStackArenaCapacity);
    return s;
  });
  return stacks;
}

}  // namespace cnn::memory::test
