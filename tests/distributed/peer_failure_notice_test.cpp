// A rank stopped by another's failure tells the launcher through its pipe, and only through it:
// a descriptor number that now names something else is left alone, and a pipe whose launcher is
// gone does not end the rank with SIGPIPE.
#include "pipebal/distributed/peer_failure_notice.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/support/scratch_dir.h"

namespace pipebal::distributed {
namespace {

// Notifies as rank `rank`, stopped by `failed_rank`'s failure, with PIPEBAL_LAUNCH_NOTICE_FD set
// to `value`.
void notify_as(const std::string& rank, const std::string& value, int failed_rank = -1) {
  ::setenv("RANK", rank.c_str(), 1);
  ::setenv(kNoticeFdVariable, value.c_str(), 1);
  notify_launcher_of_peer_failure(failed_rank);
  ::unsetenv(kNoticeFdVariable);
  ::unsetenv("RANK");
}

std::string inode_of(int fd) {
  struct stat info {};
  EXPECT_EQ(::fstat(fd, &info), 0);
  return std::to_string(info.st_ino);
}

TEST(PeerFailureNotice, TheRanksThatSaySoAreNoticed) {
  PeerFailureNotices notices;
  ASSERT_GE(notices.write_end(), 0);
  EXPECT_EQ(notices.variable_value(),
            fmt::format("{}:{}", notices.write_end(), inode_of(notices.write_end())));
  EXPECT_FALSE(notices.noticed(2));
  notify_as("2", notices.variable_value());
  notify_as("7", notices.variable_value(), 4);
  EXPECT_TRUE(notices.noticed(2));
  EXPECT_TRUE(notices.noticed(7));
  EXPECT_FALSE(notices.noticed(3));
  // Each says which rank failed, where it knows.
  EXPECT_EQ(notices.failed_rank(2), -1);
  EXPECT_EQ(notices.failed_rank(7), 4);
  EXPECT_EQ(notices.failed_rank(3), -1);
  // Not launched (no variable), or a value that is not "FD:INODE": nothing is written.
  ::setenv("RANK", "3", 1);
  notify_launcher_of_peer_failure(1);
  ::unsetenv("RANK");
  for (const std::string& value :
       {std::to_string(notices.write_end()), notices.variable_value() + "x", std::string("1:2"),
        std::string("")}) {
    notify_as("3", value);
  }
  EXPECT_FALSE(notices.noticed(3));
  // A RANK that is not a rank is not written (as "2 3" it would read as rank 2 naming rank 3).
  for (const char* rank : {"2 3", "x", "-1", "", " 4", "99999999999"}) {
    notify_as(rank, notices.variable_value());
  }
  EXPECT_EQ(notices.failed_rank(2), -1);
  EXPECT_FALSE(notices.noticed(4));
  // Lines that are not notices (written by something else) are passed over.
  const std::string junk = "x\n5 y\n-1 2\n6 -3\n8 1\n";
  ASSERT_EQ(::write(notices.write_end(), junk.data(), junk.size()),
            static_cast<ssize_t>(junk.size()));
  EXPECT_FALSE(notices.noticed(5));
  EXPECT_FALSE(notices.noticed(6));
  EXPECT_EQ(notices.failed_rank(8), 1);
}

// A process between the launcher and the rank may close the descriptors it does not know and
// open others under the same numbers: the rank writes only into the launcher's pipe.
TEST(PeerFailureNotice, ADescriptorThatIsNoLongerThePipeIsLeftAlone) {
  PeerFailureNotices notices;
  ASSERT_GE(notices.write_end(), 0);
  const std::string file = pipebal::testing::scratch_path("output.txt");
  const int output = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(output, 0);
  const std::string pipe_inode = inode_of(notices.write_end());
  notify_as("1", fmt::format("{}:{}", output, pipe_inode));
  ::close(output);
  struct stat info {};
  ASSERT_EQ(::stat(file.c_str(), &info), 0);
  EXPECT_EQ(info.st_size, 0) << "a notice was written into another file";
  EXPECT_FALSE(notices.noticed(1));
}

// The launcher gone (the pipe's read end closed), the write fails and the rank goes on to exit
// with its own status; no SIGPIPE is left pending either.
TEST(PeerFailureNotice, ALauncherGoneIsNoSigpipe) {
  int ends[2];
  ASSERT_EQ(::pipe(ends), 0);
  ::close(ends[0]);
  notify_as("0", fmt::format("{}:{}", ends[1], inode_of(ends[1])));
  sigset_t pending;
  sigemptyset(&pending);
  ASSERT_EQ(::sigpending(&pending), 0);
  EXPECT_FALSE(sigismember(&pending, SIGPIPE));
  ::close(ends[1]);
}

}  // namespace
}  // namespace pipebal::distributed
