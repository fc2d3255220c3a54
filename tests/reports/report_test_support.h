// What the report's tests share: the hand-made validation directory, copies of it a test may
// change, counting in a page, and the message of the std::invalid_argument an action throws.
#pragma once

#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "pipebal/common/atomic_file.h"
#include "tests/support/scratch_dir.h"

namespace pipebal::reports {

inline const std::string kFixtureDir = PIPEBAL_FIXTURES_DIR "/../reports/fixtures/validation_dir";

// How often `needle` occurs in `text`.
inline size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// A fresh copy of the fixture directory that a test may change, in the test's scratch directory.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name) : path_(pipebal::testing::fresh_dir(name)) {
    std::filesystem::copy(kFixtureDir, path_);
  }
  std::string path() const { return path_.string(); }
  std::string file(const char* name) const { return (path_ / name).string(); }
  nlohmann::json read(const char* name) const {
    return nlohmann::json::parse(read_file(file(name)));
  }
  void write(const char* name, const nlohmann::json& doc) const {
    write_file_atomically(file(name), doc.dump());
  }

 private:
  std::filesystem::path path_;
};

inline std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "(no std::invalid_argument thrown)";
}

}  // namespace pipebal::reports
