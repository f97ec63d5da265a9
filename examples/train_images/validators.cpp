#include "validators.hpp"

#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>

#include <cnnengine/base/error.hpp>
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::app {
namespace {

std::optional<long long> parse_integer(const std::string& text) {
  long long value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Finite and within float's range (the options are floats), or nothing.
std::optional<double> parse_number(const std::string& text) {
  try {
    std::size_t used = 0;
    const double value = std::stod(text, &used);
    if (used == text.size() && std::isfinite(value) && std::fabs(value) <= FLT_MAX) return value;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

std::string got(const std::string& text) { return ", got '" + text + "'"; }

CLI::Validator number_where(bool (*accept)(double), const std::string& requirement) {
  return CLI::Validator(
      [accept, requirement](std::string& text) {
        const auto value = parse_number(text);
        return value && accept(*value) ? std::string() : "must be " + requirement + got(text);
      },
      "NUMBER");
}

}  // namespace

CLI::Validator positive_integer(long long max) {
  return CLI::Validator(
      [max](std::string& text) {
        const auto value = parse_integer(text);
        if (value && *value > 0 && *value <= max) return std::string();
        return "must be a positive integer" + (value && *value > max ? " of at most " + std::to_string(max) : "") +
               got(text);
      },
      "POSITIVE");
}

CLI::Validator integer_between(long long min, long long max, const std::string& note) {
  return CLI::Validator(
      [min, max, note](std::string& text) {
        const auto value = parse_integer(text);
        if (value && *value >= min && *value <= max) return std::string();
        return "must be an integer from " + std::to_string(min) + " to " + std::to_string(max) +
               (note.empty() ? "" : " " + note) + got(text);
      },
      "INT in [" + std::to_string(min) + " - " + std::to_string(max) + "]");
}

CLI::Validator positive_number() {
  return number_where([](double v) { return v > 0; }, "a positive finite number");
}

CLI::Validator non_negative_number() {
  return number_where([](double v) { return v >= 0; }, "a finite number of at least 0");
}

CLI::Validator fraction_below_one() {
  return number_where([](double v) { return v >= 0 && v < 1; }, "a number in [0, 1)");
}

CLI::Validator fraction_between_zero_and_one() {
  return number_where([](double v) { return v > 0 && v < 1; }, "a number above 0 and below 1");
}

CLI::Validator fraction_up_to(double most) {
  return CLI::Validator(
      [most](std::string& text) {
        const auto value = parse_number(text);
        if (value && *value >= 0 && *value <= most) return std::string();
        char bound[32];
        std::snprintf(bound, sizeof bound, "%g", most);
        return "must be a number from 0 to " + std::string(bound) + got(text);
      },
      "NUMBER");
}

CLI::Validator positive_size() {
  return CLI::Validator(
      [](std::string& text) {
        try {
          const std::size_t bytes = memory::parse_bytes(text);
          if (bytes == 0)
            return "'" + text + "' is 0 bytes: give a positive size such as 512MiB (leave the option out for no budget)";
          // A bare number is bytes to the library, but on a command line "512" is a unit forgotten.
          if (text.find_first_not_of("0123456789. ") == std::string::npos)
            return "'" + text + "' has no unit: give one, such as " + text + "MiB or " + text +
                   "GiB (" + text + "B for bytes)";
          return std::string();
        } catch (const ConfigError& e) {
          return std::string(e.what());
        }
      },
      "SIZE");
}

}  // namespace cnn::app
