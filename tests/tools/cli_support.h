// Runs the `pipebal` binary as a user would and captures its exit status and output.
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>
#include "tests/support/scratch_dir.h"

namespace pipebal::testing {

struct CliResult {
  int status = -1;
  std::string out;
  std::string err;
};

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// stdout and stderr go through files in the test's own scratch directory.
inline CliResult run_pipebal(const std::string& args) {
  const std::string out = scratch_path("pipebal.out"), err = scratch_path("pipebal.err");
  const std::string command = std::string(PIPEBAL_BINARY) + " " + args + " >" + out + " 2>" + err;
  const int raw = std::system(command.c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, read_text(out), read_text(err)};
}

// A copy of `profile` (written beside it) without the engine's measured costs: on tiny layers
// the engine's cost per action decides whether interleaving or zb-h1 (more actions per device)
// pays, so a check that the planner lists them plans from the layers alone.
inline std::string without_engine_costs(const std::string& profile) {
  const std::string copy = profile + ".layers.json";
  nlohmann::json doc = nlohmann::json::parse(read_text(profile));
  EXPECT_TRUE(doc.contains("engine")) << "no engine costs in " << profile;
  doc.erase("engine");
  std::ofstream(copy) << doc.dump(2);
  return copy;
}

inline int count_lines(const std::string& text) {
  int lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

}  // namespace pipebal::testing
