#pragma once
// train_images without --doctor: a new run, or (--resume) the continuation of a saved one.
#include "cnnengine/data/image_folder_dataset.hpp"
#include "options.hpp"
#include "ranks.hpp"

namespace cnn::app {

// Returns the exit code (see main.cpp); throws what the run hit. Over several ranks, each trains
// on its share of every batch and rank 0 writes.
int train(Options o, Ranks& ranks);
// The image-folder options the command line gives (--max-image-bytes, --skip-corrupt).
data::ImageFolderOptions image_options(const Options& o);

}  // namespace cnn::app
