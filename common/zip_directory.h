// The entries of a zip archive (a TorchScript model, a torch.save file) as its central directory
// lists them: names and uncompressed sizes, read without reading the entries themselves. Zip64
// archives (more than 65,535 entries, or entries and offsets past 4 GiB) included. Torch-free.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pipebal {

struct ZipEntry {
  std::string name;
  uint64_t size = 0;  // uncompressed
};

// Reads `length` bytes at `offset` of the archive into `into`; false past its end.
using ReadAt = std::function<bool(uint64_t offset, size_t length, char* into)>;

// The entries of the archive of `size` bytes that `read_at` reads, in the directory's order.
// Throws std::runtime_error saying what is wrong when it is not a zip archive, or its directory
// is cut short or inconsistent.
std::vector<ZipEntry> zip_directory(uint64_t size, const ReadAt& read_at);

// The same for the file at `path` (std::runtime_error also when it cannot be read), and for an
// archive held in memory.
std::vector<ZipEntry> zip_directory(const std::string& path);
std::vector<ZipEntry> zip_directory(const char* data, size_t size);

}  // namespace pipebal
