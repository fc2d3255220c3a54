// See format_bytes.h.
#include "pipebal/common/format_bytes.h"

#include <cmath>

#include <fmt/format.h>

namespace pipebal {

std::string format_bytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (std::fabs(bytes) >= 1024.0 && unit < 6) {
    bytes /= 1024.0;
    ++unit;
  }
  if (unit == 0) return fmt::format("{:.0f} B", bytes);
  return fmt::format("{:.2f} {}", bytes, kUnits[unit]);
}

}  // namespace pipebal
