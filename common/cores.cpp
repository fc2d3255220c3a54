// See cores.h.
#include "pipebal/common/cores.h"

#include <sched.h>
#include <unistd.h>

#include <memory>
#include <optional>

namespace pipebal {
namespace {

std::optional<std::vector<int>>& remembered() {
  static std::optional<std::vector<int>> cpus;
  return cpus;
}

// The calling thread's affinity, in a set as large as the kernel's CPU count needs (more than
// CPU_SETSIZE on machines of over 1024 possible CPUs).
std::vector<int> thread_affinity() {
  for (int size = CPU_SETSIZE; size <= (1 << 20); size *= 2) {
    const std::unique_ptr<cpu_set_t, void (*)(cpu_set_t*)> set(
        CPU_ALLOC(size), [](cpu_set_t* s) { CPU_FREE(s); });  // CPU_FREE is a macro
    if (set == nullptr) return {};
    const size_t bytes = CPU_ALLOC_SIZE(size);
    CPU_ZERO_S(bytes, set.get());
    if (sched_getaffinity(0, bytes, set.get()) != 0) continue;  // EINVAL: a larger set
    std::vector<int> cpus;
    for (int cpu = 0; cpu < size; ++cpu) {
      if (CPU_ISSET_S(cpu, bytes, set.get())) cpus.push_back(cpu);
    }
    return cpus;
  }
  return {};
}

}  // namespace

std::vector<int> allowed_cpus() {
  if (remembered()) return *remembered();
  return thread_affinity();
}

int usable_cores() {
  const std::vector<int> cpus = allowed_cpus();
  if (!cpus.empty()) return static_cast<int>(cpus.size());
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 1;
}

void remember_startup_cores() {
  remembered() = thread_affinity();
}

}  // namespace pipebal
