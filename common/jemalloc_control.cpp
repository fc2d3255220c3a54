// See jemalloc_control.h.
#include "pipebal/common/jemalloc_control.h"

#include <dlfcn.h>

namespace pipebal {

Mallctl jemalloc_mallctl() {
  static const auto mallctl = reinterpret_cast<Mallctl>(dlsym(RTLD_DEFAULT, "mallctl"));
  return mallctl;
}

}  // namespace pipebal
