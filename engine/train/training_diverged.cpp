#include <cnnengine/engine/train/training_diverged.hpp>

namespace cnn {
namespace {

// What to try about a loss that is not finite. At the first step nothing has been applied: the
// learning rate cannot be the cause, the inputs or the starting weights are.
std::string divergence_advice(long step, Precision precision) {
  const bool first = step <= 1;
  if (precision == Precision::fp16)
    return std::string(" (half holds values up to 65504: a value between layers or a product's operand beyond that "
                       "is infinite; try bf16, which has float's range, ") +
           (first ? "or inputs on a smaller scale)" : "inputs on a smaller scale, or a smaller learning rate)");
  if (first)
    return " (at the first step, before any update: not the learning rate; the inputs or the starting weights give "
           "it: check the data's values and its normalisation)";
  return " (try a smaller learning rate)";
}

}  // namespace

TrainingDiverged::TrainingDiverged(long step, double loss, Precision precision)
    : TrainingDiverged(step, loss,
                       "training diverged at step " + std::to_string(step) +
                           (precision == Precision::fp16 ? " in fp16" : "") + ": the loss is " + std::to_string(loss) +
                           divergence_advice(step, precision) + "; the step was not applied") {}

TrainingDiverged::TrainingDiverged(const TrainingDiverged& diverged, const std::string& more)
    : TrainingDiverged(diverged.step(), diverged.loss(), diverged.what() + more) {}

TrainingDiverged::TrainingDiverged(long step, double loss, const std::string& message)
    : Error(message), step_(step), loss_(loss) {}

LossScaleAtFloor::LossScaleAtFloor(long step, double loss, float floor)
    : TrainingDiverged(step, loss,
                       "training diverged at step " + std::to_string(step) +
                           " in fp16: its gradients are NaN or infinite at the loss scale's floor (" +
                           std::to_string(floor) + "), the loss " + std::to_string(loss) +
                           " (try a smaller learning rate, or bf16, which has float's range); the step was not "
                           "applied") {}

}  // namespace cnn
