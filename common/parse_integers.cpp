// See parse_integers.h.
#include "pipebal/common/parse_integers.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace pipebal {

std::optional<int64_t> parse_integer(const std::string& text) {
  if (text.empty() || text.front() == ' ' || text.front() == '\t') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) return std::nullopt;
  return static_cast<int64_t>(value);
}

std::optional<std::vector<int64_t>> parse_integer_list(const std::string& text) {
  std::vector<int64_t> values;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::optional<int64_t> value = parse_integer(text.substr(start, comma - start));
    if (!value) return std::nullopt;
    values.push_back(*value);
    start = comma + 1;
  }
  return values;
}

}  // namespace pipebal
