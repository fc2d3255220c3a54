// See error_text.h.
#include "pipebal/common/error_text.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include <fmt/format.h>

namespace pipebal {
namespace {

constexpr const char* kInterpreterHeader = "The following operation failed in the TorchScript";

// "RuntimeError: ...", "builtins.ValueError: ...", "torch.jit.Error: ...": a Python exception
// line as the interpreter prints it under its traceback.
bool is_exception_line(const std::string& line) {
  const auto colon = line.find(": ");
  if (colon == std::string::npos || colon == 0) return false;
  for (size_t i = 0; i < colon; ++i) {
    const char c = line[i];
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  }
  const std::string name = line.substr(0, colon);
  return name.size() >= 5 && (name.rfind("Error") == name.size() - 5 ||
                              (name.size() >= 9 && name.rfind("Exception") == name.size() - 9));
}

}  // namespace

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

std::string summarize_error_text(const std::string& text) {
  if (text.rfind(kInterpreterHeader, 0) != 0) return first_line(text);
  // The traceback's frames are indented; the cause is the first exception line after them.
  std::istringstream lines(text);
  std::string line;
  std::string last;
  while (std::getline(lines, line)) {
    if (is_exception_line(line)) return line;
    if (!line.empty() && line[0] != ' ') last = line;
  }
  return last.empty() ? first_line(text) : last;
}

std::string printable(const std::string& text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xF];
    } else {
      out += c;
    }
  }
  return out;
}

std::string quote(const std::string& text) {
  return "'" + printable(text) + "'";
}

std::string shortened(const std::string& text, size_t most) {
  most = std::max<size_t>(most, 64);
  if (text.size() <= most) return text;
  const auto continues = [&](size_t i) {
    return (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80;
  };
  // Two thirds of the room before the cut, one third after it, less the note between (at most 48
  // bytes).
  const size_t room = most - 48;
  size_t head = room * 2 / 3;
  while (head > 0 && continues(head)) --head;  // not inside a character
  size_t tail = text.size() - (room - room * 2 / 3);
  while (tail < text.size() && continues(tail)) ++tail;
  return text.substr(0, head) + fmt::format(" [... {} bytes left out ...] ", tail - head) +
         text.substr(tail);
}

}  // namespace pipebal
