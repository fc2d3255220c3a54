// Writing output files so that an interrupted run never leaves half a document behind:
// the text goes to a temporary file beside the target, which is then renamed over it.
#pragma once

#include <string>

namespace pipebal::reports {

// Writes `content` to `path` atomically (same-directory temporary file + rename).
// Throws std::runtime_error naming the path and the system error when it cannot.
void write_file_atomically(const std::string& path, const std::string& content);

// Reads a whole file; throws std::invalid_argument naming the path when it cannot be read.
std::string read_file(const std::string& path);

}  // namespace pipebal::reports
