#pragma once
// The micro-batch a trainer runs at after an out-of-memory failure inside a step, and when it
// tries the larger one again (the pressure may have been transient: another process, a library's
// own request).
namespace cnn {

class Recovery {
 public:
  // target: the micro-batch the budget allows; smallest: the floor (1, or more for a layer's
  // training need); regrow_after: good steps before growing back (0: never).
  Recovery(int target, int smallest, int regrow_after);

  int smallest() const { return smallest_; }
  int target() const { return target_; }
  long good_steps() const { return good_steps_; }
  void set_good_steps(long steps) { good_steps_ = steps; }
  // The micro-batch to replay at after a failure at b: half of it, not below the smallest; 0
  // when b is the smallest already (nothing left to halve).
  int after_failure(int micro_batch);
  // A failure met by recomputing more at the same micro-batch: the count of good steps restarts.
  void failed_and_recomputed() { good_steps_ = 0; }
  void step_succeeded() { ++good_steps_; }
  // True once, after enough good steps since the last failure, to try more memory again.
  bool regrow_due();
  // The micro-batch to try now, after enough good steps since the last failure: twice b, up to
  // the target; 0 while it is not time (or b is the target).
  int regrow(int micro_batch);

 private:
  int target_, smallest_, regrow_after_;
  long good_steps_ = 0;
};

}  // namespace cnn
