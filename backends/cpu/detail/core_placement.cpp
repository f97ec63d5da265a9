#include "backends/cpu/detail/core_placement.hpp"

#if defined(__linux__)
#include <sched.h>
#endif

namespace cnn::cpu {

#if defined(__linux__)

int current_core() { return sched_getcpu(); }

bool move_off_core(int core) {
  cpu_set_t allowed;
  if (core < 0 || core >= CPU_SETSIZE || sched_getaffinity(0, sizeof allowed, &allowed) != 0 ||
      !CPU_ISSET(core, &allowed) || CPU_COUNT(&allowed) < 2)
    return false;
  cpu_set_t elsewhere = allowed;
  CPU_CLR(core, &elsewhere);
  // Leaving `core` out of the mask moves the thread before the call returns; putting the mask
  // back leaves it where it now is.
  if (sched_setaffinity(0, sizeof elsewhere, &elsewhere) != 0) return false;
  sched_setaffinity(0, sizeof allowed, &allowed);
  return true;
}

#else

int current_core() { return -1; }
bool move_off_core(int) { return false; }

#endif

}  // namespace cnn::cpu
