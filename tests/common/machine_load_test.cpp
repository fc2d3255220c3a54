// The machine's load from /proc/stat and this process's CPU time: the aggregate line read, or the
// lines of the cores the process may run on, the others' share and the hypervisor's per second,
// intervals combined by length, and a machine called busy only past a quarter core (5% of a large
// one) and a few clock ticks either way; a run's processes told from other work on their hosts.
#include "pipebal/common/machine_load.h"

#include <sched.h>

#include <thread>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "pipebal/common/cores.h"

namespace {

using pipebal::MachineCpuTimes;
using pipebal::MachineLoad;

// /proc/stat of a 2-core machine: user nice system idle iowait irq softirq steal guest guest_nice.
const char* kProcStat =
    "cpu  1000 20 300 50000 40 5 15 60 0 0\n"
    "cpu0 500 10 150 25000 20 2 8 30 0 0\n"
    "cpu1 500 10 150 25000 20 3 7 30 0 0\n"
    "intr 12345 0 0\n"
    "ctxt 99999\n";

TEST(MachineLoad, TheMachinesLineIsReadInSeconds) {
  const auto times = pipebal::parse_proc_stat(kProcStat, 100);
  ASSERT_TRUE(times.has_value());
  EXPECT_DOUBLE_EQ(times->busy_s, (1000 + 20 + 300 + 5 + 15) / 100.0);  // idle, iowait left out
  EXPECT_DOUBLE_EQ(times->steal_s, 0.6);
  EXPECT_FALSE(pipebal::parse_proc_stat("cpu0 1 2 3 4 5 6 7\n", 100)) << "cores, not the machine";
  EXPECT_FALSE(pipebal::parse_proc_stat("cpu 1 2 3\n", 100)) << "too few fields";
  EXPECT_FALSE(pipebal::parse_proc_stat("", 100));
}

// Other jobs on a node's other cores do not slow a process pinned to its own (taskset, a batch
// system's cpuset): only the lines of its cores count.
TEST(MachineLoad, TheCoresItMayRunOnAreReadAlone) {
  const auto one = pipebal::parse_proc_stat(kProcStat, 100, {1});
  ASSERT_TRUE(one.has_value());
  EXPECT_DOUBLE_EQ(one->busy_s, (500 + 10 + 150 + 3 + 7) / 100.0);
  EXPECT_DOUBLE_EQ(one->steal_s, 0.3);
  const auto both = pipebal::parse_proc_stat(kProcStat, 100, {0, 1});
  ASSERT_TRUE(both.has_value());
  EXPECT_DOUBLE_EQ(both->busy_s, (1000 + 20 + 300 + 5 + 15) / 100.0)
      << "the cores sum to the machine";
  const auto with_offline = pipebal::parse_proc_stat(kProcStat, 100, {1, 7});
  ASSERT_TRUE(with_offline.has_value());
  EXPECT_DOUBLE_EQ(with_offline->busy_s, one->busy_s) << "an offline core has no line";
  EXPECT_FALSE(pipebal::parse_proc_stat(kProcStat, 100, {5})) << "none of its cores listed";
  EXPECT_FALSE(pipebal::parse_proc_stat("cpu 1 2 3 4 5 6 7\ncpu10 1 2 3 4 5 6 7\n", 100, {1}))
      << "cpu10 is not cpu1";
}

// The meter counts the cores the process may run on when it starts: pinned to one, it reads one.
TEST(MachineLoad, TheMeterCountsTheCoresThisProcessMayRunOn) {
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  const std::vector<int> cpus = pipebal::allowed_cpus();
  ASSERT_EQ(cpus.size(), size_t(CPU_COUNT(&all)));
  // The other tests of this binary run on every core again, whatever fails here.
  struct Unpin {
    cpu_set_t all;
    ~Unpin() { sched_setaffinity(0, sizeof(all), &all); }
  } unpin{all};
  cpu_set_t first;
  CPU_ZERO(&first);
  CPU_SET(cpus.front(), &first);
  ASSERT_EQ(sched_setaffinity(0, sizeof(first), &first), 0);
  const pipebal::MachineLoadMeter meter;
  EXPECT_EQ(pipebal::allowed_cpus(), std::vector<int>{cpus.front()});
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  volatile double sink = 0;
  while (std::chrono::steady_clock::now() < until) sink = sink + 1;
  const auto load = meter.load();
  ASSERT_TRUE(load.has_value());
  EXPECT_EQ(load->cores, 1);
  // That core's time less this thread's, which ran there alone: at most the rest of one core.
  EXPECT_LE(load->others_cores, 1.1);
}

TEST(MachineLoad, OthersAreTheMachinesBusyTimeLessThisProcesssPerSecond) {
  const MachineCpuTimes start{100, 1};
  const MachineCpuTimes end{118, 1.5};  // 18 s busy in 10 s, 0.5 s stolen
  const MachineLoad load = pipebal::machine_load_between(start, end, 9, 10, 2);
  EXPECT_DOUBLE_EQ(load.others_cores, 0.9);
  EXPECT_DOUBLE_EQ(load.steal_cores, 0.05);
  EXPECT_EQ(load.cores, 2);
  EXPECT_TRUE(load.busy());
  // Ticks against finer own time: a little below zero is none.
  EXPECT_EQ(pipebal::machine_load_between(start, {109, 1}, 9.05, 10, 2).others_cores, 0);
}

TEST(MachineLoad, BusyFromAQuarterCoreOrFivePercentOfTheMachinePlusFiveTicks) {
  auto load = [](double others, double steal, int cores, double seconds = 100) {
    MachineLoad l;
    l.seconds = seconds;
    l.cores = cores;
    l.others_cores = others;
    l.steal_cores = steal;
    return l;
  };
  EXPECT_FALSE(load(0.2, 0, 2).busy());
  EXPECT_TRUE(load(0.2, 0.1, 2).busy()) << "the hypervisor's share counts too";
  EXPECT_TRUE(load(0.3, 0, 2).busy());
  EXPECT_FALSE(load(3, 0, 64).busy()) << "under 5% of 64 cores";
  EXPECT_TRUE(load(3.5, 0, 64).busy());
  EXPECT_FALSE(load(0.7, 0, 2, 0.1).busy()) << "five ticks in 0.1 s are half a core";
  EXPECT_TRUE(load(0.8, 0, 2, 0.1).busy());
  EXPECT_FALSE(load(5, 0, 2, 0).busy()) << "no interval";
}

TEST(MachineLoad, IntervalsCombineWeightedByLength) {
  MachineLoad a{1, 2, 1.0, 0.0, 2.0, 0.3};
  MachineLoad b{3, 2, 0.2, 0.4, std::nullopt, 0.1};
  const MachineLoad both = pipebal::combine(a, b);
  EXPECT_DOUBLE_EQ(both.seconds, 4);
  EXPECT_DOUBLE_EQ(both.others_cores, (1.0 * 1 + 0.2 * 3) / 4);
  EXPECT_DOUBLE_EQ(both.steal_cores, 0.4 * 3 / 4);
  EXPECT_DOUBLE_EQ(both.throttled, (0.3 * 1 + 0.1 * 3) / 4);
  EXPECT_EQ(both.quota_cores, 2.0);
  const auto some = pipebal::combine_loads({std::nullopt, a, std::nullopt, b});
  ASSERT_TRUE(some.has_value());
  EXPECT_DOUBLE_EQ(some->others_cores, both.others_cores);
  EXPECT_FALSE(pipebal::combine_loads({std::nullopt}).has_value());
}

TEST(MachineLoad, DescribedInCoresWithTheHypervisorWhenItTookAny) {
  EXPECT_EQ(pipebal::describe_load({12, 2, 1.9, 0, std::nullopt, 0}),
            "other processes took 1.90 of the 2 cores pipebal runs on, on average over 12.0 s");
  EXPECT_EQ(
      pipebal::describe_load({12, 1, 0.5, 0.25, std::nullopt, 0}),
      "other processes took 0.50 of the 1 core pipebal runs on, on average over 12.0 s (and the "
      "hypervisor 0.25 for other guests)");
}

TEST(MachineLoad, AQuotaHoldingItBackInATenthOfItsPeriodsIsSaidApart) {
  MachineLoad load{12, 2, 0, 0, 1.5, 0.09};
  EXPECT_FALSE(load.held_back());
  load.throttled = 0.42;
  EXPECT_TRUE(load.held_back());
  EXPECT_FALSE(load.busy()) << "the machine itself was idle";
  EXPECT_EQ(pipebal::describe_throttling(load),
            "pipebal's CPU quota of 1.50 cores held it back in 42% of the quota's periods over "
            "12.0 s");
  load.quota_cores = 1;
  EXPECT_EQ(pipebal::describe_throttling(load),
            "pipebal's CPU quota of 1.00 core held it back in 42% of the quota's periods over "
            "12.0 s");
  load.quota_cores.reset();
  EXPECT_FALSE(load.held_back()) << "no quota, nothing held it back";
  EXPECT_EQ(pipebal::describe_throttling(load), "");
}

TEST(MachineLoad, CpuStatCountsTheQuotasPeriods) {
  // cgroup v2's cpu.stat (v1's has the same two lines, and throttled_time).
  const auto periods = pipebal::parse_cpu_stat(
      "usage_usec 4000\nuser_usec 3000\nsystem_usec 1000\nnr_periods 120\nnr_throttled 30\n"
      "throttled_usec 90000\n");
  ASSERT_TRUE(periods.has_value());
  EXPECT_EQ(periods->periods, 120);
  EXPECT_EQ(periods->throttled, 30);
  EXPECT_FALSE(pipebal::parse_cpu_stat("usage_usec 4000\n")) << "the cpu controller is off";
  pipebal::CpuUse use;
  use.seconds = 1;
  use.cores = 2;
  use.quota_cores = 1.5;
  use.quota_periods = *periods;
  EXPECT_DOUBLE_EQ(pipebal::load_of(use).throttled, 0.25);
  EXPECT_EQ(pipebal::load_of(use).quota_cores, 1.5);
}

// Processes of one run on one host (CpuUse: cores read, interval, busy, steal, own).
pipebal::CpuUse use(std::vector<int> cpus, double seconds, double busy, double own,
                    double steal = 0) {
  pipebal::CpuUse u;
  u.cores = static_cast<int>(cpus.size());
  u.cpus = std::move(cpus);
  u.seconds = seconds;
  u.busy_s = busy;
  u.steal_s = steal;
  u.own_s = own;
  return u;
}

TEST(MachineLoad, ProcessesSharingTheirCoresCountEachOthersWorkAsTheirOwn) {
  // Two ranks on cores 0-1 for 10 s: the cores were busy 19 s, each rank took 9 s. Alone each
  // would call the other's 9 s others' work; together others took 1 s.
  auto a = use({0, 1}, 10, 19, 9, 0.5);
  auto b = use({0, 1}, 10.2, 19.2, 9);
  a.quota_periods = {100, 20};  // one control group's counters, read by each
  b.quota_periods = {102, 40};
  EXPECT_NEAR(pipebal::load_of(a).others_cores, 1.0, 1e-12) << "one alone counts the other";
  const auto both = pipebal::load_of_processes({a, b});
  ASSERT_TRUE(both.has_value());
  EXPECT_EQ(both->cores, 2);
  EXPECT_DOUBLE_EQ(both->seconds, 10.1);
  EXPECT_NEAR(both->others_cores, (19.1 - 18) / 10.1, 1e-12);
  EXPECT_NEAR(both->steal_cores, 0.25 / 10.1, 1e-12) << "their readings averaged";
  EXPECT_NEAR(both->throttled, 30.0 / 101, 1e-12);
}

TEST(MachineLoad, ProcessesPinnedApartEachReadTheirOwnCores) {
  // launch --bind-cores: rank 0 on cores 0-1 with 0.5 core of others, rank 1 on 2-3 with none.
  auto first = use({0, 1}, 10, 25, 20);
  auto second = use({2, 3}, 12, 20, 20);
  // One container's quota of 3 cores, read by each (their counters a moment apart).
  first.quota_cores = second.quota_cores = 3;
  first.quota_periods = {100, 10};
  second.quota_periods = {120, 24};
  const auto both = pipebal::load_of_processes({first, second});
  ASSERT_TRUE(both.has_value());
  EXPECT_EQ(both->cores, 4);
  EXPECT_DOUBLE_EQ(both->seconds, 12);
  EXPECT_NEAR(both->others_cores, 0.5, 1e-12);
  EXPECT_EQ(both->quota_cores, 3.0) << "one quota, not two";
  EXPECT_DOUBLE_EQ(both->throttled, 0.2) << "the more held back";
}

TEST(MachineLoad, CoresThatOverlapInPartTellNothing) {
  EXPECT_FALSE(pipebal::load_of_processes({use({0, 1}, 10, 20, 9), use({1, 2}, 10, 20, 9)}));
  EXPECT_FALSE(pipebal::load_of_processes({use({}, 10, 20, 9), use({1}, 10, 20, 9)}))
      << "the machine's line overlaps any core";
  EXPECT_FALSE(pipebal::load_of_processes({}));
}

TEST(MachineLoad, HostsAddUpAndAnUnreadProcessLeavesTheRunUnknown) {
  using pipebal::HostCpuUse;
  auto on_b = use({0, 1}, 11, 6, 3);
  on_b.quota_cores = 1.5;
  on_b.quota_periods = {110, 11};
  const auto run = pipebal::load_of_hosts(
      {{"a", use({0, 1}, 10, 12, 5)}, {"b", on_b}, {"a", use({0, 1}, 10, 12, 5)}});
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->cores, 4);
  EXPECT_DOUBLE_EQ(run->seconds, 11);
  EXPECT_NEAR(run->others_cores, 0.2 + 3.0 / 11, 1e-12) << "a: 12 - 2 x 5 in 10 s; b: 6 - 3 in 11";
  EXPECT_EQ(run->quota_cores, 1.5) << "the quota of the host that had one";
  EXPECT_DOUBLE_EQ(run->throttled, 0.1);
  EXPECT_FALSE(pipebal::load_of_hosts({{"a", use({0}, 1, 1, 1)}, {"b", std::nullopt}}));
}

TEST(MachineLoad, ReadingsAndLoadsRoundTripThroughJson) {
  auto u = use({3, 5}, 2.5, 4, 1.5, 0.25);
  u.quota_cores = 1.5;
  u.quota_periods = {25, 5};
  const auto back = pipebal::cpu_use_from_json(pipebal::cpu_use_to_json(u));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->cpus, u.cpus);
  EXPECT_EQ(back->cores, 2);
  EXPECT_EQ(back->seconds, 2.5);
  EXPECT_EQ(back->busy_s, 4);
  EXPECT_EQ(back->steal_s, 0.25);
  EXPECT_EQ(back->own_s, 1.5);
  EXPECT_EQ(back->quota_cores, 1.5);
  EXPECT_EQ(back->quota_periods.periods, 25);
  EXPECT_EQ(back->quota_periods.throttled, 5);
  auto bad = pipebal::cpu_use_to_json(u);
  bad["own_s"] = -1;
  EXPECT_FALSE(pipebal::cpu_use_from_json(bad));
  bad = pipebal::cpu_use_to_json(u);
  bad["cpus"] = {0, "1"};
  EXPECT_FALSE(pipebal::cpu_use_from_json(bad));
  EXPECT_FALSE(pipebal::cpu_use_from_json(nullptr));
  bad = pipebal::cpu_use_to_json(u);
  bad["cpus"] = {70000};
  EXPECT_FALSE(pipebal::cpu_use_from_json(bad)) << "no such CPU";
  bad = pipebal::cpu_use_to_json(u);
  bad.erase("quota_cores");
  EXPECT_FALSE(pipebal::cpu_use_from_json(bad)) << "written by every rank, null or not";

  const MachineLoad load{12, 2, 0.5, 0.125, 1.5, 0.25};
  const auto load_back = pipebal::machine_load_from_json(pipebal::machine_load_to_json(load));
  ASSERT_TRUE(load_back.has_value());
  EXPECT_EQ(load_back->cores, 2);
  EXPECT_EQ(load_back->others_cores, 0.5);
  EXPECT_EQ(load_back->quota_cores, 1.5);
  EXPECT_EQ(load_back->throttled, 0.25);
  EXPECT_FALSE(pipebal::machine_load_from_json({{"seconds", 1}}));
  for (const auto& [key, odd] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"throttled", 1.5}, {"quota_cores", -1}, {"quota_cores", "2"}, {"throttled", "x"}}) {
    nlohmann::json doc = pipebal::machine_load_to_json(load);
    doc[key] = odd;
    EXPECT_FALSE(pipebal::machine_load_from_json(doc)) << doc.dump();
  }
  // As recorded before quotas were read: none, never held back.
  const auto older = pipebal::machine_load_from_json(
      {{"seconds", 1}, {"cores", 2}, {"others_cores", 0}, {"steal_cores", 0}});
  ASSERT_TRUE(older.has_value());
  EXPECT_FALSE(older->quota_cores.has_value());
  EXPECT_EQ(older->throttled, 0);
}

// The meter reads the machine over its interval (what the others took depends on what runs
// beside the test; the arithmetic is checked above).
TEST(MachineLoad, TheMeterReadsTheMachineOverItsInterval) {
  const pipebal::MachineLoadMeter meter;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(600);
  volatile double sink = 0;
  while (std::chrono::steady_clock::now() < until) sink = sink + 1;
  const auto load = meter.load();
  ASSERT_TRUE(load.has_value()) << "Linux has /proc/stat";
  EXPECT_GE(load->seconds, 0.6);
  EXPECT_EQ(load->cores, static_cast<int>(pipebal::allowed_cpus().size()));
  EXPECT_GE(load->others_cores, 0);
  EXPECT_LE(load->others_cores, load->cores + 0.1);
}

}  // namespace
