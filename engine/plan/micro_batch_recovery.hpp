#pragma once
// The one policy for the micro-batch a run holds under memory pressure, training and inference
// alike: built at the largest the plan allows or the largest smaller one the device gives (it
// may hold less than the plan: another process); after an out-of-memory failure inside a step,
// rebuilt recomputing more or at half the micro-batch; grown back after enough good steps (the
// pressure may have been transient). What it builds is the owner's: a MicroBatchMemory.
#include <functional>
#include <string>

#include <cnnengine/memory/out_of_memory.hpp>

namespace cnn {

// The memory of one micro-batch size, which the policy builds and rebuilds.
class MicroBatchMemory {
 public:
  virtual ~MicroBatchMemory() = default;
  // Plans micro-batch b and reserves its memory. On an out-of-memory failure holds nothing and
  // rethrows.
  virtual void build(int micro_batch) = 0;
  // After a failure at the micro-batch built: the same one again, recomputing more within the
  // bytes of half of it. False, holding nothing, where that cannot be had (inference has nothing
  // to recompute).
  virtual bool recompute_more() { return false; }
  // Built by recompute_more: beyond what the budget alone asks; and how many layers it recomputes.
  virtual bool recomputing_more() const { return false; }
  virtual int recomputed_layers() const { return 0; }
  // Gives everything back.
  virtual void release() = 0;
  // What a failure at b could not reserve, for its message ("cannot reserve the step memory even
  // at micro-batch 2"), and the plan's byte table at b.
  virtual std::string cannot_reserve(int micro_batch) const = 0;
  virtual std::string byte_table(int micro_batch) const = 0;
};

class MicroBatchRecovery {
 public:
  // target: the micro-batch the plan chose; smallest: the floor (1, or more for a layer's
  // training need); regrow_after: good steps before growing back (0: never). `log`, where set,
  // hears every change (it is read at each change: a caller may set it later).
  MicroBatchRecovery(MicroBatchMemory& memory, int target, int smallest, int regrow_after,
                     const std::function<void(const std::string&)>* log = nullptr);

  int micro_batch() const { return micro_batch_; }
  int target() const { return target_; }
  int smallest() const { return smallest_; }
  long good_steps() const { return good_steps_; }
  void set_good_steps(long steps) { good_steps_ = steps; }
  // From now on the micro-batch never grows back (synchronised BatchNorm: a rank alone cannot).
  void stop_regrowing() { regrow_after_ = 0; }

  // Builds b, or after each out-of-memory failure the same recomputing more, else half of it (not
  // below the smallest); returns the micro-batch built. At the smallest, throws OutOfMemory with
  // the byte table.
  int build_fitting(int micro_batch);
  // build_fitting at the micro-batch held (after a failure released the memory).
  void rebuild() { build_fitting(micro_batch_); }

  // After an out-of-memory failure in `where` ("step 12", for the log and the error): the memory
  // rebuilt at the same micro-batch recomputing more, else at half of it or less; at the
  // smallest, everything released and an OutOfMemory with the byte table.
  void shrink_after(const memory::OutOfMemory& error, const std::string& where);
  void step_succeeded() { ++good_steps_; }
  // Before step `next_step`: after enough good steps since the last failure, first back to the
  // recomputation the budget alone asks for, then to twice the micro-batch, up to the target.
  void maybe_regrow(long next_step);

 private:
  void report(const std::string& message) const;
  // True once, after enough good steps since the last failure, to try more memory again.
  bool regrow_due();

  MicroBatchMemory& memory_;
  int target_, smallest_, regrow_after_;
  const std::function<void(const std::string&)>* log_;
  int micro_batch_ = 0;
  long good_steps_ = 0;
};

}  // namespace cnn
