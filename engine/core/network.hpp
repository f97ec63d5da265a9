#pragma once
// A network is a graph of layers in the order they run. Node 0 is the input; every other node
// applies one layer to earlier nodes. The last node gives the output the loss reads, and the
// network holds which loss (its task: base/task.hpp), as a Keras model is compiled with one.
// Below, what evaluating a network gives.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cnnengine/base/task.hpp>
#include <cnnengine/engine/core/layer.hpp>
#include <cnnengine/engine/core/task_metrics.hpp>

namespace cnn {

struct Node {
  std::unique_ptr<Layer> layer;  // null for the input node
  std::vector<int> inputs;       // earlier node ids
  Shape shape;                   // per-sample output shape
  int value = 0;                 // the buffer that holds the output: its own id, or its input's for a view
  std::string name;
};

// How a network's frozen layers run forward while the rest trains (Network::set_frozen_mode).
enum class FrozenMode { eval, train };

class Network {
 public:
  explicit Network(Shape input_shape);  // per-sample {C,H,W}
  Network(Network&&) noexcept = default;
  Network& operator=(Network&&) noexcept = default;

  // Appends a layer reading `inputs` (default: the last node). Shapes are checked here:
  // a mismatch throws ShapeError naming the layer. Returns the new node's id.
  int add(std::unique_ptr<Layer> layer, std::vector<int> inputs = {});
  template <class L, class... Args>
  int emplace(Args&&... args) {
    return add(std::make_unique<L>(std::forward<Args>(args)...));
  }

  int size() const { return static_cast<int>(nodes_.size()); }
  int last() const { return size() - 1; }
  const Node& node(int id) const { return nodes_.at(static_cast<std::size_t>(id)); }
  Node& node(int id) { return nodes_.at(static_cast<std::size_t>(id)); }
  const Shape& input_shape() const { return nodes_.front().shape; }
  const Shape& output_shape() const { return nodes_.back().shape; }
  // The classes (classify, segment: the output's channels, multilabel) or the regression's
  // targets the output gives.
  int num_classes() const;

  // The task the network is trained for and its loss (classification by default). Checked by
  // check_loss() against the output, when a trainer or a predictor takes the network.
  void set_loss(LossOptions loss) { loss_ = std::move(loss); }
  const LossOptions& loss() const { return loss_; }
  Task task() const { return loss_.task; }
  // A ShapeError where the output does not suit the task (a segmentation's must be [K, H, W] at
  // the input's H x W), a ConfigError where the loss's options do not suit it
  // (check_loss_options).
  void check_loss() const;
  // The bytes of one sample's target (cnn::target_bytes of the task, classes and input size).
  std::size_t target_bytes() const;
  // For each node, the ids of the nodes that read its output through views (a Flatten's readers
  // read its input), in increasing order; empty for a view. One pass over the graph.
  std::vector<std::vector<int>> value_readers() const;

  // The fewest samples a training micro-batch may hold: the largest any layer needs, its reason
  // naming that layer and its input.
  TrainingBatchNeed training_batch_need() const;

  // One line per layer (shape and parameter count), then the trainable parameters and the forward
  // pass's multiply-adds a sample.
  std::string summary() const;
  // The multiply-adds of one sample's forward pass in the products (LayerCost::multiply_adds).
  double forward_multiply_adds() const;

  // Fine-tuning: nodes 1 to `through` are frozen, as PyTorch's requires_grad=False and eval() on
  // a backbone. Their parameters are not trained (no gradients, no optimizer state), they run
  // forward in inference mode (BatchNorm on its running statistics, dropout off), and backward
  // stops after them: no gradient flows into their outputs, and nothing is kept for their
  // backward. 0 freezes nothing. A ConfigError where `through` is not a node before the last or
  // leaves no parameter to train.
  void freeze_through(int through);
  int frozen_through() const { return frozen_through_; }
  bool frozen(int id) const { return id >= 1 && id <= frozen_through_; }
  // How the frozen layers run forward in a training step: `eval` as above, or `train` (PyTorch's
  // requires_grad=False without eval()): BatchNorm on the batch's statistics, updating its running
  // ones, and dropout dropping, still with no backward.
  void set_frozen_mode(FrozenMode mode) { frozen_mode_ = mode; }
  FrozenMode frozen_mode() const { return frozen_mode_; }
  // Whether node `id` runs forward in training mode in a training step.
  bool runs_in_training(int id) const { return !frozen(id) || frozen_mode_ == FrozenMode::train; }
  // Whether the value node `id`'s output has a gradient in a training step: not the network
  // input's, nor a frozen node's.
  bool has_gradient(int id) const { return id > frozen_through_; }
  // The head: the last node whose layer has parameters (0 where none has); the backbone is the
  // nodes before it.
  int head() const;

  // Rewrites ReLU -> max pooling into max pooling -> ReLU wherever the ReLU's output is read by
  // the pooling alone (any layer that says Layer::commutes_with_max_pooling, before one that says
  // Layer::is_max_pooling). Forward values and gradients are the same (ReLU is monotonic, and a
  // window whose maximum is not positive passes no gradient either way); the ReLU then runs on
  // a quarter of the elements and one full-size activation is gone. Returns the pairs swapped.
  int commute_relu_and_max_pool();

 private:
  std::vector<Node> nodes_;
  LossOptions loss_;
  int frozen_through_ = 0;
  FrozenMode frozen_mode_ = FrozenMode::eval;
};

// A network unfrozen while this lives (to plan it whole), frozen again as it was however the scope
// ends.
class UnfrozenWhile {
 public:
  explicit UnfrozenWhile(Network& network) : network_(network), through_(network.frozen_through()) {
    network_.freeze_through(0);
  }
  ~UnfrozenWhile() { network_.freeze_through(through_); }
  UnfrozenWhile(const UnfrozenWhile&) = delete;
  UnfrozenWhile& operator=(const UnfrozenWhile&) = delete;

 private:
  Network& network_;
  int through_;
};

// The mean loss and accuracy over the samples evaluated; a trainer and a predictor both give it.
// The accuracy is the task's (of the samples; of the pixels not ignored; of the labels at the
// threshold); a regression has none (0), and its mean absolute error is in scores.
struct EvalResult {
  double loss = 0, accuracy = 0;
  std::size_t samples = 0;
  TaskScores scores;  // the task's metrics; a classification's are ClassEvaluation's
};

// An evaluation with the confusion matrix: for each class, its precision (of the samples
// predicted as it, those that are), recall (of its samples, those predicted as it) and accuracy
// (of all samples, those it gets right as one against the rest).
struct ClassEvaluation : EvalResult {
  std::vector<std::vector<std::size_t>> confusion;  // [true class][predicted class]
  double precision(int c) const;
  double recall(int c) const;
  double class_accuracy(int c) const;
};

// Counts `samples` predictions into `confusion` (classes x classes): each row of `logits`
// (`classes` floats) predicts its largest, the first of equal ones, against its label.
void count_predictions(std::vector<std::vector<std::size_t>>& confusion, const float* logits,
                       const std::int32_t* labels, int samples);

}  // namespace cnn
