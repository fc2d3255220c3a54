// See cpu_memory_guard.h.
#include "pipebal/workflow/cpu_memory_guard.h"

#include <cstdint>
#include <cstring>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "pipebal/common/cgroups.h"
#include "pipebal/common/format_bytes.h"
#include "pipebal/common/jemalloc_control.h"

namespace pipebal::workflow {
namespace {

// Below this a tensor is weighed against memory alone, not with those held: asking the allocator
// what it holds (a refresh of its statistics) costs more than every small tensor should pay.
constexpr size_t kWeighedBytes = size_t{256} << 20;

// The bytes the process's allocations hold now, where jemalloc can say (stats.allocated).
std::optional<size_t> held_bytes() {
  const Mallctl mallctl = jemalloc_mallctl();
  if (mallctl == nullptr) return std::nullopt;
  uint64_t epoch = 1;
  size_t size = sizeof(epoch);
  if (mallctl("epoch", &epoch, &size, &epoch, size) != 0) return std::nullopt;  // fresh stats
  size_t allocated = 0;
  size = sizeof(allocated);
  if (mallctl("stats.allocated", &allocated, &size, nullptr, 0) != 0) return std::nullopt;
  return allocated;
}

class GuardedCpuAllocator final : public c10::Allocator {
 public:
  explicit GuardedCpuAllocator(c10::Allocator* inner)
      : inner_(inner),
        usable_bytes_(usable_memory_bytes()),
        usable_text_(usable_memory_text()),
        swap_bytes_(swap_bytes()) {}

  // LibTorch 1.x declares allocate() const and 2.x (from 2.3) not: both are defined, and each
  // version overrides its own (no `override`, which one of them would not compile).
  c10::DataPtr allocate(size_t bytes) const {
    if (bytes >= kWeighedBytes || bytes > usable_bytes_) {
      const std::optional<std::string> refusal =
          allocation_refusal(bytes, bytes >= kWeighedBytes ? held_bytes() : std::nullopt,
                             usable_bytes_, usable_text_, swap_bytes_);
      if (refusal) C10_THROW_ERROR(OutOfMemoryError, *refusal);
    }
    return inner_->allocate(bytes);
  }
  c10::DataPtr allocate(size_t bytes) {
    return static_cast<const GuardedCpuAllocator*>(this)->allocate(bytes);
  }
  c10::DeleterFnPtr raw_deleter() const { return inner_->raw_deleter(); }
  // Pure virtual from LibTorch 2.3; what its CPU allocator does.
  void copy_data(void* dest, const void* src, std::size_t count) const {
    std::memcpy(dest, src, count);
  }

 private:
  c10::Allocator* inner_;
  double usable_bytes_;
  std::string usable_text_;
  double swap_bytes_;
};

}  // namespace

std::optional<std::string> allocation_refusal(size_t bytes, std::optional<size_t> held_bytes,
                                              double usable_bytes, const std::string& usable_text,
                                              double swap_bytes) {
  if (!(usable_bytes > 0)) return std::nullopt;  // not known: nothing to weigh against
  const double most = usable_bytes + swap_bytes;
  const std::string swap = swap_bytes > 0 ? " and swap (" + format_bytes(swap_bytes) + ")" : "";
  if (static_cast<double>(bytes) > most) {
    return fmt::format("cannot allocate {} for one tensor: more than {}{}",
                       format_bytes(static_cast<double>(bytes)), usable_text, swap);
  }
  if (held_bytes && static_cast<double>(*held_bytes) + static_cast<double>(bytes) > most) {
    return fmt::format(
        "cannot allocate {} for a tensor: with the {} this process holds already, "
        "more than {}{}",
        format_bytes(static_cast<double>(bytes)), format_bytes(static_cast<double>(*held_bytes)),
        usable_text, swap);
  }
  return std::nullopt;
}

void guard_cpu_allocations() {
  // Never destroyed: LibTorch keeps the pointer to the end, its own static destructors and any
  // thread still running at exit included.
  static auto* const guard = new GuardedCpuAllocator(c10::GetCPUAllocator());
  c10::SetCPUAllocator(guard);
}

}  // namespace pipebal::workflow
