// See cores.h.
#include "pipebal/common/cores.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>

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

std::optional<std::string> read_first_line(const std::string& path) {
  std::ifstream file(path);
  std::string line;
  if (!file || !std::getline(file, line)) return std::nullopt;
  return line;
}

std::vector<std::string> split(const std::string& text, char by) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, by)) parts.push_back(part);
  return parts;
}

// mountinfo writes a space, tab, newline or backslash in a path as a backslash and three octal
// digits.
std::string unescape(const std::string& field) {
  const auto octal = [&field](size_t at) { return field[at] >= '0' && field[at] <= '7'; };
  std::string text;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
      text += static_cast<char>(std::stoi(field.substr(i + 1, 3), nullptr, 8));
      i += 3;
    } else {
      text += field[i];
    }
  }
  return text;
}

// A hierarchy that can hold a CPU quota: cgroup v2's, or v1's with the cpu controller.
struct CpuHierarchy {
  bool v2 = false;
  std::string root;         // the part of the hierarchy mounted
  std::string mount_point;  // where
};

std::vector<CpuHierarchy> cpu_hierarchies(const std::string& mountinfo_path) {
  std::vector<CpuHierarchy> found;
  std::ifstream mountinfo(mountinfo_path);
  for (std::string line; std::getline(mountinfo, line);) {
    // id parent major:minor root mount-point options [optional fields] - type source super-options
    const std::vector<std::string> fields = split(line, ' ');
    const auto dash = std::find(fields.begin(), fields.end(), "-");
    if (fields.size() < 5 || dash == fields.end() || fields.end() - dash < 4) continue;
    const std::string& type = *(dash + 1);
    const std::vector<std::string> options = split(*(dash + 3), ',');
    const bool v1_cpu =
        type == "cgroup" && std::find(options.begin(), options.end(), "cpu") != options.end();
    if (type != "cgroup2" && !v1_cpu) continue;
    found.push_back({type == "cgroup2", unescape(fields[3]), unescape(fields[4])});
  }
  return found;
}

// This process's cgroup in the v2 hierarchy ("0::/path") or in v1's with the cpu controller
// ("4:cpu,cpuacct:/path"), from /proc/self/cgroup.
std::optional<std::string> cgroup_path(const std::string& cgroup_file, bool v2) {
  std::ifstream file(cgroup_file);
  for (std::string line; std::getline(file, line);) {
    const size_t first = line.find(':');
    const size_t second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::vector<std::string> names = split(controllers, ',');
    const bool wanted = v2 ? line.compare(0, first, "0") == 0 && controllers.empty()
                           : std::find(names.begin(), names.end(), "cpu") != names.end();
    if (wanted) return line.substr(second + 1);
  }
  return std::nullopt;
}

// The cgroup at `path` as a path below `root`, the part of its hierarchy mounted: ("/a/b", "/")
// gives "/a/b", ("/docker/ID/x", "/docker/ID") "/x", and ("/docker/ID", "/docker/ID") "", the
// mount point itself (a container's own cgroup mounted as its root). nullopt for a cgroup outside
// the part mounted (another cgroup namespace's): its quota cannot be read, and another's is not
// its own.
std::optional<std::string> path_below(const std::string& path, const std::string& root) {
  if (root == "/") return path == "/" ? "" : path;
  const bool inside = path.compare(0, root.size(), root) == 0 &&
                      (path.size() == root.size() || path[root.size()] == '/');
  if (!inside) return std::nullopt;
  return path.substr(root.size());
}

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
  for (const CpuHierarchy& hierarchy : cpu_hierarchies(root + "/proc/self/mountinfo")) {
    const std::optional<std::string> path = cgroup_path(root + "/proc/self/cgroup", hierarchy.v2);
    if (!path) continue;
    // From its own cgroup up to the part mounted: a parent's quota binds its children too.
    const std::optional<std::string> inside = path_below(*path, hierarchy.root);
    if (!inside) continue;
    std::string below = *inside;
    while (true) {
      const std::string dir = root + hierarchy.mount_point + below;
      const std::optional<double> cores = quota_in(dir, hierarchy.v2);
      if (cores && (!tightest || *cores < tightest->cores)) tightest = CpuQuota{*cores, dir};
      const size_t slash = below.find_last_of('/');
      if (below.empty() || slash == std::string::npos) break;
      below.resize(slash);
    }
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
  return thread_affinity();
}

int usable_cores() {
  const std::vector<int> cpus = allowed_cpus();
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  const int affinity = !cpus.empty() ? static_cast<int>(cpus.size()) : static_cast<int>(online);
  const std::optional<CpuQuota> quota = cpu_quota();
  return cores_within_quota(affinity, quota ? std::optional<double>(quota->cores) : std::nullopt);
}

std::string usable_cores_text() {
  const int cores = usable_cores();
  const std::optional<CpuQuota> quota = cpu_quota();
  const std::string counted = fmt::format("{} core{}", cores, cores == 1 ? "" : "s");
  if (!quota || cores_within_quota(std::numeric_limits<int>::max(), quota->cores) > cores) {
    return "the " + counted + " pipebal may run on";
  }
  return fmt::format("the {} that pipebal's CPU quota of {:.2f} cores lets it run on", counted,
                     quota->cores);
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
  remembered() = thread_affinity();
}

}  // namespace pipebal
