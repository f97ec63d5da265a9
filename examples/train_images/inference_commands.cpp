#include "inference_commands.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "base/utf8.hpp"
#include <cnnengine/cnnengine.hpp>
#include "device_choice.hpp"
#include "fit/metrics_file.hpp"
#include "memory_budget.hpp"
#include "plan_report.hpp"
#include "task_outputs.hpp"
#include "train_command.hpp"
#include "usage_error.hpp"

namespace cnn::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

DeviceChoice device_for(const Options& o) { return select_device_for(o.device, library_options(o).device); }

ModelOptions model_options(const Options& o, const Backend& backend) {
  ModelOptions m;
  m.max_batch = o.batch;
  m.memory_budget = memory_budget_of(o, backend, 1, false);
  return m;
}

// --plan with --evaluate or --predict: the plan of the model's inference on `stack` (its loader
// booked there), nothing allocated.
int print_model_plan(const Options& o, const CheckpointInfo& info, Backend& backend, const ModelOptions& settings,
                     const memory::MemoryStack& stack) {
  Network network = checkpoint_network(info, o.load, static_cast<int>(info.model.class_names.size()));
  std::cout << "model: " << o.load << "\n";
  return print_inference_plan(network, backend, inference_options(settings, stack, backend));
}

// The evaluation as a table: a class's name whole, however long (the column is as wide as the
// longest); the confusion matrix's columns numbered, each row naming its number and class.
void print_evaluation(const Model& model, const ClassEvaluation& e) {
  int width = 5;
  for (int c = 0; c < model.classes(); ++c) width = std::max(width, static_cast<int>(model.class_name(c).size()));
  std::printf("test loss %.4f, accuracy %.4f over %zu samples\n\n", e.loss, e.accuracy, e.samples);
  std::printf("  %-*s %9s %9s %9s %9s\n", width, "class", "precision", "recall", "accuracy", "samples");
  for (int c = 0; c < model.classes(); ++c) {
    const auto& row = e.confusion[static_cast<std::size_t>(c)];
    std::printf("  %-*s %9.4f %9.4f %9.4f %9zu\n", width, model.class_name(c).c_str(), e.precision(c), e.recall(c),
                e.class_accuracy(c), std::accumulate(row.begin(), row.end(), std::size_t{0}));
  }
  const int number = static_cast<int>(std::to_string(std::max(model.classes() - 1, 0)).size());
  std::printf("\nconfusion matrix (rows: true class, columns: predicted, by number)\n  %*s %-*s", number, "", width, "");
  for (int c = 0; c < model.classes(); ++c) std::printf(" %7d", c);
  std::printf("\n");
  for (int t = 0; t < model.classes(); ++t) {
    std::printf("  %*d %-*s", number, t, width, model.class_name(t).c_str());
    for (std::size_t n : e.confusion[static_cast<std::size_t>(t)]) std::printf(" %7zu", n);
    std::printf("\n");
  }
}

json evaluation_line(const Model& model, const ClassEvaluation& e) {
  json classes = json::array();
  for (int c = 0; c < model.classes(); ++c)
    classes.push_back({{"class", model.class_name(c)},
                       {"precision", e.precision(c)},
                       {"recall", e.recall(c)},
                       {"accuracy", e.class_accuracy(c)}});
  return {{"type", "evaluation"}, {"loss", e.loss}, {"accuracy", e.accuracy}, {"samples", e.samples},
          {"classes", classes}, {"confusion", e.confusion}};
}

// The image files under each path (a folder: every image in it and below it, sorted).
std::vector<fs::path> image_files(const std::vector<std::string>& paths) {
  std::vector<fs::path> files;
  for (const std::string& path : paths) {
    std::error_code ec;
    if (!fs::is_directory(path, ec)) {
      files.emplace_back(path);
      continue;
    }
    std::vector<fs::path> found;
    for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
      if (it->is_regular_file(ec) && data::is_image_file(it->path())) found.push_back(it->path());
    if (ec) throw DataError(path + ": cannot be read: " + ec.message());
    if (found.empty()) throw UsageError("--predict " + path + ": a folder with no image in it");
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

// --metrics-out where given, and the folder of a segmentation's masks, checked against what the
// command reads (check_run_files).
void check_outputs(const Options& o, std::vector<PathUse> inputs, bool writes_masks = false) {
  RunFiles files;
  if (!o.metrics_out.empty()) files.outputs.push_back({"--metrics-out", o.metrics_out, OutputKind::metrics});
  if (writes_masks) files.outputs.push_back({"--predict-out", o.predict_out, OutputKind::folder});
  files.inputs = std::move(inputs);
  files.overwrite = o.overwrite;
  check_command_files(files);
}

// The data --evaluate reads: --data where given, else the data the checkpoint's run trained on
// (train_images records it), else the default, said so.
std::string data_to_evaluate(const Options& o, const CheckpointInfo& info) {
  if (o.given.count("--data")) return o.data;
  if (info.training) {
    const json settings = json::parse(info.training->settings, nullptr, false);
    if (settings.is_object() && settings.contains("options") && settings["options"].is_object()) {
      const json folder = settings["options"].value("--data", json());
      if (folder.is_string() && !folder.get<std::string>().empty()) {
        std::cout << "evaluating on the data " << o.load << " trained on, " << folder.get<std::string>()
                  << " (--data gives other data)\n";
        return folder.get<std::string>();
      }
    }
  }
  std::cout << "note: " << o.load << " does not record the data it trained on: evaluating on the default, " << o.data
            << " (--data gives other data)\n";
  return o.data;
}

// A conversion records the preprocessing the options give (a file of another engine records
// none): --normalize imagenet, --mean and --std, --resize-shorter; the rest as the file has it.
ModelDescription converted_description(const Options& o, ModelDescription d) {
  data::Preprocessing& pre = d.preprocessing;
  if (o.normalize == "measured")
    throw UsageError("--normalize measured measures the training data, and a conversion has none: give --normalize "
                     "imagenet, or --mean and --std");
  if (o.normalize == "imagenet") pre.normalization = data::imagenet_normalization();
  if (!o.mean.empty()) pre.normalization = {o.mean, o.std};
  if (o.resize_shorter > 0) pre.resize_shorter_side = o.resize_shorter;
  auto check = [&](const char* options, auto checks) {
    try {
      checks();
    } catch (const ConfigError& e) {
      throw UsageError(std::string(options) + ": " + e.what() + " (the model takes " + data::to_string(pre.shape) +
                       " images)");
    }
  };
  check("--normalize, --mean, --std", [&] { data::check_normalization(pre.normalization, pre.shape.channels); });
  check("--resize-shorter", [&] { data::check_framing(pre.shape, pre.resize_shorter_side); });
  std::string recorded;
  if (!o.normalize.empty() || !o.mean.empty()) recorded += "its normalisation";
  if (o.resize_shorter > 0)
    recorded += std::string(recorded.empty() ? "" : " and ") + "images resized to " +
                std::to_string(o.resize_shorter) + " on their shorter side";
  if (!recorded.empty()) std::cout << "recorded with the model: " << recorded << "\n";
  return d;
}

}  // namespace

int evaluate_command(Options o) {
  DeviceChoice device = device_for(o);
  // The data is opened at the shape the file records before the model is planned: the model's
  // budget leaves its loader room, and the loader stages from the model's memory stack.
  const CheckpointInfo info = read_checkpoint(o.load);
  require_network(info, o.load);
  o.data = data_to_evaluate(o, info);
  const data::Preprocessing& pre = info.model.preprocessing;
  data::DatasetSplits splits = [&] {
    data::ImageFolderOptions images = image_options(o);
    images.resize_shorter_side = pre.resize_shorter_side;
    try {  // the model's task: a regression's labels.csv may hold only 0s and 1s
      return data::open_dataset(o.data, pre.shape, o.seed, images, info.model.loss.task);
    } catch (const ConfigError& e) {
      throw UsageError("--evaluate " + o.load + ": " + e.what());
    }
  }();
  name_the_classes(o, splits);
  std::vector<PathUse> inputs = data_inputs(splits, "--data");
  inputs.push_back({"--load", o.load});
  if (!o.class_names.empty()) inputs.push_back({"--class-names", o.class_names});
  check_outputs(o, inputs);
  // --limit-eval: the first samples of the test set, as a run evaluates them.
  const std::unique_ptr<data::Dataset> limited =
      o.limit_eval > 0 ? data::first_samples(*splits.test, o.limit_eval) : nullptr;
  const data::Dataset& test = limited ? *limited : *splits.test;
  if (!(test.shape() == pre.shape))
    throw UsageError("--evaluate: " + o.data + " holds " + data::to_string(test.shape()) + " samples, the model takes " +
                     data::to_string(pre.shape));
  data::LoaderOptions options;
  options.batch = o.batch;
  options.shuffle = false;
  options.normalization = pre.normalization;
  const ModelOptions model_settings = model_options(o, *device.backend);
  memory::MemoryStack stack =
      memory_stack_for(*device.backend, memory::MemoryOptions{.budget = model_settings.memory_budget});
  data::Loader::book(stack, test, options);
  if (o.plan_only) return print_model_plan(o, info, *device.backend, model_settings, stack);
  Model model(o.load, info, *device.backend, stack, model_settings);
  // Data whose classes are only numbered (IDX without names) is taken by the model's names.
  const std::vector<std::string> names = test.class_names();
  if (test.num_classes() != model.classes() ||
      (!numbered_classes(names) && !model.description().class_names.empty() && names != model.description().class_names))
    throw UsageError("--evaluate: the classes of " + o.data + " are not the model's");
  std::cout << "model: " << o.load << "\ndata: " << test.description() << "\ndevice: " << device.reason << "\n";
  data::Loader loader(test, options, stack);
  loader.start_epoch(1);
  const ClassEvaluation e = model.evaluate([&] { return loader.next(); });
  const bool classified = model.task() == Task::classify;
  if (classified)
    print_evaluation(model, e);
  else
    print_task_evaluation(model, e);
  MetricsFile metrics = MetricsFile::written_whole(o.metrics_out);
  metrics.write(classified ? evaluation_line(model, e) : task_evaluation_line(model, e));
  metrics.commit();
  return 0;
}

int predict_command(const Options& o) {
  std::vector<PathUse> inputs{{"--load", o.load}};
  for (const std::string& path : o.predict) inputs.push_back({"--predict", path});
  check_outputs(o, inputs);
  DeviceChoice device = device_for(o);
  if (o.plan_only) {
    const CheckpointInfo info = read_checkpoint(o.load);
    require_network(info, o.load);
    const ModelOptions settings = model_options(o, *device.backend);
    const memory::MemoryStack stack =
        memory_stack_for(*device.backend, memory::MemoryOptions{.budget = settings.memory_budget});
    return print_model_plan(o, info, *device.backend, settings, stack);
  }
  Model model(o.load, *device.backend, model_options(o, *device.backend));
  const Task task = model.task();
  for (const char* option : {"--predict-out", "--overlay"})
    if (o.given.count(option) && task != Task::segment)
      throw UsageError(std::string(option) + " applies to a segmentation model; " + o.load + " is trained to " +
                       to_string(task));
  if (o.given.count("--top") && task != Task::classify)
    throw UsageError("--top applies to a classification model; " + o.load + " is trained to " + to_string(task));
  if (task == Task::segment) check_outputs(o, inputs, true);
  const std::vector<fs::path> files = image_files(o.predict);
  MaskWriter masks(o.predict_out, o.overlay, o.overwrite);
  if (task == Task::segment) masks.prepare(files);
  // A multi-label's threshold: the model's own, unless given.
  const float threshold = o.given.count("--threshold") ? o.threshold : model.description().loss.threshold;
  MetricsFile metrics = MetricsFile::written_whole(o.metrics_out);
  const int top = std::min(o.top, model.classes());
  if (task == Task::classify)
    std::printf("%s: the %d most likely of the model's %d classes, with their probabilities\n", o.load.c_str(), top,
                model.classes());
  else if (task == Task::segment)
    std::printf("%s: each image's mask in %s, and the share of its pixels each class takes\n", o.load.c_str(),
                o.predict_out.c_str());
  else if (task == Task::multilabel)
    std::printf("%s: the classes above %.2f, with their probabilities\n", o.load.c_str(),
                static_cast<double>(threshold));
  else
    std::printf("%s: the %d values it regresses\n", o.load.c_str(), model.classes());
  int failed = 0;
  for (const fs::path& file : files) {
    std::vector<float> p;
    try {
      p = model.predict(file);
      if (task != Task::classify) {
        const fs::path mask = task == Task::segment ? masks.write(file, model, p) : fs::path();
        metrics.write(print_task_prediction(model, file, p, threshold, mask));
        continue;
      }
    } catch (const DataError& e) {
      std::cerr << "error: " << e.what() << "\n";
      metrics.write({{"type", "prediction"},
                     {"file", escape_non_utf8(file.string())},
                     {"error", escape_non_utf8(e.what())}});
      ++failed;
      continue;
    }
    std::vector<int> order(p.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top, order.end(), [&](int a, int b) { return p[a] > p[b]; });
    json classes = json::array();
    std::printf("%s", file.string().c_str());
    for (int k = 0; k < top; ++k) {
      const int c = order[static_cast<std::size_t>(k)];
      std::printf("  %s %.4f", model.class_name(c).c_str(), p[static_cast<std::size_t>(c)]);
      classes.push_back({{"class", model.class_name(c)}, {"index", c}, {"probability", p[static_cast<std::size_t>(c)]}});
    }
    std::printf("\n");
    metrics.write({{"type", "prediction"}, {"file", escape_non_utf8(file.string())}, {"top", classes}});
  }
  metrics.commit();
  return failed ? 1 : 0;
}

void require_onnx_export() {
  if (!onnx_export_available())
    throw UsageError("--export-onnx: this train_images was built without ONNX export (install libonnx-dev and "
                     "libprotobuf-dev, then configure and build again)");
}

namespace {

// A conversion's outputs (--export-onnx, --save) of the model read from --load.
void write_conversion(const Options& o, const Network& network, const ParameterStore& parameters,
                      const ModelDescription& read) {
  if (is_onnx_file(o.load)) std::cout << "imported " << o.load << ":\n" << network.summary();
  const ModelDescription description = converted_description(o, read);
  if (!o.export_onnx.empty()) {
    const OnnxExportReport report = export_onnx(o.export_onnx, network, parameters, description, onnx_export_options(o));
    std::cout << "exported " << o.load << " to " << o.export_onnx << describe_onnx_export(network, onnx_export_options(o))
              << "\n";
    warn_of_saturation(report);
  }
  if (!o.save.empty()) {
    save_checkpoint(o.save, network, parameters, description);
    std::cout << "saved " << o.load << " as the checkpoint " << o.save << "\n";
  }
}

}  // namespace

int export_command(const Options& o) {
  if (o.num_classes > 0)
    throw UsageError("--num-classes " + std::to_string(o.num_classes) + ": a conversion keeps the file's head; a new "
                     "head is trained on data: give --data");
  std::vector<OutputUse> outputs;
  if (!o.export_onnx.empty()) {
    require_onnx_export();
    outputs.push_back({"--export-onnx", o.export_onnx, OutputKind::onnx});
  }
  if (!o.save.empty()) outputs.push_back({"--save", o.save, OutputKind::checkpoint});
  check_command_files({outputs, {{"--load", o.load}}, o.overwrite, {}});
  if (!o.save.empty()) check_save_path(o.save, o.overwrite);
  DeviceRequest cpu;  // a conversion computes nothing: the CPU reads the file as well as any device
  cpu.device = DeviceKind::cpu;
  cpu.threads = 1;
  DeviceChoice device = select_device(cpu);
  if (!o.given.count("--image-size")) {
    Model model(o.load, *device.backend, model_options(o, *device.backend));
    write_conversion(o, model.network(), model.parameters(), model.description());
    return 0;
  }
  // An ONNX model whose input's height and width are symbolic, imported at --image-size.
  if (!is_onnx_file(o.load))
    throw UsageError("--image-size with a conversion sizes an ONNX model's symbolic input; " + o.load +
                     " is a checkpoint, of its own size");
  const ImportedModel imported = import_onnx(o.load, OnnxImportOptions{o.image_size, o.image_size});
  memory::MemoryStack stack = memory_stack_for(*device.backend, memory::MemoryOptions{});
  ParameterStore parameters(imported.network, *device.backend, stack.blocks(), 0, o.seed);
  parameters.upload(imported.parameters);
  write_conversion(o, imported.network, parameters, imported.description);
  return 0;
}

void warn_of_saturation(const OnnxExportReport& report) {
  if (report.saturated == 0) return;
  std::cerr << "warning: " << report.saturated << (report.saturated == 1 ? " weight is" : " weights are")
            << " beyond float16's range and became +-65504 (the largest, " << report.largest << ", in " << report.where
            << "): the model computes other values there; --export-onnx-precision fp32 keeps them\n";
}

OnnxExportOptions onnx_export_options(const Options& o) {
  OnnxExportOptions options;
  options.fp16 = o.export_onnx_precision == "fp16";
  return options;
}

std::string describe_onnx_export(const Network& network, const OnnxExportOptions& options) {
  const std::string outputs =
      network.task() == Task::regress
          ? std::string("output \"") + kOnnxValuesName + "\""
          : std::string("outputs \"") + kOnnxLogitsName + "\" and \"" + kOnnxProbabilitiesName + "\" (" +
                (network.task() == Task::multilabel ? "sigmoid"
                 : network.task() == Task::segment  ? "softmax over the classes at each pixel"
                                                    : "softmax") +
                ")";
  return " (ONNX opset " + std::to_string(kOnnxOpset) + ", inference form" +
         (options.fp16 ? ", weights and values in float16" : "") + ": input \"" + kOnnxInputName + "\" N x " +
         network.input_shape().str() + ", " + outputs + "; the task, the names and the normalisation in its metadata)";
}

}  // namespace cnn::app
