// See cores.h.
#include "pipebal/common/cores.h"

#include <sched.h>
#include <unistd.h>

namespace pipebal {

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;  // more than CPU_SETSIZE cores
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

int usable_cores() {
  const std::vector<int> cpus = allowed_cpus();
  if (!cpus.empty()) return static_cast<int>(cpus.size());
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 1;
}

}  // namespace pipebal
