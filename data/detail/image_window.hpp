#pragma once
// A WindowChooser's pick, checked: a window that leaves the image or holds no pixel is the
// chooser's fault, refused before any pixel is read.
#include <cnnengine/data/dataset.hpp>

namespace cnn::data {

// choose.choose(height, width), or a ConfigError saying what it gave.
ImageWindow checked_window(const WindowChooser& choose, int height, int width);

}  // namespace cnn::data
