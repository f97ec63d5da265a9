// Compiled with the engine's include path, which holds only the folders below the engine: a
// layer's header is not on it. The test layering_refuses_an_upward_include expects this to fail.
#include "layers/conv2d.hpp"
