// A directory of the running test's own. CTest runs test cases in parallel processes: a path
// shared between two of them is a race, so every file a test writes goes under
// scratch_dir(), named after the test and the process.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "pipebal/common/remove_tree.h"

namespace pipebal::testing {

// Removes a test's scratch directory when the test passed; a failed test's stays for a look.
class ScratchCleaner : public ::testing::EmptyTestEventListener {
 public:
  explicit ScratchCleaner(std::string dir) : dir_(std::move(dir)) {}
  void OnTestEnd(const ::testing::TestInfo& test) override {
    if (!dir_.empty() && test.result() != nullptr && test.result()->Passed()) {
      remove_tree(dir_);
    }
    dir_.clear();
  }
  // The directory prepared for the running test; empty between tests.
  const std::string& dir() const { return dir_; }
  void set(std::string dir) { dir_ = std::move(dir); }

 private:
  std::string dir_;
};

// <TempDir>/pipebal-tests/<Suite>.<Test>-<pid>, created empty on the first call in a test and
// removed after it when it passed.
inline std::string scratch_dir() {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = test != nullptr ? std::string(test->test_suite_name()) + "." + test->name()
                                     : std::string("no-test");
  for (char& c : name) {
    if (c == '/') c = '_';  // parameterised tests: "Suite/Test.Name/3"
  }
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "pipebal-tests" /
                                    (name + "-" + std::to_string(::getpid()));
  static ScratchCleaner* cleaner = [] {
    auto* listener = new ScratchCleaner("");
    ::testing::UnitTest::GetInstance()->listeners().Append(listener);  // gtest owns it
    return listener;
  }();
  if (cleaner->dir() != dir.string()) {  // the first call in this test
    remove_tree(dir.string());
    std::filesystem::create_directories(dir);
    cleaner->set(dir.string());
  }
  return dir.string();
}

// scratch_dir() / name.
inline std::string scratch_path(const std::string& name) {
  return scratch_dir() + "/" + name;
}

// Writes `text` to `root` + `path`, making its directories: a tree of the kernel's files (sysfs,
// cgroupfs, /proc/self) laid out under a scratch directory as a machine has it.
inline void write_under(const std::string& root, const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(root + path).parent_path());
  std::ofstream(root + path) << text;
}

// A fresh, empty directory scratch_dir() / name.
inline std::string fresh_dir(const std::string& name) {
  const std::filesystem::path dir = scratch_path(name);
  remove_tree(dir.string());
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace pipebal::testing
