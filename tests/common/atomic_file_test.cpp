// Output files: written whole or not at all, through symbolic links, never over a device or a
// FIFO; temporary files of dead processes cleaned up; inputs read only from regular files;
// directories of documents and a command's several files put in place whole; a tree removed
// without following its links.
#include "pipebal/common/atomic_file.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "pipebal/common/remove_tree.h"
#include "tests/support/scratch_dir.h"

namespace pipebal {
namespace {

namespace fs = std::filesystem;
using pipebal::testing::scratch_path;

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(RemoveTree, RemovesEverythingUnderAPathButNothingALinkPointsTo) {
  const std::string outside = scratch_path("outside");
  fs::create_directories(outside);
  { std::ofstream(outside + "/keep") << "kept"; }
  const std::string tree = scratch_path("tree");
  fs::create_directories(tree + "/a/b/c");
  { std::ofstream(tree + "/a/b/c/file") << "x"; }
  { std::ofstream(tree + "/top") << "y"; }
  fs::create_directory_symlink(outside, tree + "/a/link");
  EXPECT_TRUE(remove_tree(tree));
  EXPECT_FALSE(fs::exists(fs::symlink_status(tree)));
  EXPECT_EQ(names_in(outside), std::vector<std::string>{"keep"});
  EXPECT_TRUE(remove_tree(tree)) << "nothing there is nothing to remove";
  const std::string file = scratch_path("file");
  { std::ofstream(file) << "z"; }
  EXPECT_TRUE(remove_tree(file));
  EXPECT_FALSE(fs::exists(file));
  const std::string plain = scratch_path("plain");
  { std::ofstream(plain) << "p"; }
  std::string error;
  EXPECT_FALSE(remove_tree(plain + "/below", &error)) << "a path under a file";
  EXPECT_EQ(error, "Not a directory");
}

TEST(AtomicFile, WritesAndReplacesWithoutLeavingTemporaries) {
  const std::string path = scratch_path("doc.json");
  write_file_atomically(path, "one");
  write_file_atomically(path, "two");
  EXPECT_EQ(read_file(path), "two");
  EXPECT_EQ(names_in(pipebal::testing::scratch_dir()), std::vector<std::string>{"doc.json"});
}

TEST(AtomicFile, FollowsASymbolicLinkAndKeepsIt) {
  const std::string target = scratch_path("target.json"), link = scratch_path("link.json");
  write_file_atomically(target, "old");
  fs::create_symlink("target.json", link);
  write_file_atomically(link, "new");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
  EXPECT_EQ(read_file(target), "new");
}

TEST(AtomicFile, RefusesToReplaceWhatIsNotARegularFile) {
  const std::string fifo = scratch_path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    write_file_atomically(fifo, "x");
    FAIL();
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("not a regular file"), std::string::npos);
  }
  EXPECT_TRUE(fs::is_fifo(fifo)) << "the FIFO is still a FIFO";
  EXPECT_THROW(write_file_atomically(pipebal::testing::scratch_dir(), "x"), std::runtime_error);
  // /dev/stdout into a pipe: a link to a link ("pipe:[...]") no path names.
  int ends[2];
  ASSERT_EQ(::pipe(ends), 0);
  const std::string piped = "/proc/self/fd/" + std::to_string(ends[1]);
  try {
    check_writable(piped);
    ADD_FAILURE() << "took a pipe for a file";
  } catch (const std::runtime_error& error) {
    EXPECT_EQ(std::string(error.what()), "cannot write '" + piped +
                                             "': it is not a regular file (pipebal writes "
                                             "regular files only)");
  }
  ::close(ends[0]);
  ::close(ends[1]);
}

TEST(AtomicFile, CheckingAPathLeavesNothingAndRefusesWhatAWriteWould) {
  const std::string dir = pipebal::testing::fresh_dir("check");
  check_writable(dir + "/new.json");
  write_file_atomically(dir + "/old.json", "kept");
  check_writable(dir + "/old.json");
  EXPECT_EQ(read_file(dir + "/old.json"), "kept");
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"old.json"}) << "no file made, no temporary";
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0600), 0);
  for (const std::string& path : {dir + "/missing/new.json", dir + "/fifo", dir}) {
    try {
      check_writable(path);
      FAIL() << path;
    } catch (const std::runtime_error& error) {
      EXPECT_EQ(std::string(error.what()).rfind("cannot write '" + path + "': ", 0), 0u)
          << error.what();
    }
  }
}

TEST(AtomicFile, ReadRefusesFifosAndDevicesWithoutBlocking) {
  const std::string fifo = scratch_path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/zero"), std::string("/nonexistent")}) {
    try {
      read_file(path);
      FAIL() << path;
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find("cannot read '" + path + "'"), std::string::npos);
    }
  }
}

TEST(AtomicFile, RemovesTemporariesOfProcessesThatNoLongerRun) {
  // A process that has exited: its pid is free (until reused, which the check tolerates).
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  const std::string path = scratch_path("doc.json");
  const std::string stale = path + ".tmp." + std::to_string(child);
  std::ofstream(stale) << "half";
  const std::string alive = path + ".tmp.1";  // init runs as long as the machine does
  std::ofstream(alive) << "someone else's";
  write_file_atomically(path, "whole");
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(alive));
}

TEST(AtomicFile, LeavesFilesWhoseSuffixIsNoProcessId) {
  const std::string path = scratch_path("doc.json");
  // Past 64 bits, past pid_t, and zero: no process wrote these, so they are not its leftovers.
  const std::vector<std::string> others = {path + ".tmp.99999999999999999999",
                                           path + ".tmp.4294967296", path + ".tmp.0"};
  for (const std::string& other : others) std::ofstream(other) << "someone else's";
  write_file_atomically(path, "whole");
  EXPECT_EQ(read_file(path), "whole");
  for (const std::string& other : others) EXPECT_TRUE(fs::exists(other)) << other;
}

TEST(StagedDirectory, AppearsWholeAtCommitAndReplacesAnEarlierRun) {
  const std::string dir = scratch_path("out");
  {
    StagedDirectory staged(dir, {"a.json", "b.json"});
    write_file_atomically(staged.staging() + "/a.json", "first");
    EXPECT_FALSE(fs::exists(dir)) << "nothing in place before commit";
    staged.commit();
  }
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"a.json"});
  {
    StagedDirectory staged(dir, {"a.json", "b.json"});
    write_file_atomically(staged.staging() + "/b.json", "second");
    staged.commit();
  }
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"b.json"}) << "no mix of two runs";
  {
    StagedDirectory abandoned(dir, {"a.json", "b.json"});
    write_file_atomically(abandoned.staging() + "/a.json", "interrupted");
  }
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"b.json"})
      << "an unfinished run changes nothing";
  EXPECT_EQ(names_in(pipebal::testing::scratch_dir()), std::vector<std::string>{"out"});
}

TEST(WrittenTogether, FilesLandAtCommitTogetherOrNotAtAll) {
  const std::string a = scratch_path("a.json");
  const std::string b = scratch_path("b.pt");
  write_file_atomically(a, "earlier a");
  write_file_atomically(b, "earlier b");
  {
    WrittenTogether outputs;
    write_file_atomically(a, "new a");
    write_file_atomically_with(
        b, [](const std::string& temporary) { std::ofstream(temporary) << "new b"; });
    write_file_atomically(a, "newer a");  // written twice: the later lands
    EXPECT_EQ(read_file(a), "earlier a") << "nothing in place before commit";
    EXPECT_EQ(read_file(b), "earlier b");
    outputs.commit();
    EXPECT_EQ(read_file(a), "newer a");
    EXPECT_EQ(read_file(b), "new b");
  }
  {
    WrittenTogether outputs;
    write_file_atomically(a, "abandoned a");
    EXPECT_THROW(write_file_atomically(scratch_path("missing") + "/c.json", "c"),
                 std::runtime_error);
  }
  EXPECT_EQ(read_file(a), "newer a") << "a later write failed: the first does not land either";
  EXPECT_EQ(names_in(pipebal::testing::scratch_dir()), (std::vector<std::string>{"a.json", "b.pt"}))
      << "no temporaries left";
}

TEST(WrittenTogether, HoldsOnlyItsOwnThreadsWritesAndNestedOnesAreTheOuters) {
  const std::string mine = scratch_path("mine.json");
  const std::string other = scratch_path("other.json");
  {
    WrittenTogether outputs;
    std::thread([&other] { write_file_atomically(other, "another thread's"); }).join();
    EXPECT_EQ(read_file(other), "another thread's") << "not held: written on another thread";
    {
      WrittenTogether inner;
      write_file_atomically(mine, "nested");
      inner.commit();
    }
    EXPECT_FALSE(fs::exists(mine)) << "the inner commit leaves it to the outer one";
    outputs.commit();
  }
  EXPECT_EQ(read_file(mine), "nested");
  write_file_atomically(mine, "after");  // none open: in place at once
  EXPECT_EQ(read_file(mine), "after");
}

TEST(StagedDirectory, NeverReplacesADirectoryWithOtherFiles) {
  const std::string dir = scratch_path("project");
  fs::create_directories(dir);
  std::ofstream(dir + "/notes.txt") << "mine";
  EXPECT_THROW(StagedDirectory(dir, {"a.json"}), std::runtime_error);
  EXPECT_TRUE(fs::exists(dir + "/notes.txt"));
  std::ofstream(scratch_path("file")) << "x";
  EXPECT_THROW(StagedDirectory(scratch_path("file"), {"a.json"}), std::runtime_error);
}

// Like every other output, it is made in an existing directory: a mistyped parent is an error,
// not a tree of new directories.
TEST(StagedDirectory, NeedsItsParentToExist) {
  const std::string missing = scratch_path("missing");
  try {
    StagedDirectory staged(missing + "/run", {"a.json"});
    ADD_FAILURE() << "made " << missing;
  } catch (const std::runtime_error& error) {
    EXPECT_EQ(std::string(error.what()),
              "cannot create '" + missing + "/run': No such file or directory");
  }
  EXPECT_FALSE(fs::exists(missing));
}

// An output directory given as a symbolic link is written where the link leads, as a file's is,
// and the link is kept; one that leads into a missing directory, or in a loop, is refused when
// the staging begins (before a command's work), not when it commits.
TEST(StagedDirectory, FollowsASymbolicLinkAndKeepsIt) {
  const std::string target = scratch_path("results"), link = scratch_path("latest");
  fs::create_directory(target);
  fs::create_symlink("results", link);
  for (const char* run : {"first", "second"}) {
    StagedDirectory staged(link, {"a.json"});
    write_file_atomically(staged.staging() + "/a.json", run);
    staged.commit();
    EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link))) << run;
    EXPECT_EQ(read_file(target + "/a.json"), run);
  }
  EXPECT_EQ(names_in(pipebal::testing::scratch_dir()),
            (std::vector<std::string>{"latest", "results"}));

  const std::string dangling = scratch_path("dangling"), loop = scratch_path("loop");
  fs::create_symlink("missing/run", dangling);
  fs::create_symlink("loop", loop);
  for (const auto& [path, message] :
       {std::pair{dangling, "cannot create '" + dangling + "': No such file or directory"},
        std::pair{loop, "cannot write '" + loop + "': too many symbolic links"}}) {
    try {
      StagedDirectory staged(path, {"a.json"});
      ADD_FAILURE() << "staged " << path;
    } catch (const std::runtime_error& error) {
      EXPECT_EQ(std::string(error.what()), message);
    }
  }
}

// A path is quoted with its control characters escaped: the message stays one line, whole (the
// error report keeps the first line of a runtime error's text), and sends no escape sequence.
TEST(AtomicFile, MessagesEscapeTheControlCharactersOfPaths) {
  const std::string dir = pipebal::testing::scratch_dir();
  try {
    write_file_atomically(dir + "/no\ndir\x1b/x.json", "x");
    ADD_FAILURE() << "wrote into a missing directory";
  } catch (const std::runtime_error& error) {
    EXPECT_EQ(std::string(error.what()),
              "cannot write '" + dir + "/no\\ndir\\x1b/x.json': No such file or directory");
  }
  try {
    StagedDirectory staged(dir + "/no\tdir/run", {"a.json"});
    ADD_FAILURE() << "staged in a missing directory";
  } catch (const std::runtime_error& error) {
    EXPECT_EQ(std::string(error.what()),
              "cannot create '" + dir + "/no\\tdir/run': No such file or directory");
  }
}

}  // namespace
}  // namespace pipebal
