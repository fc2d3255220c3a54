// Watching a process of this host end: this process's identity leads back to it, a child's
// handle says when the child has ended, and an identity from elsewhere is not watched.
#include "pipebal/distributed/process_watch.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>

#include <gtest/gtest.h>

namespace pipebal::distributed {
namespace {

TEST(ProcessWatch, AChildIsWatchedUntilItEnds) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // publishes its identity, then waits to be killed
    const std::string identity = process_identity();
    const ssize_t written = ::write(ready[1], identity.data(), identity.size());
    (void)written;
    ::close(ready[1]);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char buffer[512] = {};
  const ssize_t got = ::read(ready[0], buffer, sizeof buffer - 1);
  ASSERT_GT(got, 0);
  const std::optional<int> handle = watch_process(std::string(buffer, static_cast<size_t>(got)));
  ASSERT_TRUE(handle.has_value()) << buffer;
  EXPECT_FALSE(process_ended(*handle));
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(process_ended(*handle));
  close_process_handle(*handle);
  ::close(ready[0]);
}

// A child that has ended but is not reaped yet (a zombie, as `pipebal launch` keeps its ended
// processes) has ended, through a pidfd and through the fallback without one (-pid).
TEST(ProcessWatch, AnEndedChildNotYetReapedHasEnded) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, child, &info, WEXITED | WNOWAIT), 0);  // ended, left a zombie
  const int handle = process_handle(child);
  EXPECT_TRUE(process_ended(handle));
  close_process_handle(handle);
  EXPECT_TRUE(process_ended(-child));
  ::waitpid(child, nullptr, 0);
  EXPECT_TRUE(process_ended(-child));  // reaped: gone
  // One that runs has not ended, either way.
  const int self = process_handle(::getpid());
  EXPECT_FALSE(process_ended(self));
  close_process_handle(self);
  EXPECT_FALSE(process_ended(-::getpid()));
}

TEST(ProcessWatch, IdentitiesFromElsewhereAreNotWatched) {
  const std::string mine = process_identity();
  ASSERT_FALSE(mine.empty());
  const std::optional<int> self = watch_process(mine);
  ASSERT_TRUE(self.has_value());
  EXPECT_FALSE(process_ended(*self));
  close_process_handle(*self);
  // Another boot (another host), and this pid under another start time (a reused pid).
  EXPECT_FALSE(watch_process("not-this-boot" + mine.substr(mine.find(' '))).has_value());
  EXPECT_FALSE(watch_process(mine.substr(0, mine.rfind(' ')) + " 1").has_value());
  EXPECT_FALSE(watch_process("garbage").has_value());
}

}  // namespace
}  // namespace pipebal::distributed
