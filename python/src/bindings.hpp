#pragma once
// The parts of the _cnnengine extension module, each binding one side of the library.
#include <nanobind/nanobind.h>

namespace cnn::python {

void bind_errors(nanobind::module_& m);   // cnn::Error and its kinds as Python exceptions
void bind_network(nanobind::module_& m);  // Network, presets and the layers' builders
void bind_data(nanobind::module_& m);     // numpy arrays and data folders as data sets
void bind_session(nanobind::module_& m);  // the model: fit, evaluate, predict, plan, save

}  // namespace cnn::python
