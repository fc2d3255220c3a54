// A directory of the running test's own. CTest runs test cases in parallel processes: a path
// shared between two of them is a race, so every file a test writes goes under
// scratch_dir(), named after the test and the process.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace pipebal::testing {

// <TempDir>/pipebal-tests/<Suite>.<Test>-<pid>, created empty on the first call in a test.
inline std::string scratch_dir() {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = test != nullptr
                         ? std::string(test->test_suite_name()) + "." + test->name()
                         : std::string("no-test");
  for (char& c : name) {
    if (c == '/') c = '_';  // parameterised tests: "Suite/Test.Name/3"
  }
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                    "pipebal-tests" /
                                    (name + "-" + std::to_string(::getpid()));
  static std::string prepared;  // one process runs one test at a time
  if (prepared != dir.string()) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    prepared = dir.string();
  }
  return dir.string();
}

// scratch_dir() / name.
inline std::string scratch_path(const std::string& name) {
  return scratch_dir() + "/" + name;
}

// A fresh, empty directory scratch_dir() / name.
inline std::string fresh_dir(const std::string& name) {
  const std::filesystem::path dir = scratch_path(name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace pipebal::testing
