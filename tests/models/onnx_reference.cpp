// The C++ half of onnx_export_matches_onnxruntime (onnx_runtime_check.sh): trains a network a
// few steps on Fashion-MNIST (so BatchNorm's running statistics are not their initial values),
// exports it to ONNX as a model of TASK, and writes our outputs for the first COUNT test images,
// as check_onnx.py expects them: float32, COUNT x the output's elements (classes; segment:
// classes x H x W), sample by sample.
//
//   cnn_onnx_reference FASHION_MNIST_DIR MODEL OUT_PREFIX COUNT [TASK CLASSES]
//
// MODEL is a preset or a network text file, built for CLASSES outputs (default: the data set's
// classes); TASK is classify (the default), segment, multilabel or regress. Writes
// OUT_PREFIX.onnx and OUT_PREFIX.logits.
//
// Whatever the task, the network is trained as a classification of its whole output (a label
// taken modulo the output's elements): the check needs BatchNorm statistics that moved and
// parameters that are not their initial values, not a good model, and the task changes only
// what the export puts after the network's last layer.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/cnnengine.hpp>
#include <cnnengine/models/onnx_export.hpp>

namespace {

using namespace cnn;

// Fashion-MNIST's pixel mean and standard deviation over its training images: the model's
// normalisation, which the exported file records and check_onnx.py applies.
constexpr float kMean = 0.2860f, kStd = 0.3530f;
constexpr int kTrainSteps = 12, kTrainBatch = 32;

// The CPU backend, keeping the logits of every inference micro-batch in the order they run.
class LogitsRecorder final : public CpuBackend {
 public:
  using CpuBackend::CpuBackend;
  void do_softmax_cross_entropy(const Tensor& logits, const IntTensor& labels, float label_smoothing, Tensor dlogits,
                                const StepScalars* step, Tensor loss_sum, Tensor correct) override {
    if (dlogits.empty()) recorded.insert(recorded.end(), logits.data, logits.data + logits.elements());
    CpuBackend::do_softmax_cross_entropy(logits, labels, label_smoothing, dlogits, step, loss_sum, correct);
  }
  std::vector<float> recorded;
};

struct Samples {
  std::vector<float> images;
  std::vector<std::int32_t> labels;
};

// The first `count` samples of `data`, normalised as the model says.
Samples first_samples(const data::Dataset& data, int count) {
  const std::size_t floats = data.shape().elements();
  Samples s;
  s.images.resize(static_cast<std::size_t>(count) * floats);
  for (int i = 0; i < count; ++i) {
    float* image = s.images.data() + static_cast<std::size_t>(i) * floats;
    s.labels.push_back(data.load(static_cast<std::size_t>(i), image));
    for (std::size_t k = 0; k < floats; ++k) image[k] = (image[k] - kMean) / kStd;
  }
  return s;
}

// Whether every BatchNorm's running mean has moved from its initial zeros.
bool batchnorm_statistics_moved(const Network& network, const ParameterStore& params) {
  for (int id = 1; id < network.size(); ++id) {
    if (network.node(id).layer->type_name() != "batchnorm2d") continue;
    const Tensor& mean = params.params(id)[2];
    std::vector<float> host(mean.elements());
    const auto first = static_cast<std::size_t>(mean.data - params.trainable().data);
    params.download(ParameterStore::Block::parameters, first, host.size(), host.data());
    bool moved = false;
    for (float v : host) moved = moved || v != 0.f;
    if (!moved) return false;
  }
  return true;
}

// The names the export records: the data set's classes where the model has as many, else numbered.
std::vector<std::string> output_names(const data::Dataset& data, Task task, int classes) {
  if (task != Task::regress && classes == data.num_classes()) return data.class_names();
  std::vector<std::string> names;
  for (int i = 0; i < classes; ++i) names.push_back((task == Task::regress ? "target " : "class ") + std::to_string(i));
  return names;
}

int run(const std::string& data_dir, const std::string& model, const std::string& prefix, int count, Task task,
        int classes) {
  const data::DatasetSplits splits = data::open_dataset(data_dir);
  const data::SampleShape shape = splits.train->shape();
  const Shape input{shape.channels, shape.height, shape.width};
  if (classes == 0) classes = splits.train->num_classes();
  Network network = make_network(model, input, classes);
  const auto outputs = static_cast<std::int32_t>(network.output_shape().elements());

  LogitsRecorder backend(2);
  TrainerOptions options;
  options.batch = kTrainBatch;
  Trainer trainer(network, backend, options);
  Samples train = first_samples(*splits.train, kTrainSteps * kTrainBatch);
  for (std::int32_t& label : train.labels) label %= outputs;
  const std::size_t floats = input.elements();
  for (int step = 0; step < kTrainSteps; ++step) {
    const std::size_t first = static_cast<std::size_t>(step) * kTrainBatch;
    trainer.train_step(Batch{train.images.data() + first * floats, train.labels.data() + first, kTrainBatch});
  }
  if (!batchnorm_statistics_moved(network, trainer.parameters())) {
    std::fprintf(stderr, "a BatchNorm's running statistics are still their initial values after training\n");
    return 1;
  }

  ModelDescription description = describe_model(network);
  description.loss.task = task;
  description.class_names = output_names(*splits.train, task, classes);
  description.preprocessing.normalization.mean = {kMean};
  description.preprocessing.normalization.stddev = {kStd};
  export_onnx(prefix + ".onnx", network, trainer.parameters(), description);
  OnnxExportOptions fp16;
  fp16.fp16 = true;
  export_onnx(prefix + ".fp16.onnx", network, trainer.parameters(), description, fp16);

  Samples test = first_samples(*splits.test, count);
  for (std::int32_t& label : test.labels) label %= outputs;
  bool given = false;
  trainer.evaluate([&]() -> std::optional<Batch> {
    if (given) return std::nullopt;
    given = true;
    return Batch{test.images.data(), test.labels.data(), count};
  });
  if (backend.recorded.size() != static_cast<std::size_t>(count) * static_cast<std::size_t>(outputs)) {
    std::fprintf(stderr, "recorded %zu outputs for %d images of %d\n", backend.recorded.size(), count, outputs);
    return 1;
  }
  std::ofstream out(prefix + ".logits", std::ios::binary);
  out.write(reinterpret_cast<const char*>(backend.recorded.data()),
            static_cast<std::streamsize>(backend.recorded.size() * sizeof(float)));
  if (!out.flush()) {
    std::fprintf(stderr, "cannot write %s.logits\n", prefix.c_str());
    return 1;
  }
  std::printf("%s: trained %d steps, exported %s.onnx (%s), outputs of %d test images in %s.logits\n", model.c_str(),
              kTrainSteps, prefix.c_str(), to_string(task).c_str(), count, prefix.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5 && argc != 7) {
    std::fprintf(stderr, "usage: %s FASHION_MNIST_DIR MODEL OUT_PREFIX COUNT [TASK CLASSES]\n", argv[0]);
    return 2;
  }
  try {
    const Task task = argc == 7 ? parse_task(argv[5]) : Task::classify;
    const int classes = argc == 7 ? std::stoi(argv[6]) : 0;
    return run(argv[1], argv[2], argv[3], std::stoi(argv[4]), task, classes);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
