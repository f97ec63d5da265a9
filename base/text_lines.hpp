#pragma once
// Text read a line at a time with a bound on each line: a file with no line break, or a line of
// hundreds of megabytes, is refused after `most` bytes instead of read whole into one string.
// Every text file cnnengine reads whose size it does not bound otherwise goes through it.
#include <cstddef>
#include <istream>
#include <string>

namespace cnn {

class TextLines {
 public:
  TextLines(std::istream& in, std::size_t most_line_bytes) : in_(in), most_(most_line_bytes) {}

  // The next line, without its '\n' (a '\r' before it is kept): false at the end of the text.
  // A line longer than the bound stops the reading: next() returns false and too_long() is true.
  bool next(std::string& line);
  bool too_long() const { return too_long_; }
  std::size_t number() const { return number_; }  // of the line last read, from 1
  std::size_t most_line_bytes() const { return most_; }

 private:
  std::istream& in_;
  std::size_t most_;
  std::size_t number_ = 0;
  bool too_long_ = false;
};

}  // namespace cnn
