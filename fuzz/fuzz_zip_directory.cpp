// A zip archive's directory (common/zip_directory.h), which pipebal reads from every TorchScript
// model and torch.save file it loads.
#include <cstdint>

#include "fuzz/fuzz_support.h"
#include "pipebal/common/zip_directory.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pipebal::fuzz::refusing_is_fine([&] {
    uint64_t listed = 0;
    for (const pipebal::ZipEntry& entry :
         pipebal::zip_directory(reinterpret_cast<const char*>(data), size)) {
      listed += entry.name.size();
    }
    (void)listed;
  });
  return 0;
}
