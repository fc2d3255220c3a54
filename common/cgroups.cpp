// See cgroups.h.
#include "pipebal/common/cgroups.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "pipebal/common/format_bytes.h"

namespace pipebal {
namespace {

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

// A hierarchy that can hold a controller's limits: cgroup v2's, or v1's with that controller.
struct Hierarchy {
  bool v2 = false;
  std::string root;         // the part of the hierarchy mounted
  std::string mount_point;  // where
};

std::vector<Hierarchy> hierarchies(const std::string& mountinfo_path,
                                   const std::string& controller) {
  std::vector<Hierarchy> found;
  std::ifstream mountinfo(mountinfo_path);
  for (std::string line; std::getline(mountinfo, line);) {
    // id parent major:minor root mount-point options [optional fields] - type source super-options
    const std::vector<std::string> fields = split(line, ' ');
    const auto dash = std::find(fields.begin(), fields.end(), "-");
    if (fields.size() < 5 || dash == fields.end() || fields.end() - dash < 4) continue;
    const std::string& type = *(dash + 1);
    const std::vector<std::string> options = split(*(dash + 3), ',');
    const bool v1_with_it =
        type == "cgroup" && std::find(options.begin(), options.end(), controller) != options.end();
    if (type != "cgroup2" && !v1_with_it) continue;
    found.push_back({type == "cgroup2", unescape(fields[3]), unescape(fields[4])});
  }
  return found;
}

// This process's cgroup in the v2 hierarchy ("0::/path") or in v1's with `controller`
// ("4:cpu,cpuacct:/path"), from /proc/self/cgroup.
std::optional<std::string> cgroup_path(const std::string& cgroup_file, bool v2,
                                       const std::string& controller) {
  std::ifstream file(cgroup_file);
  for (std::string line; std::getline(file, line);) {
    const size_t first = line.find(':');
    const size_t second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::vector<std::string> names = split(controllers, ',');
    const bool wanted = v2 ? line.compare(0, first, "0") == 0 && controllers.empty()
                           : std::find(names.begin(), names.end(), controller) != names.end();
    if (wanted) return line.substr(second + 1);
  }
  return std::nullopt;
}

// The cgroup at `path` as a path below `root`, the part of its hierarchy mounted: ("/a/b", "/")
// gives "/a/b", ("/docker/ID/x", "/docker/ID") "/x", and ("/docker/ID", "/docker/ID") "", the
// mount point itself (a container's own cgroup mounted as its root). nullopt for a cgroup outside
// the part mounted (another cgroup namespace's): its limits cannot be read, and the mount
// point's are another's.
std::optional<std::string> path_below(const std::string& path, const std::string& root) {
  if (root == "/") return path == "/" ? "" : path;
  const bool inside = path.compare(0, root.size(), root) == 0 &&
                      (path.size() == root.size() || path[root.size()] == '/');
  if (!inside) return std::nullopt;
  return path.substr(root.size());
}

}  // namespace

std::optional<std::string> read_first_line(const std::string& path) {
  std::ifstream file(path);
  std::string line;
  if (!file || !std::getline(file, line)) return std::nullopt;
  return line;
}

std::vector<CgroupDir> cgroup_dirs(const std::string& controller, const std::string& root) {
  std::vector<CgroupDir> dirs;
  for (const Hierarchy& hierarchy : hierarchies(root + "/proc/self/mountinfo", controller)) {
    const std::optional<std::string> path =
        cgroup_path(root + "/proc/self/cgroup", hierarchy.v2, controller);
    if (!path) continue;
    const std::optional<std::string> inside = path_below(*path, hierarchy.root);
    if (!inside) continue;
    std::string below = *inside;
    while (true) {
      dirs.push_back({root + hierarchy.mount_point + below, hierarchy.v2});
      const size_t slash = below.find_last_of('/');
      if (below.empty() || slash == std::string::npos) break;
      below.resize(slash);
    }
  }
  return dirs;
}

std::optional<double> cgroup_memory_limit(const std::string& root) {
  // v1 writes "no limit" as the largest multiple of the page size below 2^63.
  constexpr double kNoLimit = 4.6e18;
  std::optional<double> tightest;
  for (const CgroupDir& dir : cgroup_dirs("memory", root)) {
    const std::optional<std::string> text =
        read_first_line(dir.path + (dir.v2 ? "/memory.max" : "/memory.limit_in_bytes"));
    if (!text || *text == "max") continue;
    char* end = nullptr;
    const double bytes = std::strtod(text->c_str(), &end);
    if (end == text->c_str() || !(bytes > 0) || bytes >= kNoLimit) continue;
    if (!tightest || bytes < *tightest) tightest = bytes;
  }
  return tightest;
}

double usable_memory_bytes() {
  const double physical =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  const std::optional<double> limit = cgroup_memory_limit();
  if (limit && (!(physical > 0) || *limit < physical)) return *limit;
  return physical > 0 ? physical : 0;
}

double swap_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.rfind("SwapTotal:", 0) != 0) continue;
    std::istringstream fields(line.substr(10));
    double kib = 0;
    return fields >> kib ? kib * 1024 : 0;
  }
  return 0;
}

std::string usable_memory_text() {
  const double bytes = usable_memory_bytes();
  const std::optional<double> limit = cgroup_memory_limit();
  if (limit && *limit == bytes) {
    return "the memory pipebal's control group may use (" + format_bytes(bytes) + ")";
  }
  return "this machine's memory (" + format_bytes(bytes) + ")";
}

}  // namespace pipebal
