// See atomic_file.h.
#include "reports/atomic_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <unistd.h>

namespace pipebal::reports {
namespace {

std::string system_error_text() {
  return std::strerror(errno);
}

// Removes the temporary file unless ownership was released by a successful rename.
class TemporaryFile {
 public:
  explicit TemporaryFile(std::string path) : path_(std::move(path)) {}
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile() {
    if (!path_.empty()) std::remove(path_.c_str());
  }
  const std::string& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  std::string path_;
};

}  // namespace

void write_file_atomically(const std::string& path, const std::string& content) {
  TemporaryFile temporary(path + ".tmp." + std::to_string(::getpid()));
  {
    std::ofstream out(temporary.path(), std::ios::binary | std::ios::trunc);
    if (!out) {
      throw std::runtime_error("cannot write '" + path + "': " + system_error_text());
    }
    out << content;
    out.flush();
    if (!out) throw std::runtime_error("cannot write '" + path + "': " + system_error_text());
  }
  if (std::rename(temporary.path().c_str(), path.c_str()) != 0) {
    throw std::runtime_error("cannot write '" + path + "': " + system_error_text());
  }
  temporary.release();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("cannot read '" + path + "': " + system_error_text());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace pipebal::reports
