#pragma once
// The CPU backend made to take values as they are stored, for tests of the step's 16-bit paths.
#include <vector>

#include "engine/core/forwarding_backend.hpp"

namespace cnn::testing {

// The CPU backend made to take values as they are stored (Note [Values as they are stored],
// backend.hpp): each call that may get 16-bit values alone widens them into floats of its own,
// runs the CPU's float call, and rounds an output that has 16-bit values into them, as the step
// does for a backend that does not take them; or, with `round_outputs` false, leaves them
// unwritten, as a backend that ignored them would. It counts the inputs it got as bits alone.
// Synchronised BatchNorm's calls are left out: these runs have one rank.
class StoredValuesCpu : public ForwardingBackend {
 public:
  StoredValuesCpu(Backend& cpu, bool round_outputs) : ForwardingBackend(cpu), round_outputs_(round_outputs) {}
  bool takes_packed_values() const override { return true; }
  int inputs_as_bits() const { return inputs_as_bits_; }

 protected:
  void do_conv2d_forward(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,
                         bool accumulate, Workspace ws) override {
    const Floats in = input(x);
    Floats out = output(y, accumulate);
    ForwardingBackend::do_conv2d_forward(d, in.t, w, bias, out.t, accumulate, ws);
    round_into(out, y);
  }
  void do_conv2d_backward_data(const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor dx, bool accumulate,
                               Workspace ws) override {
    ForwardingBackend::do_conv2d_backward_data(d, input(dy).t, w, dx, accumulate, ws);
  }
  void do_conv2d_backward_filter(const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor dw, Tensor dbias,
                                 Workspace ws) override {
    const Floats in = input(x), g = input(dy);
    ForwardingBackend::do_conv2d_backward_filter(d, in.t, g.t, dw, dbias, ws);
  }
  void do_relu_forward(const Tensor& x, Tensor y) override {
    const Floats in = input(x);
    Floats out = output(y, false);
    ForwardingBackend::do_relu_forward(in.t, out.t);
    round_into(out, y);
  }
  void do_relu_backward(const Tensor& y, const Tensor& dy, Tensor dx, bool accumulate) override {
    ForwardingBackend::do_relu_backward(input(y).t, dy, dx, accumulate);
  }
  void do_add(const Tensor& a, const Tensor& b, Tensor y) override {
    const Floats first = input(a), second = input(b);
    Floats out = output(y, false);
    ForwardingBackend::do_add(first.t, second.t, out.t);
    round_into(out, y);
  }
  void do_pool2d_forward(const Pool2dDesc& d, const Tensor& x, Tensor y) override {
    const Floats in = input(x);
    Floats out = output(y, false);
    ForwardingBackend::do_pool2d_forward(d, in.t, out.t);
    round_into(out, y);
  }
  void do_pool2d_backward(const Pool2dDesc& d, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor dx,
                          bool accumulate) override {
    const Floats in = input(x), out = input(y);
    ForwardingBackend::do_pool2d_backward(d, in.t, out.t, dy, dx, accumulate);
  }
  void do_batchnorm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                     Tensor running_mean, Tensor running_var, float momentum, float epsilon,
                                     Tensor saved_mean, Tensor saved_inv_std) override {
    const Floats in = input(x);
    Floats out = output(y, false);
    ForwardingBackend::do_batchnorm_forward_training(in.t, gamma, beta, out.t, running_mean, running_var, momentum,
                                                     epsilon, saved_mean, saved_inv_std);
    round_into(out, y);
  }
  void do_batchnorm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                      const Tensor& running_mean, const Tensor& running_var, float epsilon,
                                      Tensor y) override {
    const Floats in = input(x);
    Floats out = output(y, false);
    ForwardingBackend::do_batchnorm_forward_inference(in.t, gamma, beta, running_mean, running_var, epsilon, out.t);
    round_into(out, y);
  }
  void do_batchnorm_forward_saved(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& saved_mean,
                                  const Tensor& saved_inv_std, Tensor y) override {
    const Floats in = input(x);
    Floats out = output(y, false);
    ForwardingBackend::do_batchnorm_forward_saved(in.t, gamma, beta, saved_mean, saved_inv_std, out.t);
    round_into(out, y);
  }
  void do_batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& saved_mean,
                             const Tensor& saved_inv_std, float epsilon, Tensor dx, Tensor dgamma, Tensor dbeta,
                             bool accumulate) override {
    ForwardingBackend::do_batchnorm_backward(input(x).t, dy, gamma, saved_mean, saved_inv_std, epsilon, dx, dgamma,
                                             dbeta, accumulate);
  }

 private:
  // A tensor as the CPU's float calls take it; `floats` holds its values where it had none.
  struct Floats {
    Tensor t;
    std::vector<float> floats;
  };
  ValueFormat format() const { return value_format(precision()); }
  // An input: its floats where it has them, else its 16-bit values widened.
  Floats input(const Tensor& x) {
    Floats f{x, {}};
    f.t.packed16 = nullptr;
    if (x.data || !x.packed16) return f;
    f.floats.resize(x.elements());
    f.t.data = f.floats.data();
    from_16bit(x.packed16, f.t, format());
    ++inputs_as_bits_;
    return f;
  }
  // An output with 16-bit values: floats of its own, holding those values where the call adds to them.
  Floats output(const Tensor& y, bool accumulate) {
    Floats f{y, {}};
    f.t.packed16 = nullptr;
    if (!y.packed16) return f;
    f.floats.resize(y.elements());
    f.t.data = f.floats.data();
    if (accumulate) from_16bit(y.packed16, f.t, format());
    return f;
  }
  void round_into(const Floats& out, const Tensor& y) {
    if (y.packed16 && round_outputs_) to_16bit(out.t, y.packed16, format());
  }

  bool round_outputs_;
  int inputs_as_bits_ = 0;
};

}  // namespace cnn::testing
