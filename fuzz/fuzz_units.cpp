// Sizes and bandwidths as typed on the command line (--memory-cap, --bandwidth).
#include <string>

#include "fuzz/fuzz_support.h"
#include "pipebal/balance/units.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  pipebal::fuzz::refusing_is_fine([&] {
    const int64_t bytes = pipebal::balance::parse_bytes(text);
    (void)pipebal::format_bytes(bytes);
  });
  pipebal::fuzz::refusing_is_fine([&] {
    const double per_ms = pipebal::balance::parse_bandwidth_bytes_per_ms(text);
    (void)pipebal::balance::format_bandwidth(per_ms);
  });
  return 0;
}
