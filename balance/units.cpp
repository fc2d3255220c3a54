// See units.h.
#include "pipebal/balance/units.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace pipebal::balance {
namespace {

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

bool ends_with_ignoring_case(const std::string& text, const std::string& lower_suffix) {
  return text.size() >= lower_suffix.size() &&
         lower(text.substr(text.size() - lower_suffix.size())) == lower_suffix;
}

// Multiplier for a lower-cased suffix, or 0 when the suffix is unknown.
double suffix_multiplier(const std::string& suffix) {
  static constexpr const char* kPrefixes = "kmgt";
  if (suffix.empty() || suffix == "b") return 1.0;
  const char* found = std::strchr(kPrefixes, suffix[0]);
  if (found == nullptr) return 0.0;
  const int power = static_cast<int>(found - kPrefixes) + 1;
  const std::string rest = suffix.substr(1);
  if (rest.empty() || rest == "i" || rest == "ib") return std::pow(1024.0, power);
  if (rest == "b") return std::pow(1000.0, power);
  return 0.0;
}

// Reads "1.5GiB" as 1.5 * 1024^3 into `value`; false when the text is not a size.
bool parse_scaled(const std::string& text, double& value) {
  // Decimal only: strtod would also read hexadecimal ("0x10G", "0x1p4K").
  if (text.find_first_of("xX") != std::string::npos) return false;
  const char* begin = text.c_str();
  char* end = nullptr;
  const double number = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(number) || number < 0) return false;
  std::string suffix = lower(std::string(end));
  while (!suffix.empty() && suffix.front() == ' ') suffix.erase(suffix.begin());
  const double multiplier = suffix_multiplier(suffix);
  if (multiplier == 0.0) return false;
  value = number * multiplier;
  return true;
}

}  // namespace

int64_t parse_bytes(const std::string& text) {
  double bytes = 0;
  // 9.2e18 is the largest byte count an int64_t holds.
  if (!parse_scaled(text, bytes) || bytes > 9.2e18) {
    throw std::invalid_argument("cannot read byte size '" + text +
                                "' (examples: 8G, 512MiB, 1.5GB, 1048576)");
  }
  return static_cast<int64_t>(std::llround(bytes));
}

double parse_bandwidth_bytes_per_ms(const std::string& text) {
  std::string size = text;
  if (ends_with_ignoring_case(size, "/s")) size.resize(size.size() - 2);
  // Links are quoted in bits as often as in bytes: "bit" says bits (its prefixes decimal, as
  // in 10Gbit/s, or binary with i), and a lower-case b alone ("10Gb/s") is refused, not guessed.
  const bool in_bits = ends_with_ignoring_case(size, "bit");
  if (in_bits) {
    size.resize(size.size() - 3);
    size += "B";
  } else if (!size.empty() && size.back() == 'b') {
    const std::string number = size.substr(0, size.size() - 1);
    throw std::invalid_argument(fmt::format(
        "bandwidth '{}': a lower-case b may be bits or bytes; write {}B/s for bytes or {}bit/s "
        "for bits",
        text, number, number));
  }
  double bytes_per_s = 0;
  if (!parse_scaled(size, bytes_per_s)) {
    throw std::invalid_argument("cannot read bandwidth '" + text +
                                "' (examples: 10GB/s, 500MiB/s, 25Gbit/s, 1e9 for bytes per "
                                "second)");
  }
  if (in_bits) bytes_per_s /= 8;
  // Past a double's range the number becomes infinity, which a plan could not write back.
  if (!std::isfinite(bytes_per_s)) {
    throw std::invalid_argument("bandwidth '" + text + "' is too large (leave it out for free " +
                                "transfers)");
  }
  if (!(bytes_per_s >= 1)) {
    throw std::invalid_argument("bandwidth '" + text +
                                "' must be at least 1 byte/s (leave it out for free transfers)");
  }
  return bytes_per_s / 1000.0;
}

std::string format_bandwidth(double bytes_per_ms) {
  static constexpr const char* kUnits[] = {"B/s", "KB/s", "MB/s", "GB/s", "TB/s"};
  double value = bytes_per_ms * 1000.0;
  int unit = 0;
  while (value >= 1000.0 && unit < 4) {
    value /= 1000.0;
    ++unit;
  }
  return fmt::format("{:.2f} {}", value, kUnits[unit]);
}

}  // namespace pipebal::balance
