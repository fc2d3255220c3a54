// See cores.h.
#include "pipebal/common/cores.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "pipebal/common/cgroups.h"

namespace pipebal {
namespace {

std::optional<std::vector<int>>& remembered() {
  static std::optional<std::vector<int>> cpus;
  return cpus;
}

}  // namespace

// In a set as large as the kernel's CPU count needs (more than CPU_SETSIZE on machines of over
// 1024 possible CPUs).
std::vector<int> this_thread_cpus() {
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

namespace {

// The quota set on one cgroup's directory, in cores.
std::optional<double> quota_in(const std::string& dir, bool v2) {
  double quota = 0, period = 0;
  if (v2) {
    const std::optional<std::string> max = read_first_line(dir + "/cpu.max");  // "max 100000"
    if (!max) return std::nullopt;
    std::istringstream fields(*max);
    std::string limit;
    if (!(fields >> limit >> period) || limit == "max") return std::nullopt;
    quota = std::strtod(limit.c_str(), nullptr);
  } else {
    const auto quota_text = read_first_line(dir + "/cpu.cfs_quota_us");  // -1: none
    const auto period_text = read_first_line(dir + "/cpu.cfs_period_us");
    if (!quota_text || !period_text) return std::nullopt;
    quota = std::strtod(quota_text->c_str(), nullptr);
    period = std::strtod(period_text->c_str(), nullptr);
  }
  if (!(quota > 0) || !(period > 0)) return std::nullopt;
  return quota / period;
}

}  // namespace

std::optional<CpuQuota> cpu_quota(const std::string& root) {
  std::optional<CpuQuota> tightest;
  for (const CgroupDir& dir : cgroup_dirs("cpu", root)) {
    const std::optional<double> cores = quota_in(dir.path, dir.v2);
    if (cores && (!tightest || *cores < tightest->cores)) tightest = CpuQuota{*cores, dir.path};
  }
  return tightest;
}

int cores_within_quota(int affinity, std::optional<double> quota_cores) {
  const int cores = std::max(1, affinity);
  if (!quota_cores) return cores;
  // In double first: cpu.max allows quotas of far more cores than an int holds.
  return static_cast<int>(std::clamp(std::ceil(*quota_cores - 1e-9), 1.0, double(cores)));
}

std::vector<int> allowed_cpus() {
  if (remembered()) return *remembered();
  return this_thread_cpus();
}

namespace {

// How many cores this process may run on, and the quota where it is what sets that count.
struct UsableCores {
  int count = 1;
  std::optional<double> set_by_quota;
};

UsableCores find_usable_cores() {
  const std::vector<int> cpus = allowed_cpus();
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  const int affinity = !cpus.empty() ? static_cast<int>(cpus.size()) : static_cast<int>(online);
  const std::optional<CpuQuota> quota = cpu_quota();
  if (!quota) return {cores_within_quota(affinity, std::nullopt), std::nullopt};
  const bool sets_it = std::ceil(quota->cores - 1e-9) <= affinity;
  return {cores_within_quota(affinity, quota->cores),
          sets_it ? std::optional<double>(quota->cores) : std::nullopt};
}

}  // namespace

int usable_cores() {
  return find_usable_cores().count;
}

std::string usable_cores_text() {
  const UsableCores usable = find_usable_cores();
  const std::string counted = fmt::format("{} core{}", usable.count, usable.count == 1 ? "" : "s");
  if (!usable.set_by_quota) return "the " + counted + " pipebal may run on";
  return fmt::format("the {} that pipebal's CPU quota of {:.2f} cores lets it run on", counted,
                     *usable.set_by_quota);
}

std::vector<std::vector<int>> physical_cores(const std::vector<int>& cpus,
                                             const std::string& root) {
  // Siblings list each other alike: the list itself names their core.
  std::vector<std::string> names;
  std::vector<std::vector<int>> cores;
  for (const int cpu : cpus) {
    const std::optional<std::string> siblings =
        read_first_line(root + "/sys/devices/system/cpu/cpu" + std::to_string(cpu) +
                        "/topology/thread_siblings_list");
    const std::string name = siblings ? *siblings : "alone " + std::to_string(cpu);
    const auto known = std::find(names.begin(), names.end(), name);
    if (known != names.end()) {
      cores[known - names.begin()].push_back(cpu);
    } else {
      names.push_back(name);
      cores.push_back({cpu});
    }
  }
  return cores;
}

void remember_startup_cores() {
  remembered() = this_thread_cpus();
}

}  // namespace pipebal
