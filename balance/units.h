// Human-friendly sizes and rates on the command line: "8G", "512MiB", "1.5GB", "10GB/s".
#pragma once

#include <cstdint>
#include <string>

#include "pipebal/common/format_bytes.h"

namespace pipebal::balance {

// Parses a byte count: a non-negative number with an optional suffix. K, M, G, T and KiB, MiB,
// GiB, TiB are binary (powers of 1024, as `docker --memory 8g` reads them); KB, MB, GB, TB are
// decimal (powers of 1000); B or no suffix is bytes. Letters are case-insensitive; the number is
// decimal (no hexadecimal). Throws std::invalid_argument quoting the text and giving examples.
int64_t parse_bytes(const std::string& text);

// Parses a link bandwidth "10GB/s", "500MiB/s" or "1e9" (bytes per second; "/s" optional), or
// in bits, "25Gbit/s" (3.125 GB/s; Gibit binary), and returns bytes per millisecond, the unit the
// cost model uses. A unit ending in a lower-case b ("10Gb/s": bits or bytes?) is refused. Throws
// like parse_bytes.
double parse_bandwidth_bytes_per_ms(const std::string& text);

// "10.00 GB/s" (decimal, as link speeds are quoted) from bytes per millisecond.
std::string format_bandwidth(double bytes_per_ms);

}  // namespace pipebal::balance
