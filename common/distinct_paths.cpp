// See distinct_paths.h.
#include "common/distinct_paths.h"

#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace pipebal {
namespace fs = std::filesystem;

bool same_file(const std::string& a, const std::string& b) {
  std::error_code error;
  if (fs::exists(a, error) && fs::exists(b, error)) {
    const bool same = fs::equivalent(a, b, error);
    return !error && same;
  }
  const fs::path left = fs::weakly_canonical(fs::absolute(a, error), error);
  if (error) return false;
  const fs::path right = fs::weakly_canonical(fs::absolute(b, error), error);
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
      throw std::invalid_argument(output.option + " " + output.path + " is the file " +
                                  input.option + " reads: writing it would replace it; give " +
                                  output.option + " another path");
    }
    for (size_t other = 0; other < o; ++other) {
      if (outputs[other].path.empty() || !same_file(output.path, outputs[other].path)) continue;
      throw std::invalid_argument(outputs[other].option + " and " + output.option +
                                  " name the same file (" + output.path +
                                  "): one would replace the other; give each its own path");
    }
  }
}

}  // namespace pipebal
