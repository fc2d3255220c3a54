// See thread_pinning.h.
#include "pipebal/common/thread_pinning.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>

#include "pipebal/common/cores.h"

namespace pipebal {
namespace {

// Beyond any kernel's CPU numbers (Linux's NR_CPUS is at most 8192).
constexpr int kMaxCpu = 1 << 20;

}  // namespace

void pin_this_thread(const std::vector<int>& cpus) {
  if (cpus.empty()) throw std::invalid_argument("pinning a thread to no CPU");
  const int highest = *std::max_element(cpus.begin(), cpus.end());
  if (highest >= kMaxCpu) {
    throw std::invalid_argument(fmt::format("pinning a thread to CPU {}", highest));
  }
  const int size = std::max(CPU_SETSIZE, highest + 1);
  const std::unique_ptr<cpu_set_t, void (*)(cpu_set_t*)> set(
      CPU_ALLOC(size), [](cpu_set_t* s) { CPU_FREE(s); });  // CPU_FREE is a macro
  if (set == nullptr) throw std::bad_alloc();
  const size_t bytes = CPU_ALLOC_SIZE(size);
  CPU_ZERO_S(bytes, set.get());
  for (int cpu : cpus) {
    if (cpu < 0) throw std::invalid_argument(fmt::format("pinning a thread to CPU {}", cpu));
    CPU_SET_S(static_cast<size_t>(cpu), bytes, set.get());
  }
  if (sched_setaffinity(0, bytes, set.get()) != 0) {
    throw std::system_error(errno, std::generic_category(),
                            fmt::format("pinning a thread to CPUs {}", fmt::join(cpus, ",")));
  }
}

ThreadPin::ThreadPin(const std::vector<int>& cpus) : before_(this_thread_cpus()) {
  pin_this_thread(cpus);
}

ThreadPin::~ThreadPin() {
  try {
    if (!before_.empty()) pin_this_thread(before_);
  } catch (const std::exception&) {
    // The CPUs it had cannot all be had back (the cpuset shrank meanwhile): it keeps its pin.
  }
}

std::vector<std::vector<int>> cores_for_groups(int groups, int per_group) {
  const std::vector<int> cpus = allowed_cpus();
  if (groups < 1 || per_group < 1) {
    throw std::invalid_argument(
        fmt::format("cores for {} groups of {} threads: both must be positive", groups, per_group));
  }
  if (static_cast<int64_t>(groups) * per_group > static_cast<int64_t>(cpus.size())) {
    throw std::invalid_argument(fmt::format(
        "{} device{} of {} thread{} each need {} cores of their own; this process may run on {}",
        groups, groups == 1 ? "" : "s", per_group, per_group == 1 ? "" : "s",
        static_cast<int64_t>(groups) * per_group, cpus.size()));
  }
  std::vector<std::vector<int>> blocks(static_cast<size_t>(groups));
  for (int g = 0; g < groups; ++g) {
    blocks[static_cast<size_t>(g)].assign(cpus.begin() + g * per_group,
                                          cpus.begin() + (g + 1) * per_group);
  }
  return blocks;
}

}  // namespace pipebal
