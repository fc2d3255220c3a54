// See aligned_stack.h.
#include "pipebal/common/aligned_stack.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace pipebal {
namespace {

// Measured on the GPT's blocks (bench/stack-alignment.py): 0 and 32 gave the cheaper backward,
// 16 and 48 one 3% dearer. Which one is cheaper depends on the frames between here and the
// kernels, so the measurement is to be repeated when this file or handed_execute() changes.
constexpr int kDefaultOffset = 0;

std::optional<int> read_offset() {
  const char* text = std::getenv("PIPEBAL_STACK_OFFSET");
  if (text == nullptr || *text == '\0') return kDefaultOffset;
  const std::string value(text);
  if (value == "off") return std::nullopt;
  for (int offset : {0, 16, 32, 48}) {
    if (value == std::to_string(offset)) return offset;
  }
  throw std::invalid_argument("PIPEBAL_STACK_OFFSET='" + value +
                              "': expected off, 0, 16, 32 or 48 (bytes)");
}

}  // namespace

std::optional<int> stack_offset() {
  static const std::optional<int> offset = read_offset();
  return offset;
}

// Not inlined (it is in its own translation unit and the build does no link-time optimisation):
// its frame, aligned to 64 bytes by `line`, is where every body's frames start from. Not
// instrumented by AddressSanitizer, whose red zones around alloca would move the body by 32.
__attribute__((no_sanitize_address)) void run_at_stack_offset(int offset, void (*body)(void*),
                                                              void* context) {
  if (offset < 0 || offset >= 64 || offset % 16 != 0) {
    throw std::invalid_argument("stack offset " + std::to_string(offset) +
                                ": expected 0, 16, 32 or 48 (bytes)");
  }
  alignas(64) char line[64];
  asm volatile("" : : "r"(line) : "memory");  // kept, and with it the frame's alignment
  void* below = __builtin_alloca(static_cast<size_t>(offset));
  asm volatile("" : : "r"(below) : "memory");
  body(context);
}

void run_on_aligned_stack(void (*body)(void*), void* context) {
  const std::optional<int> offset = stack_offset();
  if (offset) {
    run_at_stack_offset(*offset, body, context);
  } else {
    body(context);
  }
}

}  // namespace pipebal
