#include "data/detail/class_names_file.hpp"

#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <system_error>

#include "base/utf8.hpp"
#include "data/data_error.hpp"

namespace cnn::data {
namespace {

std::vector<std::string> numbers(int count) {
  std::vector<std::string> names;
  for (int c = 0; c < count; ++c) names.push_back(std::to_string(c));
  return names;
}

std::string trimmed(const std::string& line) {
  const char* const kSpace = " \t\r";
  const std::size_t first = line.find_first_not_of(kSpace);
  if (first == std::string::npos) return {};
  return line.substr(first, line.find_last_not_of(kSpace) - first + 1);
}

std::string read_text(const std::filesystem::path& path) {
  require_regular_file(path);
  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) fail(path, "cannot read its size: " + ec.message());
  if (size > kMaxClassNamesFileBytes)
    fail(path, "holds " + std::to_string(size) + " bytes, over the limit of 1 MiB for a list of class names");
  std::ifstream in(path, std::ios::binary);
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) fail(path, "read error");
  return text;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(trimmed(text.substr(start, end - start)));
    start = end + 1;
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

}  // namespace

std::vector<std::string> read_class_names(const std::filesystem::path& path) {
  const std::vector<std::string> names = lines_of(read_text(path));
  std::map<std::string, std::size_t> first_line;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string line = std::to_string(i + 1);
    if (names[i].empty()) fail(path, "line " + line + " is blank: expected one class name a line");
    for (char c : names[i])
      if (static_cast<unsigned char>(c) < 0x20)
        fail(path, "line " + line + " holds a control character: expected one class name a line, as text");
    if (!is_utf8(names[i]))
      fail(path, "line " + line + " is not UTF-8 text ('" + escape_non_utf8(names[i]) +
                     "'): expected one class name a line, in UTF-8");
    if (auto [at, added] = first_line.emplace(names[i], i + 1); !added)
      fail(path, "line " + line + " repeats the class name '" + names[i] + "' of line " + std::to_string(at->second));
  }
  return names;
}

std::vector<std::string> read_class_names(const std::filesystem::path& path, int expected) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) && !std::filesystem::is_symlink(path, ec)) return numbers(expected);
  const std::vector<std::string> names = read_class_names(path);
  if (names.size() != static_cast<std::size_t>(expected)) {
    fail(path, "expected " + std::to_string(expected) + " class names, one a line, found " +
                   std::to_string(names.size()));
  }
  return names;
}

}  // namespace cnn::data
