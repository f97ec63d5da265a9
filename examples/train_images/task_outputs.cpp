#include "task_outputs.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#include <stb/stb_image_write.h>

#include "base/atomic_file.hpp"
#include "base/utf8.hpp"
#include "usage_error.hpp"

namespace cnn::app {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The per-pixel class: the largest probability, the first of equal ones (as the metrics count).
std::vector<unsigned char> argmax_mask(const std::vector<float>& p, int classes, std::size_t pixels) {
  std::vector<unsigned char> mask(pixels, 0);
  for (std::size_t i = 0; i < pixels; ++i) {
    int best = 0;
    for (int c = 1; c < classes; ++c)
      if (p[static_cast<std::size_t>(c) * pixels + i] > p[static_cast<std::size_t>(best) * pixels + i]) best = c;
    mask[i] = static_cast<unsigned char>(best);
  }
  return mask;
}

// A colour a class, far apart for the first classes (class 0, often the background, is left
// clear in an overlay).
void class_colour(int c, unsigned char rgb[3]) {
  static const unsigned char palette[][3] = {{0, 0, 0},       {230, 25, 75},  {60, 180, 75},  {255, 225, 25},
                                             {0, 130, 200},   {245, 130, 48}, {145, 30, 180}, {70, 240, 240},
                                             {240, 50, 230},  {210, 245, 60}, {250, 190, 212}, {0, 128, 128}};
  constexpr int kColours = sizeof palette / sizeof palette[0];
  if (c < kColours) {
    std::copy(palette[c], palette[c] + 3, rgb);
    return;
  }
  // Beyond the palette: a hue by the golden angle.
  const double h = std::fmod(c * 0.618033988749895, 1.0) * 6;
  const int sector = static_cast<int>(h);
  const double f = h - sector;
  const auto v = static_cast<unsigned char>(255), p = static_cast<unsigned char>(60),
             q = static_cast<unsigned char>(255 - 195 * f), t = static_cast<unsigned char>(60 + 195 * f);
  const unsigned char table[6][3] = {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}};
  std::copy(table[sector % 6], table[sector % 6] + 3, rgb);
}

// Encodes with stb into memory, then writes the file whole (a failure leaves no half a PNG).
void write_png(const fs::path& file, int width, int height, int channels, const unsigned char* pixels) {
  std::vector<unsigned char> bytes;
  auto append = [](void* context, void* data, int size) {
    auto* out = static_cast<std::vector<unsigned char>*>(context);
    out->insert(out->end(), static_cast<unsigned char*>(data), static_cast<unsigned char*>(data) + size);
  };
  if (!stbi_write_png_to_func(append, &bytes, width, height, channels, pixels, width * channels))
    throw Error("cannot encode " + file.string() + " as PNG");
  AtomicFile out(file);
  out.write(bytes.data(), bytes.size());
  out.commit();
}

std::string figure(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", value);
  return text;
}

}  // namespace

void print_task_evaluation(const Model& model, const ClassEvaluation& e) {
  // A segmentation's accuracy is its pixel accuracy, which its scores give.
  const std::string accuracy =
      model.task() == Task::multilabel ? ", label accuracy " + figure(e.accuracy) : std::string();
  std::printf("test loss %.4f%s over %zu samples: %s\n\n", e.loss, accuracy.c_str(), e.samples,
              describe_scores(e.scores).c_str());
  for (const std::string& line : score_table(e.scores, model.description().class_names)) std::printf("%s\n", line.c_str());
}

json task_evaluation_line(const Model& model, const ClassEvaluation& e) {
  json line = {{"type", "evaluation"}, {"task", to_string(model.task())}, {"loss", e.loss}, {"samples", e.samples}};
  if (model.task() != Task::regress) line["accuracy"] = e.accuracy;
  for (const auto& [name, value] : headline_scores(e.scores)) line[name] = value;
  const TaskScores& s = e.scores;
  auto per = [&](const std::vector<double>& values) {
    json list = json::array();
    for (double v : values) list.push_back(std::isnan(v) ? json() : json(v));
    return list;
  };
  json names = json::array();
  for (int c = 0; c < model.classes(); ++c) names.push_back(model.class_name(c));
  line[model.task() == Task::regress ? "targets" : "classes"] = names;
  if (model.task() == Task::segment) line["iou"] = per(s.iou);
  if (model.task() == Task::multilabel) {
    line["precision"] = per(s.precision);
    line["recall"] = per(s.recall);
    line["f1"] = per(s.f1);
    line["average_precision"] = per(s.average_precision);
  }
  if (model.task() == Task::regress) {
    line["mae_per_target"] = per(s.mae);
    line["rmse_per_target"] = per(s.rmse);
  }
  return line;
}

MaskWriter::MaskWriter(fs::path folder, bool overlays, bool overwrite)
    : folder_(std::move(folder)), overlays_(overlays), overwrite_(overwrite) {}

fs::path MaskWriter::mask_path(const fs::path& image) const {
  return folder_ / (image.stem().string() + ".mask.png");
}
fs::path MaskWriter::overlay_path(const fs::path& image) const {
  return folder_ / (image.stem().string() + ".overlay.png");
}

void MaskWriter::prepare(const std::vector<fs::path>& images) {
  std::error_code ec;
  if (fs::exists(folder_, ec) && !fs::is_directory(folder_, ec))
    throw UsageError("--predict-out " + escape_non_utf8(folder_.string()) + ": exists and is not a folder");
  std::map<fs::path, fs::path> writer_of;
  for (const fs::path& image : images) {
    std::vector<fs::path> outputs{mask_path(image)};
    if (overlays_) outputs.push_back(overlay_path(image));
    for (const fs::path& out : outputs) {
      const auto [at, fresh] = writer_of.emplace(out, image);
      if (!fresh)
        throw UsageError("--predict: " + escape_non_utf8(at->second.string()) + " and " +
                         escape_non_utf8(image.string()) + " would both write " + escape_non_utf8(out.string()) +
                         ": give images of different names, or predict them apart");
      const bool is_input = std::find(images.begin(), images.end(), out) != images.end();
      if (is_input || (fs::exists(out, ec) && !overwrite_))
        throw UsageError("--predict: " + escape_non_utf8(out.string()) +
                         (is_input ? " is one of the images to predict: give another --predict-out"
                                   : " exists (give --overwrite to replace it, or another --predict-out)"));
    }
  }
  fs::create_directories(folder_, ec);
  if (ec) throw UsageError("--predict-out " + escape_non_utf8(folder_.string()) + ": cannot be made: " + ec.message());
}

fs::path MaskWriter::write(const fs::path& image, const Model& model, const std::vector<float>& p) {
  const Shape& input = model.network().input_shape();
  const int height = input[1], width = input[2], classes = model.classes();
  const auto pixels = static_cast<std::size_t>(height) * static_cast<std::size_t>(width);
  const std::vector<unsigned char> mask = argmax_mask(p, classes, pixels);
  write_png(mask_path(image), width, height, 1, mask.data());
  if (overlays_) {
    // The image as the model saw it (its size and channels), before normalisation, in [0, 1].
    data::Preprocessing plain = model.description().preprocessing;
    plain.normalization = {};
    const std::vector<float> x = data::preprocess_image(image, plain);
    const int channels = plain.shape.channels;
    std::vector<unsigned char> rgb(pixels * 3);
    for (std::size_t i = 0; i < pixels; ++i) {
      unsigned char colour[3];
      class_colour(mask[i], colour);
      for (int k = 0; k < 3; ++k) {
        const float v = x[static_cast<std::size_t>(channels == 3 ? k : 0) * pixels + i] * 255.0f;
        const float blended = mask[i] == 0 ? v : 0.5f * v + 0.5f * colour[k];
        rgb[i * 3 + static_cast<std::size_t>(k)] = static_cast<unsigned char>(std::clamp(blended, 0.0f, 255.0f));
      }
    }
    write_png(overlay_path(image), width, height, 3, rgb.data());
  }
  return mask_path(image);
}

json print_task_prediction(const Model& model, const fs::path& file, const std::vector<float>& p, float threshold,
                           const fs::path& mask) {
  json line = {{"type", "prediction"}, {"file", escape_non_utf8(file.string())}};
  std::printf("%s", file.string().c_str());
  switch (model.task()) {
    case Task::classify: break;
    case Task::segment: {
      const Shape& input = model.network().input_shape();
      const auto pixels = static_cast<std::size_t>(input[1]) * static_cast<std::size_t>(input[2]);
      const std::vector<unsigned char> classes = argmax_mask(p, model.classes(), pixels);
      std::vector<std::size_t> counts(static_cast<std::size_t>(model.classes()), 0);
      for (unsigned char c : classes) ++counts[c];
      json share = json::array();
      std::printf("  mask %s (%dx%d)", mask.string().c_str(), input[2], input[1]);
      for (int c = 0; c < model.classes(); ++c) {
        const double fraction = static_cast<double>(counts[static_cast<std::size_t>(c)]) / static_cast<double>(pixels);
        if (counts[static_cast<std::size_t>(c)]) std::printf("  %s %.1f%%", model.class_name(c).c_str(), 100 * fraction);
        share.push_back({{"class", model.class_name(c)}, {"index", c}, {"fraction", fraction}});
      }
      line["mask"] = escape_non_utf8(mask.string());
      line["classes"] = share;
      break;
    }
    case Task::multilabel: {
      json above = json::array();
      for (int c = 0; c < model.classes(); ++c) {
        const float q = p[static_cast<std::size_t>(c)];
        if (q <= threshold) continue;
        std::printf("  %s %.4f", model.class_name(c).c_str(), q);
        above.push_back({{"class", model.class_name(c)}, {"index", c}, {"probability", q}});
      }
      if (above.empty()) std::printf("  (no class above %.2f)", static_cast<double>(threshold));
      line["classes"] = above;
      line["threshold"] = threshold;
      break;
    }
    case Task::regress: {
      json values = json::object();
      for (int t = 0; t < model.classes(); ++t) {
        std::printf("  %s %.6g", model.class_name(t).c_str(), static_cast<double>(p[static_cast<std::size_t>(t)]));
        values[model.class_name(t)] = p[static_cast<std::size_t>(t)];
      }
      line["values"] = values;
      break;
    }
  }
  std::printf("\n");
  return line;
}

}  // namespace cnn::app
