#include "device_choice.hpp"

namespace cnn::app {

DeviceChoice select_device_for(const std::string& device_option, const DeviceRequest& request) {
  try {
    return select_device(request);
  } catch (const DeviceError& e) {
    throw DeviceError("--device " + device_option + ": " + e.what());
  }
}

}  // namespace cnn::app
