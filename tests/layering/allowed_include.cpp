// Compiled with the engine's include path: the engine's own headers and those of the folders
// below it are there (the control for layering_refuses_an_upward_include).
#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/network.hpp>
#include "memory/buffer.hpp"
