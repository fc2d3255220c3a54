// The machine's load from /proc/stat and this process's CPU time: the aggregate line read, or the
// lines of the cores the process may run on, the others' share and the hypervisor's per second,
// intervals combined by length, and a machine called busy only past a quarter core (5% of a large
// one) and a few clock ticks either way.
#include "pipebal/common/machine_load.h"

#include <sched.h>

#include <thread>

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
  MachineLoad a{1, 2, 1.0, 0.0};
  MachineLoad b{3, 2, 0.2, 0.4};
  const MachineLoad both = pipebal::combine(a, b);
  EXPECT_DOUBLE_EQ(both.seconds, 4);
  EXPECT_DOUBLE_EQ(both.others_cores, (1.0 * 1 + 0.2 * 3) / 4);
  EXPECT_DOUBLE_EQ(both.steal_cores, 0.4 * 3 / 4);
  const auto some = pipebal::combine_loads({std::nullopt, a, std::nullopt, b});
  ASSERT_TRUE(some.has_value());
  EXPECT_DOUBLE_EQ(some->others_cores, both.others_cores);
  EXPECT_FALSE(pipebal::combine_loads({std::nullopt}).has_value());
}

TEST(MachineLoad, DescribedInCoresWithTheHypervisorWhenItTookAny) {
  EXPECT_EQ(pipebal::describe_load({12, 2, 1.9, 0}),
            "other processes took 1.90 of the 2 cores pipebal runs on, on average over 12.0 s");
  EXPECT_EQ(
      pipebal::describe_load({12, 1, 0.5, 0.25}),
      "other processes took 0.50 of the 1 core pipebal runs on, on average over 12.0 s (and the "
      "hypervisor 0.25 for other guests)");
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
