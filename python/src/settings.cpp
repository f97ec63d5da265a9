#include "settings.hpp"

#include <nanobind/stl/string.h>

namespace nb = nanobind;

namespace cnn::python {

void Settings::refuse_unknown() const {
  for (auto [key, value] : values_) {
    const std::string name = nb::cast<std::string>(nb::str(key));
    if (known_.count(name)) continue;
    std::string known;
    for (const std::string& k : known_) known += (known.empty() ? "" : ", ") + k;
    throw OptionError(name, what_ + ": unknown option '" + name + "' (the options are: " + known + ")");
  }
}

}  // namespace cnn::python
