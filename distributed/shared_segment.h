// Memory two processes on one host both map: an anonymous memory file (memfd) of one process,
// which another process of the same user opens as /proc/<pid>/fd/<fd>. Nothing is named, so
// nothing is left behind: the kernel frees the memory once the last process that maps it has
// let go, however the processes end. Torch-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace pipebal::distributed {

// Where another process finds a segment.
struct SegmentAddress {
  int64_t pid = 0;
  int64_t fd = -1;
};

class SharedSegment {
 public:
  // A new segment of `bytes` (zero-filled) in this process. Throws std::system_error.
  static std::unique_ptr<SharedSegment> create(size_t bytes);
  // Another process's segment, mapped `bytes` long (at most its size); it holds no file
  // descriptor. Throws std::system_error when it cannot be opened (another host, another user,
  // the owner gone).
  static std::unique_ptr<SharedSegment> open(const SegmentAddress& address, size_t bytes);

  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  // The address of a segment this process created (another process reaches it through it only
  // while this process keeps it).
  SegmentAddress address() const;
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Enlarges a segment this process created to `bytes` and maps it anew (data() changes).
  // Other processes keep their mappings, of the old size.
  void grow(size_t bytes);

 private:
  SharedSegment(int fd, uint8_t* data, size_t size) : fd_(fd), data_(data), size_(size) {}

  int fd_;
  uint8_t* data_;
  size_t size_;
};

}  // namespace pipebal::distributed
