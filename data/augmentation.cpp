#include <cnnengine/data/augmentation.hpp>

#include <cmath>
#include <cstdio>
#include <string>

#include <cnnengine/base/error.hpp>

namespace cnn::data {
namespace {

std::string number(float v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", static_cast<double>(v));
  return text;
}

void check_range(const char* field, float lo, float hi, float least, float most, bool least_open) {
  const bool low_ok = least_open ? lo > least : lo >= least;
  if (!std::isfinite(lo) || !std::isfinite(hi) || !low_ok || hi > most || lo > hi)
    throw ConfigError(std::string("photo augmentation: ") + field + " " + number(lo) + " to " + number(hi) +
                      ": expected " + (least_open ? "above " : "from ") + number(least) + " up to " + number(most) +
                      ", the first at most the second");
}

void check_factor(const char* field, float v, float most) {
  if (!std::isfinite(v) || v < 0 || v > most)
    throw ConfigError(std::string("photo augmentation: ") + field + " " + number(v) + ": expected 0 to " +
                      number(most));
}

}  // namespace

void check_photo_augmentation(const PhotoAugmentation& p) {
  check_range("crop scale", p.crop.scale_min, p.crop.scale_max, 0.0f, 1.0f, true);
  check_range("crop ratio", p.crop.ratio_min, p.crop.ratio_max, 0.0f, 1e3f, true);
  check_factor("brightness", p.jitter.brightness, 1e3f);
  check_factor("contrast", p.jitter.contrast, 1e3f);
  check_factor("saturation", p.jitter.saturation, 1e3f);
  check_factor("erasing probability", p.erasing.probability, 1.0f);
  check_range("erasing scale", p.erasing.scale_min, p.erasing.scale_max, 0.0f, 1.0f, true);
  check_range("erasing ratio", p.erasing.ratio_min, p.erasing.ratio_max, 0.0f, 1e3f, true);
}

std::string describe(const PhotoAugmentation& p) {
  std::string text;
  auto add = [&](const std::string& part) { text += (text.empty() ? "" : ", ") + part; };
  if (p.crop.enabled)
    add("random resized crop (scale " + number(p.crop.scale_min) + "-" + number(p.crop.scale_max) + ", ratio " +
        number(p.crop.ratio_min) + "-" + number(p.crop.ratio_max) + ")");
  if (p.jitter.enabled())
    add("colour jitter " + number(p.jitter.brightness) + "/" + number(p.jitter.contrast) + "/" +
        number(p.jitter.saturation));
  if (p.erasing.probability > 0) add("random erasing " + number(p.erasing.probability));
  return text;
}

}  // namespace cnn::data
