#pragma once
// What --evaluate and --predict show for the tasks beyond classification: a segmentation's scores
// and mask files (and colour overlays), a multi-label's classes above the threshold, a
// regression's values; each also as a JSON line.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <cnnengine/cnnengine.hpp>

namespace cnn::app {

// --evaluate: the loss, the task's headline scores and a table of them a class (or target).
void print_task_evaluation(const Model& model, const ClassEvaluation& e);
nlohmann::json task_evaluation_line(const Model& model, const ClassEvaluation& e);

// Where --predict writes a segmentation's masks: one NAME.mask.png an image (8-bit grey, the
// predicted class at each pixel, at the model's input size) and, with overlays, NAME.overlay.png
// (the image in colour under the classes' colours). Every file it will write is known before the
// first is written: a file that exists is refused unless overwrite, and so are two images with
// the same name.
class MaskWriter {
 public:
  MaskWriter(std::filesystem::path folder, bool overlays, bool overwrite);
  // Checks the files of every image before any is written; creates the folder.
  void prepare(const std::vector<std::filesystem::path>& images);
  // Writes `image`'s mask (and overlay) from its predictions [K, H, W]; returns the mask's path.
  std::filesystem::path write(const std::filesystem::path& image, const Model& model, const std::vector<float>& p);

 private:
  std::filesystem::path mask_path(const std::filesystem::path& image) const;
  std::filesystem::path overlay_path(const std::filesystem::path& image) const;

  std::filesystem::path folder_;
  bool overlays_, overwrite_;
};

// --predict of one image by a model of another task than classification: prints its line and
// returns its JSON line. `mask` is the file MaskWriter wrote for a segmentation.
nlohmann::json print_task_prediction(const Model& model, const std::filesystem::path& file,
                                     const std::vector<float>& predictions, float threshold,
                                     const std::filesystem::path& mask);

}  // namespace cnn::app
