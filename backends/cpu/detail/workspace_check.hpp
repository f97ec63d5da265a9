#pragma once
// The check a CPU kernel makes of the workspace it is handed: at least the floats it asked for,
// else a logic_error naming the call and both sizes.
#include <cstddef>
#include <stdexcept>
#include <string>

#include <cnnengine/engine/core/backend.hpp>

namespace cnn::cpu {

inline void require_workspace_floats(const Workspace& ws, std::size_t floats, const char* what) {
  if (ws.bytes < floats * sizeof(float))
    throw std::logic_error(std::string(what) + ": workspace of " + std::to_string(ws.bytes) + " bytes, " +
                           std::to_string(floats * sizeof(float)) + " needed");
}

}  // namespace cnn::cpu
