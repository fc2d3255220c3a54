// The machine's load from /proc/stat and this process's CPU time: the aggregate line read, the
// others' share and the hypervisor's per second, intervals combined by length, and a machine
// called busy only past a quarter core (5% of a large one) and a few clock ticks either way.
#include "pipebal/common/machine_load.h"

#include <thread>

#include <gtest/gtest.h>

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
            "other processes took 1.90 of the machine's 2 cores on average over 12.0 s");
  EXPECT_EQ(pipebal::describe_load({12, 1, 0.5, 0.25}),
            "other processes took 0.50 of the machine's 1 core on average over 12.0 s (and the "
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
  EXPECT_EQ(load->cores, static_cast<int>(std::thread::hardware_concurrency()));
  EXPECT_GE(load->others_cores, 0);
  EXPECT_LE(load->others_cores, load->cores + 0.1);
}

}  // namespace
