#pragma once
// Reads a Python dict of options by name, as the C++ types they set: an option of the wrong type
// is a ConfigError naming it, and an option nobody read (a misspelling) is one too, listing the
// known ones.
#include <nanobind/nanobind.h>

#include <limits>
#include <optional>
#include <set>
#include <string>

#include <cnnengine/base/error.hpp>

namespace cnn::python {

class Settings {
 public:
  Settings(nanobind::dict values, std::string what) : values_(std::move(values)), what_(std::move(what)) {}

  // The value of `key` (none where it is absent or None).
  template <class T>
  std::optional<T> get(const char* key) {
    known_.insert(key);
    if (!values_.contains(key)) return std::nullopt;
    nanobind::handle value = values_[key];
    if (value.is_none()) return std::nullopt;
    T out;
    // Python's True is an int; a count or a size given as True is a mistake.
    const bool bool_for_number = std::is_arithmetic_v<T> && !std::is_same_v<T, bool> && PyBool_Check(value.ptr());
    if (bool_for_number || !nanobind::try_cast(value, out))
      throw OptionError(key, std::string(key) + "=" + nanobind::repr(value).c_str() + ": not " + kind<T>());
    return out;
  }
  // Whether `key` was given (and not None).
  bool given(const char* key) const { return values_.contains(key) && !values_[key].is_none(); }
  // The value as it is (a null handle where absent or None), for options of several types.
  nanobind::handle get_handle(const char* key) {
    known_.insert(key);
    if (!values_.contains(key) || values_[key].is_none()) return nanobind::handle();
    return values_[key];
  }
  template <class T>
  void read(const char* key, T& into) {
    if (auto v = get<T>(key)) into = *v;
  }
  // The same for an option the caller always gives (a keyword with a default): None is refused.
  template <class T>
  void require(const char* key, T& into) {
    if (given(key)) return read(key, into);
    throw OptionError(key, std::string(key) + "=None: not " + kind<T>());
  }
  // An OptionError naming each key given that no get() asked for.
  void refuse_unknown() const;

 private:
  template <class T>
  static std::string kind() {
    if constexpr (std::is_same_v<T, bool>) return "True or False";
    else if constexpr (std::is_integral_v<T>)
      return "a whole number from " + std::to_string(std::numeric_limits<T>::min()) + " to " +
             std::to_string(std::numeric_limits<T>::max());
    else if constexpr (std::is_floating_point_v<T>) return "a number";
    else if constexpr (std::is_same_v<T, std::string>) return "a string";
    else return "of the right type (a list of them)";
  }

  nanobind::dict values_;
  std::string what_;
  std::set<std::string> known_;
};

}  // namespace cnn::python
