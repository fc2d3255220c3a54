// See zip_directory.h. The layout is PKWARE's APPNOTE (sections 4.3.12-4.3.16 and 4.5.3).
#include "pipebal/common/zip_directory.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace pipebal {
namespace {

constexpr size_t kEndSize = 22;            // the end of central directory record, comment apart
constexpr size_t kLocatorSize = 20;        // the zip64 end of central directory locator
constexpr size_t kEnd64Size = 56;          // the zip64 end of central directory record
constexpr size_t kEntryHeaderSize = 46;    // a central directory file header, name apart
constexpr size_t kLongestComment = 65535;  // the archive comment's length is 16 bits
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint32_t kLocatorSignature = 0x07064b50;
constexpr uint32_t kEnd64Signature = 0x06064b50;
constexpr uint32_t kEntrySignature = 0x02014b50;

uint64_t little_endian(const char* at, int bytes) {
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = value << 8 | static_cast<unsigned char>(at[i]);
  return value;
}
uint16_t u16(const char* at) {
  return static_cast<uint16_t>(little_endian(at, 2));
}
uint32_t u32(const char* at) {
  return static_cast<uint32_t>(little_endian(at, 4));
}
uint64_t u64(const char* at) {
  return little_endian(at, 8);
}

[[noreturn]] void damaged(const std::string& why) {
  throw std::runtime_error("not a zip archive it can read: " + why);
}

std::string read_exactly(const ReadAt& read_at, uint64_t offset, size_t length) {
  std::string bytes(length, '\0');
  if (!read_at(offset, length, bytes.data())) damaged("its central directory is cut short");
  return bytes;
}

// Where the central directory starts, how long it is and how many entries it lists.
struct Directory {
  uint64_t offset = 0, size = 0, entries = 0;
};

Directory find_directory(uint64_t archive_size, const ReadAt& read_at) {
  if (archive_size < kEndSize) damaged("shorter than the end of a central directory");
  const uint64_t tail_size = std::min<uint64_t>(archive_size, kEndSize + kLongestComment);
  const uint64_t tail_start = archive_size - tail_size;
  const std::string tail = read_exactly(read_at, tail_start, static_cast<size_t>(tail_size));
  // The end record whose comment reaches the end of the archive (a comment may hold the record's
  // signature); failing one, the last whose comment fits (bytes appended after the archive).
  size_t end = std::string::npos;
  for (size_t at = tail.size() - kEndSize + 1; at-- > 0;) {
    if (u32(&tail[at]) != kEndSignature) continue;
    const size_t reach = at + kEndSize + u16(&tail[at + 20]);
    if (reach == tail.size()) {
      end = at;
      break;
    }
    if (reach < tail.size() && end == std::string::npos) end = at;
  }
  if (end == std::string::npos) damaged("no end of central directory");
  const char* record = &tail[end];
  Directory directory{u32(record + 16), u32(record + 12), u16(record + 10)};
  uint32_t disk = u16(record + 4), directory_disk = u16(record + 6);
  const uint64_t end_offset = tail_start + end;
  // A zip64 archive puts a locator of the zip64 end record just before the end record; one that
  // leads to no such record is a comment's bytes, as LibTorch's reader (miniz) takes it.
  if (end_offset >= kLocatorSize) {
    const std::string locator = read_exactly(read_at, end_offset - kLocatorSize, kLocatorSize);
    const uint64_t end64_offset = u64(locator.data() + 8);
    if (u32(locator.data()) == kLocatorSignature && end64_offset <= end_offset - kLocatorSize &&
        end_offset - kLocatorSize - end64_offset >= kEnd64Size) {
      const std::string end64 = read_exactly(read_at, end64_offset, kEnd64Size);
      if (u32(end64.data()) == kEnd64Signature) {
        directory = {u64(end64.data() + 48), u64(end64.data() + 40), u64(end64.data() + 32)};
        disk = u32(end64.data() + 16);
        directory_disk = u32(end64.data() + 20);
      }
    }
  }
  // One disk, numbered 0 (or 1, which some writers use and miniz takes).
  if (disk != directory_disk || disk > 1) damaged("it spans several disks");
  if (directory.offset > end_offset || directory.size > end_offset - directory.offset) {
    damaged("its central directory lies outside the archive");
  }
  if (directory.entries > directory.size / kEntryHeaderSize) {
    damaged("its central directory is shorter than its entries");
  }
  return directory;
}

// The uncompressed size of an entry whose 32-bit field says 0xFFFFFFFF, from its zip64 extended
// information: the 64-bit values of the fields that say so, uncompressed size first.
void read_zip64_size(const char* extra, size_t length, bool compressed_in_extra, uint64_t& size) {
  for (size_t at = 0; at + 4 <= length;) {
    const uint16_t id = u16(extra + at);
    const size_t data_length = u16(extra + at + 2);
    if (at + 4 + data_length > length) break;
    if (id == kZip64ExtraId) {
      if (data_length < (compressed_in_extra ? 16u : 8u)) break;
      size = u64(extra + at + 4);
      return;
    }
    at += 4 + data_length;
  }
  damaged("an entry's zip64 sizes are missing");
}

}  // namespace

std::vector<ZipEntry> zip_directory(uint64_t size, const ReadAt& read_at) {
  const Directory directory = find_directory(size, read_at);
  const std::string bytes =
      read_exactly(read_at, directory.offset, static_cast<size_t>(directory.size));
  std::vector<ZipEntry> entries;
  entries.reserve(static_cast<size_t>(directory.entries));
  size_t at = 0;
  for (uint64_t i = 0; i < directory.entries; ++i) {
    if (bytes.size() - at < kEntryHeaderSize || u32(&bytes[at]) != kEntrySignature) {
      damaged("its central directory is inconsistent");
    }
    const char* header = &bytes[at];
    const size_t name_length = u16(header + 28), extra_length = u16(header + 30),
                 comment_length = u16(header + 32);
    if (bytes.size() - at - kEntryHeaderSize < name_length + extra_length + comment_length) {
      damaged("its central directory is inconsistent");
    }
    ZipEntry entry;
    entry.name.assign(header + kEntryHeaderSize, name_length);
    entry.size = u32(header + 24);
    if (entry.size == 0xFFFFFFFF) {
      read_zip64_size(header + kEntryHeaderSize + name_length, extra_length,
                      u32(header + 20) == 0xFFFFFFFF, entry.size);
    }
    entries.push_back(std::move(entry));
    at += kEntryHeaderSize + name_length + extra_length + comment_length;
  }
  return entries;
}

std::vector<ZipEntry> zip_directory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot read '" + path + "': " + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw std::runtime_error("cannot read '" + path + "': " + why);
  }
  const auto read_at = [fd](uint64_t offset, size_t length, char* into) {
    while (length > 0) {
      const ssize_t got = ::pread(fd, into, length, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      into += got;
      offset += static_cast<uint64_t>(got);
      length -= static_cast<size_t>(got);
    }
    return true;
  };
  try {
    std::vector<ZipEntry> entries = zip_directory(static_cast<uint64_t>(info.st_size), read_at);
    ::close(fd);
    return entries;
  } catch (...) {
    ::close(fd);
    throw;
  }
}

std::vector<ZipEntry> zip_directory(const char* data, size_t size) {
  return zip_directory(size, [data, size](uint64_t offset, size_t length, char* into) {
    if (offset > size || length > size - offset) return false;
    std::memcpy(into, data + offset, length);
    return true;
  });
}

}  // namespace pipebal
