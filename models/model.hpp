#pragma once
// A saved model ready to use, without knowing its architecture in advance: the network is read
// from the checkpoint and built on a backend, its parameters and BatchNorm statistics loaded,
// and an image file goes through the preprocessing the file recorded. It runs on a Predictor:
// forward only, its own plan, no gradients nor optimizer state.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <cnnengine/engine/infer/predictor.hpp>
#include <cnnengine/models/checkpoint.hpp>

namespace cnn {

struct ModelOptions {
  int max_batch = 256;            // images one call takes at most at once
  std::size_t memory_budget = 0;  // 0: none; a model on a stack of the caller's takes the stack's
};

class Model {
 public:
  // Throws CheckpointError naming the file when it holds no network (weights of version 1) or
  // does not read; a budget that cannot hold the forward pass of one image is a BudgetTooSmall.
  Model(const std::filesystem::path& file, Backend& backend, ModelOptions options = {});
  // From the file's checkpoint already read (read_checkpoint(file)), so that what it describes
  // (the input shape, the preprocessing) can size a loader before the model is planned.
  Model(const std::filesystem::path& file, const CheckpointInfo& info, Backend& backend, ModelOptions options = {});
  // On a stack the caller built (memory_stack_for) under its budget, with the loaders that will
  // feed the model booked on it first (data::Loader::book): the plan leaves them room.
  Model(const std::filesystem::path& file, const CheckpointInfo& info, Backend& backend, memory::MemoryStack& stack,
        ModelOptions options = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelDescription& description() const { return description_; }
  const Network& network() const { return network_; }
  int classes() const { return network_.num_classes(); }
  // The class's saved name, or its number where none was saved.
  std::string class_name(int c) const;

  Task task() const { return network_.task(); }

  // For `count` images already preprocessed (host floats, NCHW of the input shape): count x the
  // output's elements floats, the network's outputs, or what the task makes of them
  // (predictions): a classification's softmax, a segmentation's softmax over the classes at each
  // pixel ([K, H, W] an image), a multi-label's sigmoid of each class, a regression's values as
  // they are.
  std::vector<float> logits(const float* images, int count);
  std::vector<float> predictions(const float* images, int count);
  // One image file, preprocessed as recorded (data::preprocess_image): its predictions.
  std::vector<float> predict(const std::filesystem::path& image);
  // The same for a classification: its class probabilities.
  std::vector<float> probabilities(const float* images, int count) { return predictions(images, count); }
  std::vector<float> classify(const std::filesystem::path& image) { return predict(image); }
  // The mean loss, the task's accuracy and scores, and a classification's confusion matrix.
  ClassEvaluation evaluate(const NextBatch& next);

  ParameterStore& parameters() { return predictor_->parameters(); }
  // The inference plan reserved (bytes by category), its micro-batch (the largest that fits the
  // budget, at most max_batch), and the memory stack a loader stages from.
  const MemoryBreakdown& memory() const { return predictor_->memory(); }
  int micro_batch() const { return predictor_->micro_batch(); }
  memory::MemoryStack& memory_stack() { return predictor_->memory_stack(); }

 private:
  ModelDescription description_;
  Network network_;
  std::unique_ptr<memory::MemoryStack> own_stack_;  // unless the caller gave one
  std::unique_ptr<Predictor> predictor_;
};

// What a Model with these options plans with: train_images --plan asks it too.
// The stack's account (its budget, the loaders staged or booked on it) with the backend's
// libraries set aside. Throws ConfigError for a max_batch below one.
InferenceOptions inference_options(const ModelOptions& options, const memory::MemoryStack& stack,
                                   const Backend& backend);

// Softmax of each row of `logits` (rows of `classes` values), in place.
void softmax_rows(std::vector<float>& logits, int classes);
// Softmax over the `classes` channels at each of the `pixels` places of each [classes, pixels]
// block of `logits`, in place.
void softmax_channels(std::vector<float>& logits, int classes, std::size_t pixels);

}  // namespace cnn
