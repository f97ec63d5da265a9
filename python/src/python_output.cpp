#include "python_output.hpp"

#include <Python.h>

#include <iostream>
#include <memory>
#include <mutex>
#include <streambuf>
#include <string>

#include <nanobind/nanobind.h>

namespace nb = nanobind;

namespace cnn::python {
namespace {

// Lines to a Python stream's write(). The text is taken out under the buffer's lock and written
// after it is let go: a thread that holds the GIL and prints waits for no thread that waits for
// the GIL.
class ToPython final : public std::streambuf {
 public:
  explicit ToPython(nb::object stream) : stream_(std::move(stream)) {}
  ~ToPython() override {
    sync();
    stream_.reset();  // with the GIL: the last PythonOutput is destroyed with it held
  }

 protected:
  int_type overflow(int_type c) override {
    if (c == traits_type::eof()) return traits_type::not_eof(c);
    const char one = traits_type::to_char_type(c);
    xsputn(&one, 1);
    return c;
  }
  std::streamsize xsputn(const char* text, std::streamsize count) override {
    std::string ready;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      line_.append(text, static_cast<std::size_t>(count));
      const std::size_t end = line_.find_last_of("\n\r");
      if (end == std::string::npos) return count;
      ready = line_.substr(0, end + 1);
      line_.erase(0, end + 1);
    }
    write(ready);
    return count;
  }
  int sync() override {
    std::string ready;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      ready.swap(line_);
    }
    write(ready);
    return 0;
  }

 private:
  // Python's write and flush; an error there (a closed stream) is dropped: printing must not
  // stop a run.
  void write(const std::string& text) {
    if (text.empty()) return;
    nb::gil_scoped_acquire locked;
    PyObject* str = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "backslashreplace");
    if (str != nullptr) {
      Py_XDECREF(PyObject_CallMethod(stream_.ptr(), "write", "O", str));
      Py_DECREF(str);
      Py_XDECREF(PyObject_CallMethod(stream_.ptr(), "flush", nullptr));
    }
    PyErr_Clear();
  }

  nb::object stream_;
  std::mutex mutex_;
  std::string line_;
};

std::mutex redirection_mutex;
int redirections = 0;
std::unique_ptr<ToPython> buffer;
std::streambuf* own_buffer = nullptr;

}  // namespace

PythonOutput::PythonOutput() {
  const std::lock_guard<std::mutex> lock(redirection_mutex);
  if (redirections++ > 0) return;
  nb::object stream = nb::module_::import_("sys").attr("stdout");
  if (stream.is_none()) return;  // no stdout (pythonw): the engine's own stays
  buffer = std::make_unique<ToPython>(std::move(stream));
  std::cout.flush();
  own_buffer = std::cout.rdbuf(buffer.get());
}

PythonOutput::~PythonOutput() {
  const std::lock_guard<std::mutex> lock(redirection_mutex);
  if (--redirections > 0 || !buffer) return;
  std::cout.flush();
  std::cout.rdbuf(own_buffer);
  buffer.reset();
}

}  // namespace cnn::python
