// See distinct_paths.h.
#include "pipebal/common/distinct_paths.h"

#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace pipebal {
namespace fs = std::filesystem;

namespace {

// Where a write to `path` lands: its symbolic links followed, a dangling one's target too (as
// write_file_atomically follows them), then made absolute with its directories' links resolved.
fs::path landing(const std::string& path, std::error_code& error) {
  fs::path at = fs::absolute(path, error);
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(at, error)); ++hops) {
    const fs::path target = fs::read_symlink(at, error);
    if (error) break;
    at = target.is_absolute() ? target : at.parent_path() / target;
  }
  return fs::weakly_canonical(at, error);
}

}  // namespace

bool same_file(const std::string& a, const std::string& b) {
  std::error_code error;
  if (fs::exists(a, error) && fs::exists(b, error)) {
    const bool same = fs::equivalent(a, b, error);
    return !error && same;
  }
  const fs::path left = landing(a, error);
  if (error) return false;
  const fs::path right = landing(b, error);
  return !error && left == right;
}

void check_outputs_apart(const std::vector<NamedPath>& inputs,
                         const std::vector<NamedPath>& outputs) {
  for (size_t o = 0; o < outputs.size(); ++o) {
    const NamedPath& output = outputs[o];
    if (output.path.empty()) continue;
    for (const NamedPath& input : inputs) {
      std::error_code error;
      if (input.path.empty() || !fs::exists(input.path, error)) continue;
      if (!same_file(output.path, input.path)) continue;
      throw std::invalid_argument(output.option + " '" + output.path + "' is the file " +
                                  input.option + " reads: writing it would replace it; give " +
                                  output.option + " another path");
    }
    for (size_t other = 0; other < o; ++other) {
      if (outputs[other].path.empty() || !same_file(output.path, outputs[other].path)) continue;
      throw std::invalid_argument(outputs[other].option + " and " + output.option +
                                  " name the same file ('" + output.path +
                                  "'): one would replace the other; give each its own path");
    }
  }
}

}  // namespace pipebal
