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

std::optional<MachineCpuTimes> read_cpu_times(const std::vector<int>& cpus) {
  std::ifstream file("/proc/stat");
  if (!file) return std::nullopt;
  std::stringstream text;
  text << file.rdbuf();
  const long ticks = sysconf(_SC_CLK_TCK);
  return parse_proc_stat(text.str(), ticks > 0 ? double(ticks) : 100.0, cpus);
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

MachineLoad combine(const MachineLoad& a, const MachineLoad& b) {
  MachineLoad both;
  both.seconds = a.seconds + b.seconds;
  both.cores = std::max(a.cores, b.cores);
  if (both.seconds <= 0) return both;
  both.others_cores = (a.others_cores * a.seconds + b.others_cores * b.seconds) / both.seconds;
  both.steal_cores = (a.steal_cores * a.seconds + b.steal_cores * b.seconds) / both.seconds;
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

nlohmann::json machine_load_to_json(const MachineLoad& load) {
  const auto rounded = [](double x) { return std::round(x * 1000) / 1000; };
  return {{"seconds", rounded(load.seconds)},
          {"cores", load.cores},
          {"others_cores", rounded(load.others_cores)},
          {"steal_cores", rounded(load.steal_cores)}};
}

MachineLoadMeter::MachineLoadMeter() : cpus_(allowed_cpus()), start_(read_cpu_times(cpus_)) {
  cores_ = static_cast<int>(cpus_.size());
  if (!start_ && !cpus_.empty()) {
    // No line of its cores (a container's /proc/stat numbering them from 0): the machine's.
    cpus_.clear();
    start_ = read_cpu_times(cpus_);
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    cores_ = online > 0 ? static_cast<int>(online) : 1;
  }
  if (cores_ == 0) cores_ = usable_cores();
  own_start_s_ = own_cpu_seconds();
  started_ = std::chrono::steady_clock::now();
}

std::optional<MachineLoad> MachineLoadMeter::load() const {
  if (!start_) return std::nullopt;
  const std::optional<MachineCpuTimes> end = read_cpu_times(cpus_);
  if (!end) return std::nullopt;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  return machine_load_between(*start_, *end, own_cpu_seconds() - own_start_s_, seconds, cores_);
}

}  // namespace pipebal
