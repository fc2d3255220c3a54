// See address_space.h.
#include "pipebal/common/address_space.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "pipebal/common/format_bytes.h"

namespace pipebal {

int64_t blas_buffer_bytes(int threads) {
  constexpr int64_t kBufferBytes = int64_t{128} << 20;  // OpenBLAS's BUFFER_SIZE on x86-64
  return kBufferBytes * threads;
}

int64_t mapped_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    long long kib = 0;
    if (std::sscanf(line.c_str(), "VmSize: %lld kB", &kib) == 1) return kib * 1024;
  }
  return 0;
}

namespace {

bool openblas_loaded() {
  for (const char* name : {"libopenblas.so.0", "libopenblas.so"}) {
    if (void* library = ::dlopen(name, RTLD_LAZY | RTLD_NOLOAD)) {
      ::dlclose(library);
      return true;
    }
  }
  return false;
}

}  // namespace

void check_address_space_room(int threads) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  if (!openblas_loaded()) return;
  const auto needed = static_cast<size_t>(blas_buffer_bytes(threads));
  // A reservation of no memory, only addresses: it counts against the limit as the buffers will.
  void* room =
      ::mmap(nullptr, needed, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (room != MAP_FAILED) {
    ::munmap(room, needed);
    return;
  }
  const int64_t mapped = mapped_bytes();
  throw std::invalid_argument(fmt::format(
      "the address-space limit (ulimit -v) of {} leaves less than the {} OpenBLAS maps for {} "
      "threads beyond the {} pipebal maps at its start, and OpenBLAS would wait for it forever: "
      "raise the limit to more than {}, or lift it",
      format_bytes(static_cast<double>(limit.rlim_cur)), format_bytes(static_cast<double>(needed)),
      threads, format_bytes(static_cast<double>(mapped)),
      format_bytes(static_cast<double>(mapped + static_cast<int64_t>(needed)))));
}

}  // namespace pipebal
