#pragma once
// What a test expects to be refused: the message of the E that `f` throws, or "" where it
// throws none (an exception of another type escapes, failing the test).
#include <functional>
#include <string>

namespace cnn::testing {

template <class E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

}  // namespace cnn::testing
