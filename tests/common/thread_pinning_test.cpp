// Pinning threads to CPUs: the kernel's own view of the thread's affinity (sched_getaffinity)
// after pinning and after the pin ends, threads started by a pinned thread, and the blocks of
// cores handed to stages.
#include "pipebal/common/thread_pinning.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <system_error>
#include <thread>

#include "pipebal/common/cores.h"

namespace {

TEST(ThreadPin, PinsTheThreadAndGivesItsCpusBack) {
  const std::vector<int> before = pipebal::this_thread_cpus();
  ASSERT_FALSE(before.empty());
  const std::vector<int> last = {before.back()};
  {
    const pipebal::ThreadPin pin(last);
    EXPECT_EQ(pipebal::this_thread_cpus(), last);
    // A thread started now inherits the pin: how a stage's intra-op pool follows its worker.
    std::vector<int> inherited;
    std::thread([&] { inherited = pipebal::this_thread_cpus(); }).join();
    EXPECT_EQ(inherited, last);
  }
  EXPECT_EQ(pipebal::this_thread_cpus(), before);
}

TEST(ThreadPin, RefusesNoCpuAndOnesOutsideTheMachine) {
  const std::vector<int> before = pipebal::this_thread_cpus();
  EXPECT_THROW(pipebal::pin_this_thread({}), std::invalid_argument);
  EXPECT_THROW(pipebal::pin_this_thread({-1}), std::invalid_argument);
  EXPECT_THROW(pipebal::pin_this_thread({4000}), std::system_error);  // no such CPU here
  EXPECT_EQ(pipebal::this_thread_cpus(), before);  // a refused pin changes nothing
}

TEST(CoresForGroups, ConsecutiveBlocksOfTheAllowedCpus) {
  const std::vector<int> cpus = pipebal::allowed_cpus();
  const auto one_each = pipebal::cores_for_groups(static_cast<int>(cpus.size()), 1);
  ASSERT_EQ(one_each.size(), cpus.size());
  for (size_t k = 0; k < cpus.size(); ++k) EXPECT_EQ(one_each[k], std::vector<int>{cpus[k]});
  const auto all_in_one = pipebal::cores_for_groups(1, static_cast<int>(cpus.size()));
  ASSERT_EQ(all_in_one.size(), 1u);
  EXPECT_EQ(all_in_one.front(), cpus);
}

TEST(CoresForGroups, RefusesMoreThreadsThanCpusNamingTheCounts) {
  const int cpus = static_cast<int>(pipebal::allowed_cpus().size());
  try {
    pipebal::cores_for_groups(cpus + 1, 1);
    FAIL() << "more groups than CPUs were given cores";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(cpus + 1) + " cores of their own"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(pipebal::cores_for_groups(1, cpus + 1), std::invalid_argument);
  EXPECT_THROW(pipebal::cores_for_groups(0, 1), std::invalid_argument);
}

}  // namespace
