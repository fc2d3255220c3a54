// See env_flag.h.
#include "pipebal/common/env_flag.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace pipebal {

bool env_flag(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return false;
  const std::string text = value;
  if (text.empty() || text == "0") return false;
  if (text == "1") return true;
  std::string shown = text;  // one line, whatever the value holds
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  throw std::invalid_argument(std::string(name) + " must be 1 (on), or 0 or empty (off), got '" +
                              shown + "'");
}

}  // namespace pipebal
