// See shared_segment.h.
#include "pipebal/distributed/shared_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <string>
#include <system_error>

namespace pipebal::distributed {
namespace {

std::system_error os_error(const std::string& what) {
  return std::system_error(errno, std::generic_category(), what);
}

uint8_t* map(int fd, size_t bytes, const std::string& what) {
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    const std::system_error error = os_error(what);
    ::close(fd);
    throw error;
  }
  return static_cast<uint8_t*>(data);
}

// Each segment holds a file descriptor for as long as it lives: a pipeline of many micro-batches
// may hold more than the usual soft limit of 1024, so it is raised to the hard limit on need.
bool raise_open_file_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return false;
  limit.rlim_cur = limit.rlim_max;
  return ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

}  // namespace

std::unique_ptr<SharedSegment> SharedSegment::create(size_t bytes) {
  int fd = ::memfd_create("pipebal-message", MFD_CLOEXEC);
  if (fd < 0 && errno == EMFILE && raise_open_file_limit()) {
    fd = ::memfd_create("pipebal-message", MFD_CLOEXEC);
  }
  if (fd < 0) throw os_error("memfd_create");
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const std::system_error error = os_error("sizing a shared segment");
    ::close(fd);
    throw error;
  }
  return std::unique_ptr<SharedSegment>(
      new SharedSegment(fd, map(fd, bytes, "mapping a shared segment"), bytes));
}

std::unique_ptr<SharedSegment> SharedSegment::open(const SegmentAddress& address, size_t bytes) {
  const std::string path =
      "/proc/" + std::to_string(address.pid) + "/fd/" + std::to_string(address.fd);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) throw os_error("opening " + path);
  struct stat status {};
  if (::fstat(fd, &status) != 0 || static_cast<size_t>(status.st_size) < bytes) {
    ::close(fd);
    throw std::system_error(std::make_error_code(std::errc::invalid_argument),
                            path + " is smaller than announced");
  }
  uint8_t* data = map(fd, bytes, "mapping " + path);
  ::close(fd);  // the mapping keeps the memory; another's segment is never grown from here
  return std::unique_ptr<SharedSegment>(new SharedSegment(-1, data, bytes));
}

SharedSegment::~SharedSegment() {
  ::munmap(data_, size_);
  if (fd_ >= 0) ::close(fd_);
}

SegmentAddress SharedSegment::address() const {
  return {static_cast<int64_t>(::getpid()), fd_};
}

void SharedSegment::grow(size_t bytes) {
  if (bytes <= size_) return;
  if (fd_ < 0) throw std::logic_error("another process's shared segment cannot be grown");
  if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) throw os_error("growing a shared segment");
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (data == MAP_FAILED) throw os_error("mapping a grown shared segment");
  ::munmap(data_, size_);
  data_ = static_cast<uint8_t*>(data);
  size_ = bytes;
}

}  // namespace pipebal::distributed
