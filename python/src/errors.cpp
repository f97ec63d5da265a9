// The library's errors as the Python exceptions of cnnengine.errors (pure Python, so that each
// can derive from the built-in exception a Python program expects: ValueError for options,
// shapes and data, MemoryError for the budget's refusals). The package hands its classes in at
// import (_set_error_classes); until then every error is a RuntimeError.
#include <Python.h>

#include <exception>
#include <map>
#include <string_view>
#include <string>

#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/train/training_diverged.hpp>
#include <cnnengine/memory/out_of_memory.hpp>
#include "bindings.hpp"

namespace nb = nanobind;

namespace cnn::python {
namespace {

nb::dict& error_classes() {
  static nb::dict* classes = new nb::dict();  // never destroyed: the interpreter may be gone by then
  return *classes;
}

// The Python keyword of an option the library names by its field (OptionError::field).
std::string keyword_of(const std::string& field) {
  static const std::map<std::string, std::string> keywords = {
      {"batch", "batch_size"},         {"save", "checkpoint"},          {"early_stop", "patience"},
      {"keep_best", "save_best_only"}, {"restore_best", "restore_best_weights"},
      {"augment_flip", "flip"},        {"augment_crop_padding", "crop_padding"},
      {"learning_rate", "lr"}};
  const auto found = keywords.find(field);
  return found == keywords.end() ? field : found->second;
}

// The message in a Python program's words: the library's options structs' fields
// ("FitOptions::save", "loading.augment_flip", `early_stop`) as the keywords that set them.
std::string in_python_words(const std::string& message) {
  static const char* const prefixes[] = {"FitOptions::", "TrainerOptions::", "LoaderOptions::", "loading."};
  auto word_char = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; };
  std::string out;
  std::size_t i = 0;
  while (i < message.size()) {
    bool replaced = false;
    for (const char* prefix : prefixes) {
      const std::string_view p(prefix);
      if (message.compare(i, p.size(), p) != 0) continue;
      std::size_t end = i + p.size();
      while (end < message.size() && word_char(message[end])) ++end;
      if (end == i + p.size()) continue;
      out += keyword_of(message.substr(i + p.size(), end - i - p.size()));
      i = end;
      replaced = true;
      break;
    }
    if (replaced) continue;
    if (message[i] == '`') {  // a field quoted in backticks
      const std::size_t close = message.find('`', i + 1);
      if (close != std::string::npos) {
        out += keyword_of(message.substr(i + 1, close - i - 1));
        i = close + 1;
        continue;
      }
    }
    out += message[i++];
  }
  return out;
}

void raise(const char* kind, const std::string& message) {
  nb::dict& classes = error_classes();
  PyObject* type = classes.contains(kind) ? classes[kind].ptr() : PyExc_RuntimeError;
  // A message may quote bytes that are not UTF-8 (a corrupt file's text): kept, escaped.
  const std::string text = in_python_words(message);
  PyObject* str = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "backslashreplace");
  if (str == nullptr) {
    PyErr_Clear();
    PyErr_SetString(type, "(an error whose message cannot be shown)");
    return;
  }
  PyErr_SetObject(type, str);
  Py_DECREF(str);
}

void raise(const char* kind, const std::exception& e) { raise(kind, std::string(e.what())); }

void translate(const std::exception_ptr& error, void*) {
  try {
    std::rethrow_exception(error);
  } catch (const OptionError& e) {
    // The message names the option in words; a Python program gave it as a keyword.
    const std::string keyword = keyword_of(e.field());
    const std::string message = e.what();
    raise("ConfigError", message.rfind(keyword, 0) == 0 ? message : keyword + ": " + message);
  } catch (const BudgetTooSmall& e) {
    raise("BudgetTooSmall", e);
  } catch (const memory::OutOfMemory& e) {
    raise("OutOfMemory", e);
  } catch (const ConfigError& e) {
    raise("ConfigError", e);
  } catch (const ShapeError& e) {
    raise("ShapeError", e);
  } catch (const DataError& e) {
    raise("DataError", e);
  } catch (const CheckpointError& e) {
    raise("CheckpointError", e);
  } catch (const DeviceError& e) {
    raise("DeviceError", e);
  } catch (const TrainingDiverged& e) {
    raise("TrainingDiverged", e);
  } catch (const Error& e) {
    raise("Error", e);
  }
}

}  // namespace

void bind_errors(nb::module_& m) {
  nb::register_exception_translator(translate);
  m.def("_set_error_classes", [](nb::dict classes) { error_classes() = classes; },
        "Called once by the cnnengine package with its exception classes by kind.");
}

}  // namespace cnn::python
