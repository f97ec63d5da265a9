#include "engine/plan/detail/recompute_search.hpp"

#include <algorithm>
#include <optional>

#include "engine/plan/detail/recompute_sweep.hpp"

namespace cnn {
namespace {

std::size_t peak_of(const Network& net, const std::vector<std::vector<int>>& readers, const StepNeeds& needs,
                    const RecomputeSet& set) {
  const std::vector<std::size_t> live = live_bytes(net, readers, needs, schedule_step(net, readers, true, set));
  return *std::max_element(live.begin(), live.end());
}

// RecomputePolicy::cheap beyond kDescentLimit: every compatible move that frees bytes at the
// peak, where together they lower it.
RecomputeSet swept_cheap_set(const Network& net, const StepNeeds& needs, const CostModel& cost) {
  const std::vector<std::vector<int>> readers = net.value_readers();
  const StepSchedule base = schedule_step(net, readers, true, {});
  const std::vector<std::size_t> live = live_bytes(net, readers, needs, base);
  const auto top = std::max_element(live.begin(), live.end());
  const std::vector<RecomputeMove> moves =
      chainless_moves(net, needs, cost, base, true, static_cast<int>(top - live.begin()));
  RecomputeSet set = set_of_moves(net, moves, moves.size());
  if (moves.empty() || peak_of(net, readers, needs, set) >= *top) return RecomputeSet(set.size(), false);
  return set;
}

// RecomputePolicy::automatic beyond kDescentLimit: the fewest compatible moves, best first, whose
// plan fits `arena_cap` (found by bisection on their number); where even all do not fit, the
// smaller of the plans with all and with none. `none` is the plan without recomputation.
RecomputeChoice swept_least_within(const Network& net, const StepNeeds& needs, const CostModel& cost,
                                   std::size_t arena_cap, RecomputeChoice none) {
  const std::vector<std::vector<int>> readers = net.value_readers();
  const StepSchedule base = schedule_step(net, readers, true, {});
  const std::vector<RecomputeMove> moves = chainless_moves(net, needs, cost, base, false, -1);
  auto plan_with = [&](std::size_t count) {
    RecomputeSet set = set_of_moves(net, moves, count);
    StepPlan plan = plan_step(net, needs, set);
    const bool fits = plan.arena_bytes() <= arena_cap;
    return RecomputeChoice{std::move(set), std::move(plan), fits};
  };
  if (moves.empty()) return none;
  RecomputeChoice fitting = plan_with(moves.size());
  if (!fitting.fits) return fitting.plan.arena_bytes() < none.plan.arena_bytes() ? std::move(fitting) : std::move(none);
  std::size_t lo = 1, hi = moves.size();  // the plan with hi moves fits
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    // The liveness lower bound first: the offsets need at least that, and it is cheaper.
    if (peak_of(net, readers, needs, set_of_moves(net, moves, mid)) > arena_cap) {
      lo = mid + 1;
      continue;
    }
    RecomputeChoice c = plan_with(mid);
    if (c.fits) {
      hi = mid;
      fitting = std::move(c);
    } else {
      lo = mid + 1;
    }
  }
  return fitting;  // the plan with hi moves
}

struct Evaluated {
  RecomputeSet set;
  StepSchedule schedule;
  std::vector<std::size_t> live;  // bytes live by time step
  std::size_t peak = 0;
  int peak_time = 0;
  double seconds = 0;  // of the recomputations, per micro-batch
};

class Descent {
 public:
  Descent(const Network& net, const StepNeeds& needs, const CostModel& cost, bool cheap_only)
      : net_(net), readers_(net.value_readers()), needs_(needs), cost_(cost), cheap_only_(cheap_only),
        state_(evaluate(RecomputeSet(static_cast<std::size_t>(net.size()), false))), visited_{state_.set} {}

  // Moves until the peak is at most `target` bytes; false where no move lowers it that far.
  bool lower_peak_to(std::size_t target) {
    while (state_.peak > target)
      if (!move()) return false;
    return true;
  }
  const RecomputeSet& set() const { return state_.set; }

 private:
  Evaluated evaluate(RecomputeSet set) const {
    Evaluated e;
    e.schedule = schedule_step(net_, readers_, true, set);
    e.set = std::move(set);
    e.live = live_bytes(net_, readers_, needs_, e.schedule);
    const auto top = std::max_element(e.live.begin(), e.live.end());
    e.peak = *top;
    e.peak_time = static_cast<int>(top - e.live.begin());
    std::vector<int> recomputed;
    for (const StepOp& op : e.schedule.ops)
      if (op.kind == StepOpKind::recompute) recomputed.push_back(op.node);
    e.seconds = cost_.recompute_seconds(recomputed, needs_.micro_batch);
    return e;
  }

  bool allowed(int id) const {
    return can_recompute(net_, id) && (!cheap_only_ || net_.node(id).layer->cheap_to_recompute());
  }
  bool kept_after_loss(int v) const {
    return state_.schedule.kept_until[static_cast<std::size_t>(v)] > state_.schedule.loss_time;
  }

  // Does recomputing `id` free something at the peak: its output, or saved buffers it rewrites?
  bool frees_at_peak(int id) const {
    const StepSchedule& s = state_.schedule;
    const int t = state_.peak_time;
    const auto i = static_cast<std::size_t>(id);
    if (id <= t && t <= s.kept_until[i]) return true;
    return net_.node(id).layer->recompute_rewrites_saved() && id <= t && t <= s.backward_time[i];
  }

  // `id` and, recursively, the inputs it would otherwise keep alive in its place: outputs that
  // backward does not read themselves.
  void add_with_ancestors(int id, RecomputeSet& set) const {
    set[static_cast<std::size_t>(id)] = true;
    for (int in : net_.node(id).inputs) {
      const int v = net_.node(in).value;
      if (v == 0 || set[static_cast<std::size_t>(v)] || !allowed(v) || kept_after_loss(v)) continue;
      add_with_ancestors(v, set);
    }
  }

  // The time step in `e` of the operation that runs at time `t` now.
  int same_operation(const Evaluated& e, int t) const {
    const StepOp op = state_.schedule.ops[static_cast<std::size_t>(t)];
    for (int u = 0; u < e.schedule.time_steps(); ++u) {
      const StepOp other = e.schedule.ops[static_cast<std::size_t>(u)];
      if (other.kind == op.kind && other.node == op.node) return u;
    }
    return t;
  }

  // The best move at the peak: recompute one more output (with its ancestors), or keep one
  // recomputed output again, which frees more than it holds where its recomputation needs
  // temporary copies of its inputs live at the peak (a residual block's output recomputed for the
  // next block's addition needs the block before's). A move must lower the bytes live at the
  // peak's operation and raise no other time step above the peak; the best frees the most there
  // per second of recomputation it adds, and one that saves recomputation comes first.
  bool move() {
    double best_score = 0;
    std::optional<Evaluated> best;
    const std::size_t now = state_.live[static_cast<std::size_t>(state_.peak_time)];
    auto consider = [&](RecomputeSet set) {
      if (std::find(visited_.begin(), visited_.end(), set) != visited_.end()) return;
      Evaluated e = evaluate(std::move(set));
      const std::size_t then = e.live[static_cast<std::size_t>(same_operation(e, state_.peak_time))];
      if (e.peak > state_.peak || then >= now) return;
      const double added = e.seconds - state_.seconds;
      const double freed = static_cast<double>(now - then);
      const double score = added <= 0 ? freed * 1e30 : freed / added;
      if (score > best_score) {
        best_score = score;
        best = std::move(e);
      }
    };
    for (int id = 1; id < net_.size(); ++id) {
      const auto i = static_cast<std::size_t>(id);
      if (state_.set[i]) {
        if (!recomputed_at_peak(id)) continue;
        RecomputeSet set = state_.set;
        set[i] = false;
        consider(std::move(set));
      } else if (allowed(id) && frees_at_peak(id)) {
        RecomputeSet set = state_.set;
        add_with_ancestors(id, set);
        consider(std::move(set));
      }
    }
    if (!best) return false;
    state_ = std::move(*best);
    visited_.push_back(state_.set);
    return true;
  }

  // Is a recomputed copy of `id` (or of the saved buffers it rewrites) live at the peak?
  bool recomputed_at_peak(int id) const {
    const StepSchedule& s = state_.schedule;
    const int peak = state_.peak_time;
    for (int t = s.loss_time + 1; t <= peak; ++t) {
      const auto at = static_cast<std::size_t>(t);
      if (s.ops[at].kind == StepOpKind::recompute && s.ops[at].node == id &&
          (peak <= s.output_until[at] || peak <= s.saved_until[at]))
        return true;
    }
    return false;
  }

  const Network& net_;
  std::vector<std::vector<int>> readers_;
  const StepNeeds& needs_;
  const CostModel& cost_;
  bool cheap_only_;
  Evaluated state_;
  std::vector<RecomputeSet> visited_;  // no move returns to a set it left
};

// The descent adds what lowers the peak at the time; some of it the final set no longer needs.
// Keeps again, costliest first, each output whose recomputations the plan can do without.
RecomputeChoice prune(const Network& net, const StepNeeds& needs, const CostModel& cost, RecomputeChoice choice,
                      std::size_t arena_cap) {
  const std::vector<std::vector<int>> readers = net.value_readers();
  std::vector<std::pair<double, int>> costliest;  // seconds of all its recomputations, node
  for (int id : choice.plan.recomputed) {
    auto it = std::find_if(costliest.begin(), costliest.end(), [&](const auto& c) { return c.second == id; });
    if (it == costliest.end()) it = costliest.insert(costliest.end(), {0.0, id});
    it->first += cost.forward_seconds(id, needs.micro_batch);
  }
  std::sort(costliest.begin(), costliest.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [seconds, id] : costliest) {
    RecomputeSet set = choice.set;
    set[static_cast<std::size_t>(id)] = false;
    const std::vector<std::size_t> live = live_bytes(net, readers, needs, schedule_step(net, readers, true, set));
    if (*std::max_element(live.begin(), live.end()) > arena_cap) continue;  // the offsets need at least that
    StepPlan plan = plan_step(net, needs, set);
    if (plan.arena_bytes() > arena_cap) continue;
    choice = RecomputeChoice{std::move(set), std::move(plan), true};
  }
  return choice;
}

}  // namespace

RecomputeSet cheap_recompute_set(const Network& net, const StepNeeds& needs, const CostModel& cost) {
  if (net.size() > kDescentLimit) return swept_cheap_set(net, needs, cost);
  Descent descent(net, needs, cost, true);
  descent.lower_peak_to(0);
  return descent.set();
}

RecomputeChoice least_recompute_within(const Network& net, const StepNeeds& needs, const CostModel& cost,
                                       std::size_t arena_cap) {
  RecomputeChoice best{{}, plan_step(net, needs), false};
  if (best.plan.arena_bytes() <= arena_cap) {
    best.fits = true;
    return best;
  }
  if (net.size() > kDescentLimit) return swept_least_within(net, needs, cost, arena_cap, std::move(best));
  Descent descent(net, needs, cost, false);
  // The descent works on the liveness lower bound; the offsets need a little more. Each round
  // asks the lower bound for what the arena was over.
  std::size_t target = arena_cap;
  for (int round = 0; round < 8; ++round) {
    const bool reached = descent.lower_peak_to(target);
    StepPlan plan = plan_step(net, needs, descent.set());
    const std::size_t arena = plan.arena_bytes();
    if (arena <= arena_cap) return prune(net, needs, cost, RecomputeChoice{descent.set(), std::move(plan), true}, arena_cap);
    if (arena < best.plan.arena_bytes()) best = RecomputeChoice{descent.set(), std::move(plan), false};
    if (!reached || arena - arena_cap >= target) break;
    target -= arena - arena_cap;
  }
  return best;
}

}  // namespace cnn
