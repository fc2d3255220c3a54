// What every command line shares: how it names the files it wrote.
#include "tools/command_line.h"

#include <gtest/gtest.h>

namespace pipebal::tools {
namespace {

TEST(FilesIn, NamesTheFirstFileWithItsDirectoryAndOneSlash) {
  EXPECT_EQ(files_in("out", {"profile.json", "plan.json"}), "out/profile.json, plan.json");
  EXPECT_EQ(files_in("out/", {"profile.json"}), "out/profile.json");
  EXPECT_EQ(files_in("plans//", {"*.json"}), "plans/*.json");
  EXPECT_EQ(files_in("/", {"run.json"}), "/run.json");
}

}  // namespace
}  // namespace pipebal::tools
