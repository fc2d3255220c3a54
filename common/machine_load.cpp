// See machine_load.h.
#include "pipebal/common/machine_load.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipebal/common/cores.h"

namespace pipebal {
namespace {

// Beyond these a value read back is not one pipebal wrote.
constexpr double kMostCores = 1 << 16;
constexpr double kMostSeconds = 1e9;

// This process's CPU time, and its children's that it has waited for (the ranks `validate
// --processes` starts are its own work).
double own_cpu_seconds() {
  const auto seconds = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
  double total = 0;
  for (const int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    rusage usage{};
    if (getrusage(who, &usage) == 0) total += seconds(usage.ru_utime) + seconds(usage.ru_stime);
  }
  return total;
}

// A kernel's text file (/proc, cgroupfs: sized 0, read to its end); nullopt where it cannot be
// opened.
std::optional<std::string> read_kernel_file(const std::string& path) {
  std::ifstream file(path);
  if (!file) return std::nullopt;
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::optional<MachineCpuTimes> read_cpu_times(const std::vector<int>& cpus) {
  const std::optional<std::string> text = read_kernel_file("/proc/stat");
  if (!text) return std::nullopt;
  const long ticks = sysconf(_SC_CLK_TCK);
  return parse_proc_stat(*text, ticks > 0 ? double(ticks) : 100.0, cpus);
}

std::optional<QuotaPeriods> read_quota_periods(const std::optional<CpuQuota>& quota) {
  if (!quota) return std::nullopt;
  const std::optional<std::string> text = read_kernel_file(quota->cgroup_dir + "/cpu.stat");
  if (!text) return std::nullopt;
  return parse_cpu_stat(*text);
}

// The number at `key` of `doc` into `to` when it is one from 0 to `most` (NaN is not).
bool read_number(const nlohmann::json& doc, const char* key, double most, double& to) {
  const auto field = doc.find(key);
  if (field == doc.end() || !field->is_number()) return false;
  to = field->get<double>();
  return to >= 0 && to <= most;
}

// The load of two sets of cores apart, over the longer of their intervals: the tighter quota, the
// more held back (cores apart on one host are likely one container's, under one quota).
MachineLoad add_apart(const std::optional<MachineLoad>& a, const MachineLoad& b) {
  if (!a) return b;
  MachineLoad both = *a;
  both.seconds = std::max(both.seconds, b.seconds);
  both.cores += b.cores;
  both.others_cores += b.others_cores;
  both.steal_cores += b.steal_cores;
  if (!both.quota_cores || (b.quota_cores && *b.quota_cores < *both.quota_cores)) {
    both.quota_cores = b.quota_cores;
  }
  both.throttled = std::max(a->throttled, b.throttled);
  return both;
}

}  // namespace

std::optional<MachineCpuTimes> parse_proc_stat(const std::string& text, double ticks_per_second,
                                               const std::vector<int>& cpus) {
  // The line of the machine ("cpu") or of each core wanted ("cpu0", "cpu1"...).
  const auto wanted = [&](const std::string& name) {
    if (name.compare(0, 3, "cpu") != 0) return false;
    if (cpus.empty()) return name == "cpu";
    const std::string number = name.substr(3);
    if (number.empty() || number.size() > 6 ||
        number.find_first_not_of("0123456789") != std::string::npos) {
      return false;
    }
    return std::find(cpus.begin(), cpus.end(), std::stoi(number)) != cpus.end();
  };
  std::optional<MachineCpuTimes> times;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string name;
    fields >> name;
    if (!wanted(name)) continue;
    // user nice system idle iowait irq softirq steal (guest and guest_nice are in user, nice)
    double value[8] = {};
    int read = 0;
    while (read < 8 && fields >> value[read]) ++read;
    if (read < 7) return std::nullopt;
    if (!times) times = MachineCpuTimes{};
    times->busy_s += (value[0] + value[1] + value[2] + value[5] + value[6]) / ticks_per_second;
    times->steal_s += value[7] / ticks_per_second;
  }
  return times;
}

std::optional<QuotaPeriods> parse_cpu_stat(const std::string& text) {
  std::optional<double> periods, throttled;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string name;
    double value = 0;
    if (!(fields >> name >> value)) continue;
    if (name == "nr_periods") periods = value;
    if (name == "nr_throttled") throttled = value;
  }
  if (!periods || !throttled) return std::nullopt;
  return QuotaPeriods{*periods, *throttled};
}

bool MachineLoad::busy() const {
  if (seconds <= 0) return false;
  // The kernel counts the machine's time in ticks (100 a second), and the five fields summed
  // each round apart: over a short interval a few ticks either way are a sizeable share of a core.
  const double tick_margin = 0.05 / seconds;
  return others_cores + steal_cores >= std::max(0.25, 0.05 * cores) + tick_margin;
}

MachineLoad machine_load_between(const MachineCpuTimes& start, const MachineCpuTimes& end,
                                 double own_cpu_s, double seconds, int cores) {
  MachineLoad load;
  load.seconds = seconds;
  load.cores = cores;
  if (seconds <= 0) return load;
  // The kernel counts in ticks, this process's own time finer: a short interval may come out a
  // little below zero.
  load.others_cores = std::max(0.0, (end.busy_s - start.busy_s - own_cpu_s) / seconds);
  load.steal_cores = std::max(0.0, (end.steal_s - start.steal_s) / seconds);
  return load;
}

bool MachineLoad::held_back() const {
  return quota_cores && throttled >= 0.1;
}

MachineLoad combine(const MachineLoad& a, const MachineLoad& b) {
  MachineLoad both;
  both.seconds = a.seconds + b.seconds;
  both.cores = std::max(a.cores, b.cores);
  both.quota_cores = a.quota_cores ? a.quota_cores : b.quota_cores;
  if (both.seconds <= 0) return both;
  both.others_cores = (a.others_cores * a.seconds + b.others_cores * b.seconds) / both.seconds;
  both.steal_cores = (a.steal_cores * a.seconds + b.steal_cores * b.seconds) / both.seconds;
  both.throttled = (a.throttled * a.seconds + b.throttled * b.seconds) / both.seconds;
  return both;
}

std::optional<MachineLoad> combine_loads(const std::vector<std::optional<MachineLoad>>& loads) {
  std::optional<MachineLoad> all;
  for (const std::optional<MachineLoad>& load : loads) {
    if (load) all = all ? combine(*all, *load) : *load;
  }
  return all;
}

std::string describe_load(const MachineLoad& load) {
  std::string text = fmt::format(
      "other processes took {:.2f} of the {} core{} pipebal runs on, on average over {:.1f} s",
      load.others_cores, load.cores, load.cores == 1 ? "" : "s", load.seconds);
  if (load.steal_cores >= 0.005) {
    text += fmt::format(" (and the hypervisor {:.2f} for other guests)", load.steal_cores);
  }
  return text;
}

std::string describe_throttling(const MachineLoad& load) {
  if (!load.quota_cores) return "";
  return fmt::format(
      "pipebal's CPU quota of {:.2f} core{} held it back in {:.0f}% of the quota's periods over "
      "{:.1f} s",
      *load.quota_cores, *load.quota_cores == 1 ? "" : "s", 100 * load.throttled, load.seconds);
}

nlohmann::json machine_load_to_json(const MachineLoad& load) {
  const auto rounded = [](double x) { return std::round(x * 1000) / 1000; };
  return {{"seconds", rounded(load.seconds)},
          {"cores", load.cores},
          {"others_cores", rounded(load.others_cores)},
          {"steal_cores", rounded(load.steal_cores)},
          {"quota_cores", load.quota_cores ? nlohmann::json(rounded(*load.quota_cores)) : nullptr},
          {"throttled", rounded(load.throttled)}};
}

std::optional<MachineLoad> machine_load_from_json(const nlohmann::json& doc) {
  if (!doc.is_object()) return std::nullopt;
  MachineLoad load;
  const auto number = [&doc](const char* key, double most, double& to) {
    return read_number(doc, key, most, to);
  };
  double cores = 0;
  if (!number("seconds", kMostSeconds, load.seconds) || !number("cores", kMostCores, cores) ||
      !number("others_cores", kMostCores, load.others_cores) ||
      !number("steal_cores", kMostCores, load.steal_cores)) {
    return std::nullopt;
  }
  load.cores = static_cast<int>(cores);
  // Recorded since quotas are read; absent before.
  const auto quota = doc.find("quota_cores");
  if (quota != doc.end() && !quota->is_null()) {
    double cores_allowed = 0;
    if (!number("quota_cores", kMostCores, cores_allowed)) return std::nullopt;
    load.quota_cores = cores_allowed;
  }
  if (doc.contains("throttled") && !number("throttled", 1, load.throttled)) return std::nullopt;
  if (!load.quota_cores) load.throttled = 0;  // held back by no quota: a hand edit
  return load;
}

MachineLoad load_of(const CpuUse& use) {
  MachineLoad load =
      machine_load_between({}, {use.busy_s, use.steal_s}, use.own_s, use.seconds, use.cores);
  load.quota_cores = use.quota_cores;
  if (use.quota_periods.periods > 0) {
    load.throttled = std::min(1.0, use.quota_periods.throttled / use.quota_periods.periods);
  }
  return load;
}

std::optional<MachineLoad> load_of_processes(const std::vector<CpuUse>& on_one_host) {
  // The processes by the cores they read: each group shares its cores.
  std::vector<std::vector<const CpuUse*>> groups;
  for (const CpuUse& use : on_one_host) {
    const auto same = std::find_if(groups.begin(), groups.end(), [&use](const auto& group) {
      return group[0]->cpus == use.cpus;
    });
    if (same != groups.end()) {
      same->push_back(&use);
    } else {
      groups.push_back({&use});
    }
  }
  if (groups.empty()) return std::nullopt;
  const auto overlap = [](const std::vector<int>& a, const std::vector<int>& b) {
    if (a.empty() || b.empty()) return true;  // the whole machine
    return std::any_of(a.begin(), a.end(),
                       [&b](int cpu) { return std::find(b.begin(), b.end(), cpu) != b.end(); });
  };
  for (size_t i = 0; i < groups.size(); ++i) {
    for (size_t j = i + 1; j < groups.size(); ++j) {
      if (overlap(groups[i][0]->cpus, groups[j][0]->cpus)) return std::nullopt;
    }
  }
  std::optional<MachineLoad> host;
  for (const auto& group : groups) {
    CpuUse together = *group[0];
    together.seconds = together.busy_s = together.steal_s = together.own_s = 0;
    together.quota_periods = {};
    for (const CpuUse* use : group) {
      // The same cores read over nearly the same interval: one reading, every process's own.
      together.seconds += use->seconds / double(group.size());
      together.busy_s += use->busy_s / double(group.size());
      together.steal_s += use->steal_s / double(group.size());
      together.own_s += use->own_s;
      together.quota_periods.periods += use->quota_periods.periods / double(group.size());
      together.quota_periods.throttled += use->quota_periods.throttled / double(group.size());
    }
    host = add_apart(host, load_of(together));
  }
  return host;
}

std::optional<MachineLoad> load_of_hosts(const std::vector<HostCpuUse>& processes) {
  std::vector<std::string> machines;
  for (const HostCpuUse& process : processes) {
    if (!process.use) return std::nullopt;
    if (std::find(machines.begin(), machines.end(), process.machine) == machines.end()) {
      machines.push_back(process.machine);
    }
  }
  std::optional<MachineLoad> all;
  for (const std::string& machine : machines) {
    std::vector<CpuUse> on_host;
    for (const HostCpuUse& process : processes) {
      if (process.machine == machine) on_host.push_back(*process.use);
    }
    const std::optional<MachineLoad> load = load_of_processes(on_host);
    if (!load) return std::nullopt;
    all = add_apart(all, *load);
  }
  return all;
}

std::string this_machine() {
  std::ifstream boot_id("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (boot_id >> id && !id.empty()) return id;
  char name[256] = {};
  return gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : std::string();
}

nlohmann::json cpu_use_to_json(const CpuUse& use) {
  return {{"cpus", use.cpus},
          {"cores", use.cores},
          {"seconds", use.seconds},
          {"busy_s", use.busy_s},
          {"steal_s", use.steal_s},
          {"own_s", use.own_s},
          {"quota_cores", use.quota_cores ? nlohmann::json(*use.quota_cores) : nullptr},
          {"quota_periods", use.quota_periods.periods},
          {"throttled_periods", use.quota_periods.throttled}};
}

std::optional<CpuUse> cpu_use_from_json(const nlohmann::json& doc) {
  if (!doc.is_object() || !doc.contains("cpus") || !doc["cpus"].is_array()) return std::nullopt;
  CpuUse use;
  for (const auto& cpu : doc["cpus"]) {
    if (!cpu.is_number_integer() || cpu.get<int64_t>() < 0 || cpu.get<int64_t>() >= kMostCores) {
      return std::nullopt;
    }
    use.cpus.push_back(cpu.get<int>());
  }
  const auto number = [&doc](const char* key, double& to) {
    return read_number(doc, key, kMostSeconds * kMostCores, to);
  };
  double cores = 0;
  if (!number("cores", cores) || cores > kMostCores || !number("seconds", use.seconds) ||
      !number("busy_s", use.busy_s) || !number("steal_s", use.steal_s) ||
      !number("own_s", use.own_s) || !number("quota_periods", use.quota_periods.periods) ||
      !number("throttled_periods", use.quota_periods.throttled)) {
    return std::nullopt;
  }
  if (!doc.contains("quota_cores")) return std::nullopt;
  if (!doc["quota_cores"].is_null()) {
    double quota = 0;
    if (!number("quota_cores", quota)) return std::nullopt;
    use.quota_cores = quota;
  }
  use.cores = static_cast<int>(cores);
  return use;
}

MachineLoadMeter::MachineLoadMeter() : cpus_(allowed_cpus()), start_(read_cpu_times(cpus_)) {
  if (!start_ && !cpus_.empty()) {
    // No line of its cores (a container's /proc/stat numbering them from 0): the machine's.
    cpus_.clear();
    start_ = read_cpu_times(cpus_);
  }
  // The cores read: its own, or the machine's (not the quota's: it bounds time, not cores).
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  cores_ = !cpus_.empty() ? static_cast<int>(cpus_.size()) : std::max(1, static_cast<int>(online));
  quota_ = cpu_quota();
  quota_start_ = read_quota_periods(quota_);
  own_start_s_ = own_cpu_seconds();
  started_ = std::chrono::steady_clock::now();
}

std::optional<MachineLoad> MachineLoadMeter::load() const {
  const std::optional<CpuUse> reading = use();
  if (!reading) return std::nullopt;
  return load_of(*reading);
}

std::optional<CpuUse> MachineLoadMeter::use() const {
  if (!start_) return std::nullopt;
  const std::optional<MachineCpuTimes> end = read_cpu_times(cpus_);
  if (!end) return std::nullopt;
  CpuUse reading;
  reading.cpus = cpus_;
  reading.cores = cores_;
  reading.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  reading.busy_s = end->busy_s - start_->busy_s;
  reading.steal_s = end->steal_s - start_->steal_s;
  reading.own_s = own_cpu_seconds() - own_start_s_;
  if (quota_) reading.quota_cores = quota_->cores;
  const std::optional<QuotaPeriods> quota_end = read_quota_periods(quota_);
  if (quota_start_ && quota_end) {
    reading.quota_periods = {quota_end->periods - quota_start_->periods,
                             quota_end->throttled - quota_start_->throttled};
  }
  return reading;
}

}  // namespace pipebal
