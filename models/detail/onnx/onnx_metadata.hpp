#pragma once
// What a user of an exported file needs to feed it, as the model's metadata_props (the keys are
// listed in models/onnx_export.hpp). Built only where ONNX is found.
#include <onnx/onnx_pb.h>

#include <cnnengine/engine/core/network.hpp>
#include <cnnengine/models/checkpoint.hpp>

namespace cnn {

// `classes`: the classes (segment: the output's channels) or the regression's targets; `fp16`:
// whether the weights and values are float16 (the key "precision"). Throws
// ConfigError when the class names are not one per class or target, or the normalisation's mean
// or std is neither one value nor one per input channel, or a std is not positive.
void write_onnx_metadata(onnx::ModelProto& model, const Network& network, const ModelDescription& description,
                         int classes, bool fp16);

}  // namespace cnn
