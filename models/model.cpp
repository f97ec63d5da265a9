#include <cnnengine/models/model.hpp>

#include <algorithm>
#include <cmath>

#include <cnnengine/base/error.hpp>
#include <cnnengine/data/dataset.hpp>
#include <cnnengine/engine/core/backend.hpp>

namespace cnn {
InferenceOptions inference_options(const ModelOptions& options, const memory::MemoryStack& stack,
                                   const Backend& backend) {
  if (options.max_batch <= 0)
    throw ConfigError("ModelOptions::max_batch must be positive, got " + std::to_string(options.max_batch));
  InferenceOptions o;
  o.max_batch = options.max_batch;
  o.account = stack.account();
  o.account.set_aside(backend.library_reserved_bytes(), 0);
  return o;
}

Model::Model(const std::filesystem::path& file, Backend& backend, ModelOptions options)
    : Model(file, read_checkpoint(file), backend, options) {}

Model::Model(const std::filesystem::path& file, const CheckpointInfo& info, Backend& backend, ModelOptions options)
    : description_(info.model),
      network_(checkpoint_network(info, file, static_cast<int>(info.model.class_names.size()))),
      own_stack_(std::make_unique<memory::MemoryStack>(
          backend.device_memory(), backend.staging_memory(),
          memory::MemoryOptions{.budget = options.memory_budget, .trace = {}})),
      predictor_(std::make_unique<Predictor>(network_, backend, *own_stack_,
                                             inference_options(options, *own_stack_, backend))) {
  load_parameters(file, network_, predictor_->parameters(), false);
}

Model::Model(const std::filesystem::path& file, const CheckpointInfo& info, Backend& backend,
             memory::MemoryStack& stack, ModelOptions options)
    : description_(info.model),
      network_(checkpoint_network(info, file, static_cast<int>(info.model.class_names.size()))),
      predictor_(std::make_unique<Predictor>(network_, backend, stack, inference_options(options, stack, backend))) {
  load_parameters(file, network_, predictor_->parameters(), false);
}

Model::~Model() = default;

std::string Model::class_name(int c) const {
  if (c >= 0 && static_cast<std::size_t>(c) < description_.class_names.size())
    return description_.class_names[static_cast<std::size_t>(c)];
  return std::to_string(c);
}

std::vector<float> Model::logits(const float* images, int count) {
  if (count < 0) throw ConfigError("Model::logits: " + std::to_string(count) + " images");
  std::vector<float> out(static_cast<std::size_t>(count) * network_.output_shape().elements());
  predictor_->logits(images, count, out.data());
  return out;
}

std::vector<float> Model::predictions(const float* images, int count) {
  std::vector<float> out = logits(images, count);
  switch (task()) {
    case Task::classify: softmax_rows(out, classes()); break;
    case Task::segment:
      softmax_channels(out, classes(), network_.output_shape().elements() / static_cast<std::size_t>(classes()));
      break;
    case Task::multilabel:
      for (float& x : out) x = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(x))));
      break;
    case Task::regress: break;
  }
  return out;
}

std::vector<float> Model::predict(const std::filesystem::path& image) {
  const std::vector<float> input = data::preprocess_image(image, description_.preprocessing);
  return predictions(input.data(), 1);
}

ClassEvaluation Model::evaluate(const NextBatch& next) { return predictor_->evaluate_classes(next); }

void softmax_channels(std::vector<float>& logits, int classes, std::size_t pixels) {
  if (classes <= 0 || pixels == 0)
    throw ConfigError("softmax_channels: " + std::to_string(classes) + " classes of " + std::to_string(pixels) + " pixels");
  const auto k = static_cast<std::size_t>(classes);
  for (std::size_t block = 0; block + k * pixels <= logits.size(); block += k * pixels)
    for (std::size_t p = 0; p < pixels; ++p) {
      float* x = logits.data() + block + p;
      float top = x[0];
      for (std::size_t c = 1; c < k; ++c) top = std::max(top, x[c * pixels]);
      double sum = 0;
      for (std::size_t c = 0; c < k; ++c) sum += std::exp(static_cast<double>(x[c * pixels] - top));
      for (std::size_t c = 0; c < k; ++c)
        x[c * pixels] = static_cast<float>(std::exp(static_cast<double>(x[c * pixels] - top)) / sum);
    }
}

void softmax_rows(std::vector<float>& logits, int classes) {
  if (classes <= 0) throw ConfigError("softmax_rows: rows of " + std::to_string(classes) + " classes");
  const auto k = static_cast<std::size_t>(classes);
  for (std::size_t row = 0; row + k <= logits.size(); row += k) {
    float* x = logits.data() + row;
    const float top = *std::max_element(x, x + k);
    double sum = 0;
    for (std::size_t c = 0; c < k; ++c) sum += std::exp(static_cast<double>(x[c] - top));
    for (std::size_t c = 0; c < k; ++c) x[c] = static_cast<float>(std::exp(static_cast<double>(x[c] - top)) / sum);
  }
}

}  // namespace cnn
