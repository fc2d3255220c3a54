// How busy the machine was with other work while pipebal measured: other processes, and on a
// virtual machine the hypervisor (steal time, the host's other guests). Either slows what is
// measured, the engine's hand-off most (a stage's thread waits for a core), and a profile taken
// so predicts another machine than the idle one it is used for. Read from Linux's /proc/stat (the
// CPU time of each core) over the cores this process may run on (its affinity: taskset, a batch
// system's cpuset; other jobs on a node's other cores do not slow it), less this process's own CPU
// time (with its children's that it has waited for); a run of several processes tells all of its
// ranks' time from other work (load_of_hosts). Under a control group's CPU quota (a container's),
// also how often the quota held pipebal back: cpu.stat of the cgroup that sets it. Elsewhere than
// Linux not known. Torch-free.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "pipebal/common/cores.h"

namespace pipebal {

// The CPU time so far of a set of cores, together, in seconds.
struct MachineCpuTimes {
  double busy_s = 0;   // user, nice, system, irq and softirq (guests' time is in user)
  double steal_s = 0;  // taken by the hypervisor for other guests
};

// The cores `cpus` of /proc/stat's `text` (its "cpu0", "cpu1"... lines; a core not listed there,
// offline, is left out), or with no `cpus` the machine's aggregate "cpu" line, in seconds at
// `ticks_per_second`; nullopt when the text has none of them.
std::optional<MachineCpuTimes> parse_proc_stat(const std::string& text, double ticks_per_second,
                                               const std::vector<int>& cpus = {});

// How often a control group's CPU quota ran out: cpu.stat's enforcement periods and those in
// which its processes were held back (cgroup v1 and v2 alike).
struct QuotaPeriods {
  double periods = 0;
  double throttled = 0;
};

// cpu.stat's text ("nr_periods 120", "nr_throttled 7", ...); nullopt without those lines.
std::optional<QuotaPeriods> parse_cpu_stat(const std::string& text);

// What other work took of the cores pipebal may run on over an interval, in cores on average,
// and how often a control group's CPU quota held it back.
struct MachineLoad {
  double seconds = 0;       // the interval
  int cores = 0;            // the cores read (of every host, for a run across hosts)
  double others_cores = 0;  // other processes
  double steal_cores = 0;   // the hypervisor
  // The CPU quota of pipebal's control group (common/cores.h; across hosts the tightest), and the
  // share of its periods in which it held pipebal back (across hosts the largest); none, and 0,
  // without a quota.
  std::optional<double> quota_cores;
  double throttled = 0;

  // Whether the others (processes and hypervisor) took enough to slow what was measured: a
  // quarter of a core, or 5% of `cores`, whichever is more (and five clock ticks more).
  bool busy() const;
  // Whether the quota held pipebal back in a tenth of its periods or more.
  bool held_back() const;
};

// The load over an interval from the machine's and this process's CPU seconds at its two ends.
MachineLoad machine_load_between(const MachineCpuTimes& start, const MachineCpuTimes& end,
                                 double own_cpu_s, double seconds, int cores);

// Two loads as one over both intervals (averages weighted by their lengths; the first quota
// known).
MachineLoad combine(const MachineLoad& a, const MachineLoad& b);

// The known ones of `loads` as one; none when none is known.
std::optional<MachineLoad> combine_loads(const std::vector<std::optional<MachineLoad>>& loads);

// "other processes took 1.90 of the 2 cores pipebal runs on, on average over 12.0 s (and the
// hypervisor 0.10 for other guests)": for a warning.
std::string describe_load(const MachineLoad& load);

// "pipebal's CPU quota of 1.50 cores held it back in 42% of the quota's periods over 12.0 s", or
// "" without a quota: for a warning.
std::string describe_throttling(const MachineLoad& load);

// As profiles and runs record it: {"seconds", "cores", "others_cores", "steal_cores",
// "quota_cores" (null without a quota), "throttled"}, rounded to what clock ticks can tell
// (milliseconds, thousandths of a core).
nlohmann::json machine_load_to_json(const MachineLoad& load);

// The inverse of machine_load_to_json (a load recorded before quotas were read has none); nullopt
// for anything else (null, a hand-edited value).
std::optional<MachineLoad> machine_load_from_json(const nlohmann::json& doc);

// What one process's meter read over its interval: the CPU time its cores took in all, and its
// own. A run of several processes gathers these to tell its ranks' work from other work.
struct CpuUse {
  std::vector<int> cpus;  // the cores read, in order; empty: the machine's aggregate line
  int cores = 0;
  double seconds = 0;
  double busy_s = 0;                  // every process's, over those cores
  double steal_s = 0;                 // the hypervisor's
  double own_s = 0;                   // this process's (and its reaped children's)
  std::optional<double> quota_cores;  // its control group's CPU quota, if any
  QuotaPeriods quota_periods;         // that quota's, over the interval
};

// The load one process's reading says: others are everyone but that process.
MachineLoad load_of(const CpuUse& use);

// The load on one host while several processes of one run worked there: others are everyone but
// them. Processes that read the same cores (not pinned apart) share them, their readings averaged
// and their own time summed; processes pinned to cores apart (launch --bind-cores) each read
// their own, and the host's load is theirs summed (the quota, likely one container's, the
// tightest; held back, the most). nullopt when two sets of cores overlap only in part (whose work
// is whose cannot be told) or none is given.
std::optional<MachineLoad> load_of_processes(const std::vector<CpuUse>& on_one_host);

// One process's reading, with the machine whose /proc/stat it read (this_machine(); nullopt: not
// read).
struct HostCpuUse {
  std::string machine;
  std::optional<CpuUse> use;
};

// The load on the hosts of a run's processes, their cores, others and steal summed (the tightest
// quota, the most held back): nullopt unless every process's reading is known and each host's
// tells its processes from other work (load_of_processes).
std::optional<MachineLoad> load_of_hosts(const std::vector<HostCpuUse>& processes);

// What names the machine whose /proc/stat this process reads: the kernel's boot id (two
// containers of one host, whatever their host names, share it), else the host name.
std::string this_machine();

// As a run's processes send it to rank 0, and back (nullopt for anything else).
nlohmann::json cpu_use_to_json(const CpuUse& use);
std::optional<CpuUse> cpu_use_from_json(const nlohmann::json& doc);

// Measures from construction to load() (or use(), the reading behind it) over the cores this
// process may run on at construction (the whole machine where /proc/stat lists none of them), and
// the periods of its control group's CPU quota where one is set: nullopt where it cannot be read.
class MachineLoadMeter {
 public:
  MachineLoadMeter();
  std::optional<MachineLoad> load() const;
  std::optional<CpuUse> use() const;

 private:
  std::vector<int> cpus_;  // empty: the machine's aggregate line
  std::optional<MachineCpuTimes> start_;
  std::optional<CpuQuota> quota_;
  std::optional<QuotaPeriods> quota_start_;
  int cores_ = 0;
  double own_start_s_ = 0;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace pipebal
