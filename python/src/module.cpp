// The _cnnengine extension module: the library's bindings, which the cnnengine package wraps
// in its Keras-style API (python/cnnengine).
#include "bindings.hpp"

NB_MODULE(_cnnengine, m) {
  m.doc() = "cnnengine's C++ library; use the cnnengine package, which wraps it.";
  cnn::python::bind_errors(m);
  cnn::python::bind_network(m);
  cnn::python::bind_data(m);
  cnn::python::bind_session(m);
}
