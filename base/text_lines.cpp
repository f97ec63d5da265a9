#include "base/text_lines.hpp"

namespace cnn {

bool TextLines::next(std::string& line) {
  line.clear();
  if (too_long_) return false;
  std::streambuf* buffer = in_.rdbuf();
  if (!buffer) return false;
  bool any = false;
  for (int c = buffer->sbumpc(); c != std::char_traits<char>::eof(); c = buffer->sbumpc()) {
    any = true;
    if (c == '\n') break;
    if (line.size() == most_) {
      too_long_ = true;
      ++number_;
      return false;
    }
    line.push_back(static_cast<char>(c));
  }
  if (!any) return false;
  ++number_;
  return true;
}

}  // namespace cnn
