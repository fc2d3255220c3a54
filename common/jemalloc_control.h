// jemalloc's control interface, where jemalloc is this process's malloc: linked into the program
// (pipebal's own, workflow/jemalloc_conf.cpp) or preloaded. Asked of the process at run time, not
// of a header, so that no library of pipebal's needs jemalloc to build or link.
#pragma once

#include <cstddef>

namespace pipebal {

// jemalloc's mallctl(name, old value, its size, new value, its size): 0 on success.
using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);

// mallctl when jemalloc serves this process; null otherwise.
Mallctl jemalloc_mallctl();

}  // namespace pipebal
