#include "data/detail/labels_csv.hpp"

#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <system_error>

#include "base/text_lines.hpp"
#include "base/utf8.hpp"
#include "data/data_error.hpp"

namespace cnn::data {
namespace {

std::string trimmed(const std::string& text) {
  const char* const kSpace = " \t";
  const std::size_t first = text.find_first_not_of(kSpace);
  if (first == std::string::npos) return {};
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

// The fields of one line.
std::vector<std::string> split_fields(const std::filesystem::path& path, std::size_t line_number,
                                      const std::string& line) {
  const std::string where = "line " + std::to_string(line_number);
  std::vector<std::string> fields;
  std::size_t at = 0;
  for (;;) {
    std::string field;
    while (at < line.size() && (line[at] == ' ' || line[at] == '\t')) ++at;
    if (at < line.size() && line[at] == '"') {
      for (++at;; ++at) {
        if (at >= line.size())
          fail(path, where + ": a quoted field does not end on its line (a field over several lines is not supported)");
        if (line[at] == '"') {
          if (at + 1 < line.size() && line[at + 1] == '"') {
            field += '"';
            ++at;
            continue;
          }
          ++at;
          break;
        }
        field += line[at];
      }
      while (at < line.size() && (line[at] == ' ' || line[at] == '\t')) ++at;
      if (at < line.size() && line[at] != ',')
        fail(path, where + ", field " + std::to_string(fields.size() + 1) +
                       ": text after the closing quote of a quoted field");
    } else {
      const std::size_t end = std::min(line.find(',', at), line.size());
      field = trimmed(line.substr(at, end - at));
      if (field.find('"') != std::string::npos)
        fail(path, where + ", field " + std::to_string(fields.size() + 1) +
                       ": a double quote inside a field that does not start with one");
      at = end;
    }
    fields.push_back(std::move(field));
    if (at >= line.size()) return fields;
    ++at;  // the comma
  }
}

void check_names(const std::filesystem::path& path, std::size_t line_number, const std::vector<std::string>& header) {
  const std::string where = "line " + std::to_string(line_number);
  if (header.empty() || header[0] != "file")
    fail(path, where + ": expected the header 'file,<name>,<name>...' (the image's path under images/, then one "
               "column a label or target), found '" + quoted_in_message(header.empty() ? "" : header[0]) + "' first");
  if (header.size() < 2) fail(path, where + ": no label or target after 'file': expected 'file,<name>,<name>...'");
  if (header.size() - 1 > kMaxLabelsColumns)
    fail(path, where + ": " + std::to_string(header.size() - 1) + " labels or targets, over the limit of " +
                   std::to_string(kMaxLabelsColumns));
  std::map<std::string, std::size_t> column_of;
  for (std::size_t c = 1; c < header.size(); ++c) {
    const std::string column = where + ", column " + std::to_string(c + 1);
    const std::string& name = header[c];
    if (name.empty()) fail(path, column + ": an empty name: every label or target needs one");
    if (!is_utf8(name)) fail(path, column + ": the name '" + quoted_in_message(name) + "' is not UTF-8 text");
    for (char ch : name)
      if (static_cast<unsigned char>(ch) < 0x20) fail(path, column + ": the name holds a control character");
    if (auto [at, added] = column_of.emplace(name, c + 1); !added)
      fail(path, column + " repeats the name '" + quoted_in_message(name) + "' of column " +
                     std::to_string(at->second));
  }
}

float parse_value(const std::filesystem::path& path, const std::string& where, const std::string& text) {
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (first != last && *first == '+') ++first;
  double value = 0;
  const auto [end, ec] = std::from_chars(first, last, value);
  if (text.empty() || ec == std::errc::invalid_argument || end != last)
    fail(path, where + ": '" + quoted_in_message(text) + "' is not a number");
  if (ec == std::errc::result_out_of_range || !std::isfinite(value) ||
      std::abs(value) > static_cast<double>(std::numeric_limits<float>::max()))
    fail(path, where + ": " + quoted_in_message(text) + " is not a finite number a float holds");
  return static_cast<float>(value);
}

std::string header_of(const std::vector<std::string>& names) {
  std::string text = "file";
  for (const std::string& name : names) text += "," + name;
  return text;
}

}  // namespace

LabelsTable read_labels_csv(const std::filesystem::path& path, const std::vector<std::string>& expected_names) {
  require_regular_file(path);
  std::error_code ec;
  if (const std::uint64_t size = std::filesystem::file_size(path, ec); !ec && size > kMaxLabelsFileBytes)
    fail(path, "holds " + std::to_string(size) + " bytes, over the limit of 1 GiB for a table of labels");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open for reading");
  LabelsTable table;
  std::map<std::string, std::size_t> line_of_file;
  std::string line;
  TextLines lines(in, kMaxLabelsLineBytes);
  bool have_header = false;
  for (;;) {
    if (!lines.next(line)) {
      if (lines.too_long())
        fail(path, "line " + std::to_string(lines.number()) + " is longer than 1 MiB: a row names one image and its "
                   "labels or targets");
      break;
    }
    const std::size_t line_number = lines.number();
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line_number == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    if (trimmed(line).empty()) continue;
    const std::vector<std::string> fields = split_fields(path, line_number, line);
    if (!have_header) {
      check_names(path, line_number, fields);
      table.names.assign(fields.begin() + 1, fields.end());
      if (!expected_names.empty() && table.names != expected_names)
        fail(path, "line " + std::to_string(line_number) + ": the header '" +
                       quoted_in_message(header_of(table.names)) + "' differs from the training set's: expected '" +
                       quoted_in_message(header_of(expected_names)) + "'");
      have_header = true;
      continue;
    }
    const std::string where = "line " + std::to_string(line_number);
    if (fields.size() != table.names.size() + 1)
      fail(path, where + " has " + std::to_string(fields.size()) + " fields, the header " +
                     std::to_string(table.names.size() + 1));
    if (fields[0].empty()) fail(path, where + ": no file name in its first field");
    const std::string file = std::filesystem::path(fields[0]).lexically_normal().generic_string();
    if (auto [at, added] = line_of_file.emplace(file, line_number); !added)
      fail(path, where + " names the file '" + quoted_in_message(fields[0]) + "' of line " +
                     std::to_string(at->second) +
                     " again: one row an image");
    for (std::size_t c = 0; c < table.names.size(); ++c)
      table.values.push_back(
          parse_value(path, where + ", column '" + table.names[c] + "'", fields[c + 1]));
    table.files.push_back(file);
    table.lines.push_back(line_number);
  }
  if (!have_header) fail(path, "empty: expected the header 'file,<name>,<name>...' and one row an image");
  if (table.files.empty()) fail(path, "no rows after the header: expected one row an image");
  return table;
}

}  // namespace cnn::data
