#include "engine/plan/detail/recompute_sweep.hpp"

#include <algorithm>

namespace cnn {
namespace {

// A move takes at most this many nodes: the forward-only ancestors of an output are a few layers
// (a BatchNorm, a dropout), and a bound keeps a long chain of them from making each move, and
// each of its recomputations, as long as the network.
constexpr std::size_t kMostNodesInAMove = 16;

struct Candidate {
  RecomputeMove nodes;     // the output first, then its forward-only ancestors
  std::vector<int> reads;  // the values its recomputations read that it does not recompute
  double score = 0;        // bytes freed per second of recomputation
};

class Sweep {
 public:
  Sweep(const Network& net, const StepNeeds& needs, const CostModel& cost, const StepSchedule& base, bool cheap_only)
      : net_(net), needs_(needs), cost_(cost), base_(base), cheap_only_(cheap_only) {}

  bool allowed(int id) const {
    return can_recompute(net_, id) && (!cheap_only_ || net_.node(id).layer->cheap_to_recompute());
  }
  bool kept_after_loss(int v) const { return base_.kept_until[static_cast<std::size_t>(v)] > base_.loss_time; }

  // What recomputing `id` frees over the step: its output where backward reads it, the saved
  // buffers it writes again (a dropout's mask). Only what is held across `at_time`, if >= 0.
  std::size_t freed(int id, int at_time) const {
    const auto i = static_cast<std::size_t>(id);
    const bool held = at_time < 0 || (id <= at_time && at_time <= base_.kept_until[i]);
    std::size_t bytes = 0;
    if (kept_after_loss(id) && held)
      bytes += net_.node(id).shape.elements() * static_cast<std::size_t>(needs_.micro_batch) * sizeof(float);
    if (net_.node(id).layer->recompute_rewrites_saved() &&
        (at_time < 0 || (id <= at_time && at_time <= base_.backward_time[i])))
      for (std::size_t b : needs_.saved_bytes[i]) bytes += b;
    return bytes;
  }

  // `id` and the ancestors it would otherwise keep alive in its place (outputs backward does not
  // read), as the descent's move; nothing where that takes more than kMostNodesInAMove nodes.
  bool gather(int id, Candidate& c) const {
    c.nodes = {id};
    for (std::size_t k = 0; k < c.nodes.size(); ++k)
      for (int in : net_.node(c.nodes[k]).inputs) {
        const int v = net_.node(in).value;
        if (std::find(c.nodes.begin(), c.nodes.end(), v) != c.nodes.end()) continue;
        if (v == 0 || !allowed(v) || kept_after_loss(v)) {
          if (std::find(c.reads.begin(), c.reads.end(), v) == c.reads.end()) c.reads.push_back(v);
          continue;
        }
        if (c.nodes.size() == kMostNodesInAMove) return false;
        c.nodes.push_back(v);
      }
    return true;
  }

  double seconds(const Candidate& c) const {
    double s = 0;
    for (int id : c.nodes) s += cost_.forward_seconds(id, needs_.micro_batch);
    return s;
  }

 private:
  const Network& net_;
  const StepNeeds& needs_;
  const CostModel& cost_;
  const StepSchedule& base_;
  bool cheap_only_;
};

}  // namespace

std::vector<RecomputeMove> chainless_moves(const Network& net, const StepNeeds& needs, const CostModel& cost,
                                           const StepSchedule& base, bool cheap_only, int at_time) {
  const Sweep sweep(net, needs, cost, base, cheap_only);
  std::vector<Candidate> candidates;
  for (int id = 1; id < net.size(); ++id) {
    if (!sweep.allowed(id)) continue;
    const std::size_t bytes = sweep.freed(id, at_time);
    if (bytes == 0) continue;
    Candidate c;
    if (!sweep.gather(id, c)) continue;
    const double seconds = sweep.seconds(c);
    c.score = seconds > 0 ? static_cast<double>(bytes) / seconds : static_cast<double>(bytes) * 1e30;
    candidates.push_back(std::move(c));
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.score > b.score; });

  // A move is compatible when none of its recomputations reads an output another move recomputes
  // for backward, and no move before it reads its output: no recomputation then needs a
  // temporary copy of another's.
  const auto n = static_cast<std::size_t>(net.size());
  std::vector<bool> recomputed_for_backward(n, false), read_by_recomputation(n, false);
  std::vector<RecomputeMove> moves;
  for (Candidate& c : candidates) {
    const auto output = static_cast<std::size_t>(c.nodes.front());
    if (read_by_recomputation[output]) continue;
    if (std::any_of(c.reads.begin(), c.reads.end(),
                    [&](int v) { return recomputed_for_backward[static_cast<std::size_t>(v)]; }))
      continue;
    recomputed_for_backward[output] = true;
    for (int v : c.reads) read_by_recomputation[static_cast<std::size_t>(v)] = true;
    moves.push_back(std::move(c.nodes));
  }
  return moves;
}

RecomputeSet set_of_moves(const Network& net, const std::vector<RecomputeMove>& moves, std::size_t count) {
  RecomputeSet set(static_cast<std::size_t>(net.size()), false);
  for (std::size_t m = 0; m < count && m < moves.size(); ++m)
    for (int id : moves[m]) set[static_cast<std::size_t>(id)] = true;
  return set;
}

}  // namespace cnn
