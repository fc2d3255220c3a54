// See remove_tree.h.
#include "pipebal/common/remove_tree.h"

#include <ftw.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace pipebal {
namespace {

// nftw's callback: entries come children first (FTW_DEPTH), links as links (FTW_PHYS).
int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  return std::remove(path) == 0 ? 0 : errno;
}

}  // namespace

bool remove_tree(const std::string& path, std::string* error) {
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return true;
    if (error) *error = std::strerror(errno);
    return false;
  }
  const int failed = ::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  if (failed == 0) return true;
  if (error) *error = std::strerror(failed > 0 ? failed : errno);
  return false;
}

}  // namespace pipebal
