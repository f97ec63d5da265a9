#pragma once
// What a network is trained to do with an image, and how its loss is computed: the one word a
// data set, a trainer, a checkpoint and the command line agree on. It lives here, below both the
// data sets (data/) and the engine, which do not know each other.
//
// A task fixes the network's output and each sample's target:
//
// | task       | output        | target a sample                                   | loss                          |
// |------------|---------------|---------------------------------------------------|-------------------------------|
// | classify   | [K]           | one int32 class                                   | softmax cross-entropy         |
// | segment    | [K, H, W]     | a mask of H x W bytes: a class, or kIgnoreMask    | per-pixel softmax cross-entropy |
// | multilabel | [K]           | K floats, 0 or 1                                  | sigmoid binary cross-entropy  |
// | regress    | [T]           | T floats                                          | mean squared error or Huber   |
//
// H x W of a segmentation's output is the input image's: a mask has one value per pixel.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cnn {

enum class Task { classify, segment, multilabel, regress };

std::string to_string(Task task);
// "classify", "segment", "multilabel" or "regress"; anything else is a ConfigError listing them.
Task parse_task(std::string_view word);

// A mask pixel with this value is not a class: it counts in no loss and no metric (PyTorch's
// ignore_index, as segmentation data sets write it).
inline constexpr std::uint8_t kIgnoreMask = 255;
// A segmentation has at most this many classes: a mask's byte holds the class, and kIgnoreMask
// is not one.
inline constexpr int kMaxSegmentationClasses = 255;

enum class RegressionLoss { mse, huber };
std::string to_string(RegressionLoss loss);
// "mse" or "huber"; anything else is a ConfigError.
RegressionLoss parse_regression_loss(std::string_view word);

// How a task's loss is computed: what a user chooses beside the task. PyTorch's definitions:
// CrossEntropyLoss(label_smoothing), CrossEntropyLoss(weight, ignore_index=255),
// BCEWithLogitsLoss(pos_weight), MSELoss, HuberLoss(delta). Each sample's loss is the mean over
// its elements (its pixels not ignored, its labels, its targets), and a step's loss the mean over
// its samples, so that how a batch is cut into micro-batches or ranks changes nothing.
struct LossOptions {
  Task task = Task::classify;
  float label_smoothing = 0;            // classify: 0 <= it < 1
  std::vector<float> class_weights;     // segment: one per class, finite, >= 0; empty: all 1
  std::vector<float> positive_weights;  // multilabel: one per class, finite, > 0; empty: all 1
  RegressionLoss regression = RegressionLoss::mse;
  float huber_delta = 1;                // regress with huber: > 0
  // multilabel: a label is predicted where its probability is above this (0 < it < 1); also the
  // threshold of the metrics.
  float threshold = 0.5f;
};

// A ConfigError naming the option when `o` does not suit its task with `outputs` classes or
// targets (weights of another count, a smoothing out of range, an option of another task set).
void check_loss_options(const LossOptions& o, int outputs);

// The bytes of one sample's target: classify 4 (an int32), segment height x width (a byte a
// pixel), multilabel and regress `outputs` floats.
std::size_t target_bytes(Task task, int outputs, int height, int width);

}  // namespace cnn
