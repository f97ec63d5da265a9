#pragma once
// The commands that use a saved model (--load FILE): --evaluate it on a data set's test split,
// --predict the classes of image files, --export-onnx it. None trains; none needs --model.
#include <string>

#include <cnnengine/cnnengine.hpp>
#include "options.hpp"

namespace cnn::app {

// Each returns the exit code: 0, or 1 when an image could not be classified (--predict).
int evaluate_command(Options o);
int predict_command(const Options& o);
int export_command(const Options& o);

// A UsageError, before anything runs, where this build cannot export to ONNX.
void require_onnx_export();
// How --export-onnx writes (--export-onnx-precision), and what a written file holds, for the
// message after writing it.
OnnxExportOptions onnx_export_options(const Options& o);
std::string describe_onnx_export(const Network& network, const OnnxExportOptions& options);
// Says what the export changed of the weights (fp16: those beyond half's range), on stderr.
void warn_of_saturation(const OnnxExportReport& report);

}  // namespace cnn::app
