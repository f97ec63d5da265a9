#pragma once
// The device a command runs on, from --device and the options that tune it.
#include <cnnengine/cnnengine.hpp>

namespace cnn::app {

// select_device(request), its refusal named after the option: "--device cuda: ...".
DeviceChoice select_device_for(const std::string& device_option, const DeviceRequest& request);

}  // namespace cnn::app
