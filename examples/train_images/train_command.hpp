#pragma once
// train_images without --doctor: a new run, or (--resume) the continuation of a saved one.
#include <string>
#include <vector>

#include <cnnengine/data/dataset.hpp>
#include "options.hpp"
#include "ranks.hpp"

namespace cnn::app {

// Whether the names are only the labels' numbers ("0", "1", ...): data that names no class.
bool numbered_classes(const std::vector<std::string>& names);
// --class-names FILE names the classes of `splits` (a missing file is an error); without it the
// data's own names stand (Fashion-MNIST's Debian folder gets its ten from open_dataset).
void name_the_classes(const Options& o, data::DatasetSplits& splits);

// Returns the exit code (see command_line.hpp); throws what the run hit. Over several ranks, each
// trains on its share of every batch and rank 0 writes. `extra`'s callbacks run after the run's own.
int train(Options o, Ranks& ranks, const FitCallbacks& extra = {});
// The image-folder options the command line gives (--max-image-bytes, --skip-corrupt); a skipped
// image's warning starts with `warning_prefix` (a rank's).
data::ImageFolderOptions image_options(const Options& o, const std::string& warning_prefix = "");

}  // namespace cnn::app
