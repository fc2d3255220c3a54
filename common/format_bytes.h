// The one way pipebal writes a byte count for people: binary units, two decimals ("12 B",
// "1.50 KiB", "512.00 MiB"), in every table, message and report. Torch-free.
#pragma once

#include <string>

namespace pipebal {

std::string format_bytes(double bytes);

}  // namespace pipebal
