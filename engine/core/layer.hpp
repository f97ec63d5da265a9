#pragma once
// A layer knows its shapes, its parameters, the memory it needs and how to run forward and
// backward through the Backend interface. It owns no memory: every tensor it touches is a view
// the engine hands it in a LayerContext. How it is written as network text and as ONNX nodes
// is its type's (layers/registry.hpp), which the engine never needs.
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/backend_types.hpp>
#include <cnnengine/engine/core/communicator.hpp>
#include <cnnengine/engine/core/tensor.hpp>

namespace cnn {

// How a parameter starts. fan_in_uniform, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), is PyTorch's default
// for both the weight and the bias of Conv2d, ConvTranspose2d and Linear (the weight's is
// kaiming_uniform_ with a = sqrt(5)), and so the built-in layers'.
enum class Init { he_normal, glorot_uniform, zeros, ones, fan_in_uniform };

struct ParamSpec {
  std::string name;      // "weight", "bias", "running_mean", ...
  Shape shape;
  Init init = Init::zeros;
  int fan_in = 1, fan_out = 1;
  bool trainable = true;  // false: state such as running statistics (no gradient, no optimizer)
};

// What one sample's forward pass costs: floating-point operations (a multiply-add counts two) and
// bytes read and written. The recomputation planner prices a layer's recomputation with it
// (the planner's cost model); an estimate, not a measurement. `multiply_adds` counts those of a
// layer's products alone (convolutions and dense layers, exactly): what torchvision's tables and
// most papers give as a network's "FLOPs".
struct LayerCost {
  double flops = 0;
  double bytes = 0;
  double multiply_adds = 0;
};

// The backend calls that run a ReLU after a layer in one pass with it (Layer::relu_after):
// BatchNorm's (Backend::fuses_batchnorm_relu) or the convolution's (Backend::fuses_conv_relu).
enum class ReluAfter { none, batchnorm, convolution };

struct TrainingBatchNeed {
  int samples = 1;
  std::string why;
};

// Synchronised BatchNorm in a data-parallel run: batch statistics over every rank's micro-batch
// (docs/design.md, "Data-parallel training").
struct CrossRankContext {
  Communicator* communicator = nullptr;
  Tensor scratch;  // device floats for a layer's sums: the most any asks (cross_rank_scratch_floats)
};

struct LayerContext {
  Backend* backend = nullptr;
  int batch = 0;
  bool training = true;
  const StepScalars* step = nullptr;    // device memory: the step's seed, first sample, gradient scale
  int node = 0;                         // the layer's place in the network, its own random stream
  std::span<const Tensor> inputs;       // batched inputs
  Tensor output;                        // batched output
  std::span<const Tensor> params;       // in parameters() order
  std::span<const Tensor> grads;        // one per parameter; empty views for non-trainable ones
  std::span<const Tensor> saved;        // in saved_floats() order; alive from forward to backward
  Workspace workspace;
  const CrossRankContext* cross_rank = nullptr;  // set for synchronised BatchNorm only
  // Backward only.
  Tensor grad_output;
  std::span<const Tensor> grad_inputs;  // empty view where no gradient is wanted
  std::span<const bool> accumulate;     // per input: add to grad_inputs[i] instead of writing it
};

class Layer {
 public:
  virtual ~Layer() = default;

  // The layer's type word ("conv2d", "maxpool2d", ..., or a layer of one's own's). Node names
  // ("3:conv2d"), ONNX value names and checkpoint fingerprints hold it, so it never changes.
  virtual std::string type_name() const = 0;
  virtual std::string describe() const = 0;
  // How many inputs the layer reads; 0: two or more (concatenation).
  virtual int input_count() const { return 1; }

  // Per-sample shapes ({C,H,W} or {features}). Called once when the network is built; the layer
  // keeps what it needs. Throws ShapeError naming the layer.
  virtual Shape output_shape(const std::vector<Shape>& inputs) = 0;
  virtual std::vector<ParamSpec> parameters() const { return {}; }

  // Memory beyond inputs and outputs, for a batch of `batch` samples.
  virtual std::vector<std::size_t> saved_floats(int /*batch*/) const { return {}; }
  virtual std::size_t workspace_bytes(Backend&, int /*batch*/, ConvPass, std::size_t /*limit*/) { return 0; }
  // Whether backward reads the inputs' (or the output's) values. The plan keeps only what is
  // read; with 16-bit values a layer's backward is given the others as shapes without data.
  virtual bool backward_needs_input() const { return false; }
  // True for a layer whose backward always writes its input's gradient (cuDNN's BatchNorm
  // backward has no form without it, and writing it over the output gradient in place is not
  // documented to work): where nothing wants that gradient, the plan gives a buffer to discard.
  virtual bool backward_writes_input_gradient() const { return false; }
  // The fewest samples a training micro-batch may hold, and why (empty when any number will do).
  virtual TrainingBatchNeed training_batch_need() const { return {}; }
  virtual bool backward_needs_output() const { return false; }
  // True for an element-wise layer of one input that may write its output over its input and,
  // in backward, its input's gradient over its output's gradient: the plan gives each pair one
  // buffer where nothing else needs the first (docs/design.md, "In place"). Its kernels must
  // allow both aliases, and its backward must not read its input.
  virtual bool runs_in_place() const { return false; }
  // True for a layer whose output is its input seen with another shape (Flatten): the engine
  // gives it no buffer and never calls forward or backward.
  virtual bool is_view() const { return false; }
  // True where forward, recompute and backward read every input and the output, and write the
  // output, only through backend calls that take values as they are stored (Note [Values as
  // they are stored], backend.hpp): on such a backend a step hands this layer its 16-bit values
  // alone, with no float copies, and stores nothing after it.
  virtual bool packed_values() const { return false; }

  virtual void forward(const LayerContext& context) = 0;
  virtual void backward(const LayerContext& context) = 0;

  // Recomputation (docs/design.md, "Recomputation"): the plan may drop a layer's output after
  // forward and have recompute() write it again during backward, from the same inputs.
  // True when recompute() gives forward's output to the bit (on the CPU) and changes no state.
  virtual bool recomputable() const { return false; }
  // Element-wise or normalisation: what RecomputePolicy::cheap recomputes.
  virtual bool cheap_to_recompute() const { return false; }
  // True when recompute() writes the saved buffers again (dropout's mask, drawn from its key)
  // instead of reading forward's (BatchNorm's batch statistics): then they need not be kept.
  virtual bool recompute_rewrites_saved() const { return false; }
  // Forward once more in training, during backward: the context is forward's, with the output and
  // the saved buffers the plan gives the recomputation. Never moves running statistics.
  virtual void recompute(const LayerContext& context) { forward(context); }
  virtual LayerCost forward_cost() const { return {}; }

  // Graph rewrites (Network::commute_relu_and_max_pool). True for an element-wise layer f of one
  // input, its output shaped as its input, that is non-decreasing (max f(window) = f(max window))
  // and flat wherever it gives two inputs one output (so the gradients agree either way): ReLU.
  virtual bool commutes_with_max_pooling() const { return false; }
  // True for max pooling: each output the largest value of a window of its input's channel.
  virtual bool is_max_pooling() const { return false; }

  // Notes [BatchNorm and ReLU in one pass] and [A convolution and its ReLU in one pass]
  // (step_plan.cpp): true for ReLU; and, for a layer that can run a ReLU over its output in its own
  // calls, the backend calls that do (ReluAfter). forward_then_relu writes max(forward, 0) as the
  // output; BatchNorm's backward_through_relu (in training) takes the ReLU's output as `c.output`
  // and the ReLU's output gradient as `c.grad_output` (which it may overwrite). A convolution runs
  // the ReLU's forward alone: the ReLU's backward stays a call of its own.
  virtual bool is_relu() const { return false; }
  virtual ReluAfter relu_after() const { return ReluAfter::none; }
  virtual void forward_then_relu(const LayerContext& context);
  virtual void backward_through_relu(const LayerContext& context);
  // Note [BatchNorm, add and ReLU in one pass] (step_plan.cpp): true for Add; a layer that runs a
  // ReLU after it also runs an add before that ReLU: forward_then_add_relu takes the add's other
  // input as `c.inputs[1]` and writes max(forward + it, 0); backward_through_add_relu takes the
  // ReLU's output and output gradient as backward_through_relu does, and the other input's
  // gradient and accumulate flag as `c.grad_inputs[1]` and `c.accumulate[1]`.
  virtual bool is_add() const { return false; }
  virtual void forward_then_add_relu(const LayerContext& context);
  virtual void backward_through_add_relu(const LayerContext& context);

  // Note [Channels-last images] (tensor.hpp): true where every call this layer makes takes
  // channels-last images on a backend that takes them (Backend::takes_channels_last), and reads
  // them as the images they are (a flattening of [C, 1, 1] does; of [C, H, W] would read the
  // pixels in another order). A training step whose layers all say so keeps its images between
  // layers channels last on such a backend (step_needs).
  virtual bool takes_channels_last() const { return false; }
  // True where its calls also take an NCHW input under a channels-last output (a convolution,
  // whose 16-bit copy of its input is reordered): it may read a network input that stays NCHW.
  virtual bool takes_nchw_input() const { return false; }
  // The order of the images the layer is handed, by input and for its output, told before its
  // workspace is asked for: a layer that keeps its shapes for those queries keeps the orders.
  virtual void use_orders(const std::vector<bool>& /*inputs_channels_last*/, bool /*output_channels_last*/) {}

  // Synchronised BatchNorm in a data-parallel run: the floats of CrossRankContext::scratch this
  // layer needs (0: it sums nothing over the ranks).
  virtual std::size_t cross_rank_scratch_floats() const { return 0; }
};

// The output length of a window (a convolution's kernel, a pooling's window: `window_name`)
// sliding over `length` with this stride and padding on both sides, counted in 64 bits: a
// ShapeError naming `layer` when the window does not fit or the output does not fit an int.
int sliding_output(const std::string& layer, const char* window_name, int length, int window, int stride,
                   int padding);

inline bool wants_gradient(const LayerContext& c, std::size_t input) {
  return input < c.grad_inputs.size() && !c.grad_inputs[input].empty();
}

}  // namespace cnn
