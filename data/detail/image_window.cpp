#include "data/detail/image_window.hpp"

#include <string>

#include <cnnengine/base/error.hpp>

namespace cnn::data {

ImageWindow checked_window(const WindowChooser& choose, int height, int width) {
  const ImageWindow w = choose.choose(height, width);
  if (w.height < 1 || w.width < 1 || w.top < 0 || w.left < 0 || w.top > height - w.height ||
      w.left > width - w.width)
    throw ConfigError("the window " + std::to_string(w.height) + "x" + std::to_string(w.width) + " at (" +
                      std::to_string(w.top) + ", " + std::to_string(w.left) + ") does not lie inside an image of " +
                      std::to_string(height) + "x" + std::to_string(width));
  return w;
}

}  // namespace cnn::data
