#include "memory/trace.hpp"

#include <array>
#include <fstream>
#include <istream>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include <cnnengine/base/error.hpp>
#include "base/text_lines.hpp"

namespace cnn::memory {
namespace {

constexpr std::array<std::string_view, kCategoryCount> kCategoryTokens = {
    "parameters", "parameter_gradients", "optimizer_state", "activations",
    "workspace",  "data_staging",        "other"};

std::string_view op_token(TraceOp op) {
  switch (op) {
    case TraceOp::allocate: return "alloc";
    case TraceOp::deallocate: return "free";
    case TraceOp::failed: return "fail";
  }
  return "?";
}

TraceEvent parse_line(const std::string& line, const std::string& where) {
  std::istringstream fields(line);
  TraceEvent event;
  std::string op, category, extra;
  if (!(fields >> event.sequence >> op >> event.id >> event.bytes >> event.alignment >> category) ||
      (fields >> extra))
    throw DataError(where + ": expected 'seq op id bytes alignment category', got '" +
                    line + "'");
  if (op == "alloc") event.op = TraceOp::allocate;
  else if (op == "free") event.op = TraceOp::deallocate;
  else if (op == "fail") event.op = TraceOp::failed;
  else throw DataError(where + ": unknown operation '" + op + "' (alloc, free, fail)");
  bool known = false;
  for (std::size_t i = 0; i < kCategoryCount; ++i) {
    if (kCategoryTokens[i] == category) {
      event.category = static_cast<Category>(i);
      known = true;
    }
  }
  if (!known) throw DataError(where + ": unknown category '" + category + "'");
  return event;
}

}  // namespace

std::string_view category_token(Category category) {
  return kCategoryTokens[static_cast<std::size_t>(category)];
}

void write_trace_event(std::ostream& out, const TraceEvent& e) {
  out << e.sequence << ' ' << op_token(e.op) << ' ' << e.id << ' ' << e.bytes << ' '
      << e.alignment << ' ' << category_token(e.category) << '\n';
}

std::vector<TraceEvent> read_trace(std::istream& in, const std::string& source_name) {
  // An event's line is a few dozen bytes; a longer one is no trace's.
  constexpr std::size_t kMostLineBytes = 4096;
  std::vector<TraceEvent> events;
  std::string line;
  TextLines lines(in, kMostLineBytes);
  while (lines.next(line)) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    events.push_back(parse_line(line, source_name + ":" + std::to_string(lines.number())));
  }
  if (lines.too_long())
    throw DataError(source_name + ":" + std::to_string(lines.number()) + ": longer than " +
                    std::to_string(kMostLineBytes) + " bytes: not a line of a memory trace");
  return events;
}

std::vector<TraceEvent> read_trace(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw DataError("cannot open memory trace '" + path.string() + "'");
  return read_trace(in, path.string());
}

}  // namespace cnn::memory
