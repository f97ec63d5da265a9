#include "largest_batch.hpp"

#include "engine/plan/detail/largest_fitting.hpp"
#include "workloads.hpp"

namespace alloc_compare {

namespace {

bool fits(Workbench& bench, cnn::memory::Strategy strategy, const BatchSearch& search, int batch) {
  ChurnSpec spec;
  spec.workload = "search";
  spec.batch = batch;
  spec.steps = search.steps;
  spec.fixed_batch = search.fixed_batch;
  spec.budget = search.budget;
  spec.stop_at_first_oom = true;
  const Summary s = summarize(run_churn(bench, strategy, spec));
  return s.completed && s.out_of_memory == 0;
}

}  // namespace

Confirmation confirm_by_running(Workbench& bench, cnn::memory::Strategy strategy, const BatchSearch& search, int batch) {
  Confirmation c;
  c.fits = batch > 0 && fits(bench, strategy, search, batch);
  c.next_refused = batch >= search.limit || !fits(bench, strategy, search, batch + 1);
  return c;
}

int largest_batch(Workbench& bench, cnn::memory::Strategy strategy, const BatchSearch& search) {
  if (strategy == cnn::memory::Strategy::planned)  // the plans a batch of each size runs as one micro-batch
    return cnn::largest_fitting_micro_batch(
        1, search.limit, [&](int batch) { return bench.breakdown(batch, search.budget).fits(); });
  if (!fits(bench, strategy, search, 1)) return 0;
  int low = 1, high = search.limit;
  while (low < high) {
    const int mid = low + (high - low + 1) / 2;
    if (fits(bench, strategy, search, mid)) low = mid;
    else high = mid - 1;
  }
  return low;
}

}  // namespace alloc_compare
