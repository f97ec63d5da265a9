#include <cnnengine/memory/memory_resource.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include <cnnengine/base/error.hpp>

namespace cnn::memory {

std::size_t parse_bytes(std::string_view text) {
  auto fail = [&] {
    throw ConfigError("cannot read '" + std::string(text) +
                      "' as a size: expected a number with an optional unit such as "
                      "512MiB, 2GiB, 1TiB, 64KB or 1000000");
  };
  // Digits with at most one decimal point among them, all read as the number ("1.2.3MiB" is not).
  std::size_t pos = 0;
  int points = 0;
  while (pos < text.size() && (std::isdigit(static_cast<unsigned char>(text[pos])) || text[pos] == '.'))
    points += text[pos++] == '.';
  if (pos == 0 || points > 1) fail();
  double number = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + pos, number);
  if (error != std::errc() || end != text.data() + pos) fail();
  std::string unit(text.substr(pos));
  unit.erase(std::remove(unit.begin(), unit.end(), ' '), unit.end());
  std::transform(unit.begin(), unit.end(), unit.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "kb" || unit == "k") scale = 1e3;
  else if (unit == "kib") scale = 1024.0;
  else if (unit == "mb" || unit == "m") scale = 1e6;
  else if (unit == "mib") scale = 1024.0 * 1024.0;
  else if (unit == "gb" || unit == "g") scale = 1e9;
  else if (unit == "gib") scale = 1024.0 * 1024.0 * 1024.0;
  else if (unit == "tb" || unit == "t") scale = 1e12;
  else if (unit == "tib") scale = 1024.0 * 1024.0 * 1024.0 * 1024.0;
  else fail();
  const double bytes = number * scale;
  if (!std::isfinite(bytes) || bytes < 0 || bytes > 1e18) fail();
  return static_cast<std::size_t>(std::llround(bytes));
}

std::string format_bytes(std::size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[32];
  if (unit == 0) std::snprintf(buffer, sizeof buffer, "%zu B", bytes);
  else std::snprintf(buffer, sizeof buffer, "%.2f %s", value, units[unit]);
  return buffer;
}

}  // namespace cnn::memory
