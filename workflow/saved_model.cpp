// See saved_model.h.
#include "pipebal/workflow/saved_model.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "pipebal/common/atomic_file.h"
#include "pipebal/pipeline/error_text.h"

namespace pipebal::workflow {

void save_trained_model(const models::Model& model, const std::string& path) {
  std::stringstream bytes;
  try {
    model.save(bytes);
  } catch (const std::exception& error) {  // LibTorch's own
    throw std::invalid_argument(fmt::format("cannot save the trained model to '{}': {}", path,
                                            pipeline::error_summary(error)));
  }
  try {
    // Straight from the stream's buffer: no second copy of the model in memory.
    write_file_atomically_with(path, [&bytes, &path](const std::string& temporary) {
      std::ofstream file(temporary, std::ios::binary);
      errno = 0;
      // In blocks, each write checked: `file << bytes.rdbuf()` stops silently at a failed one.
      std::vector<char> block(1 << 20);
      while (file && (bytes.read(block.data(), static_cast<std::streamsize>(block.size())) ||
                      bytes.gcount() > 0)) {
        file.write(block.data(), bytes.gcount());
      }
      file.close();
      if (!file) {
        throw std::runtime_error(fmt::format(
            "cannot write '{}': {}", path, errno != 0 ? std::strerror(errno) : "the write failed"));
      }
    });
  } catch (const std::runtime_error& error) {  // "cannot write 'path': why"
    throw std::invalid_argument(error.what());
  }
}
}  // namespace pipebal::workflow
