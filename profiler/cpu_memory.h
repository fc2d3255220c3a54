// CPU memory accounting for the profiler: a counting allocator wrapped around LibTorch's CPU
// allocator, installed with c10::SetCPUAllocator only while a CpuMemoryScope lives.
//
// Global state, and why: LibTorch looks its CPU allocator up in a process-wide table, so the
// counting allocator is one static object (the only global state of the profiler). It is never
// destroyed, because a tensor allocated inside a scope may be freed long after the scope ended
// (or during static destruction), and its deleter then reports back to this object.
#pragma once

#include <cstdint>
#include <functional>

namespace pipebal::profiler {

// Counts every CPU allocation made while a scope is installed, and its release whenever that
// happens. Allocations made before the scope, or after it, are not counted.
//
// Thread-safety: any thread may allocate, free and read the counters. Scopes may nest and may
// be created from different threads; the first installs, the last restores the previous
// allocator. Throws std::runtime_error when the counting allocator cannot be installed (another
// allocator was registered with a higher c10 priority).
class CpuMemoryScope {
 public:
  CpuMemoryScope();
  ~CpuMemoryScope();
  CpuMemoryScope(const CpuMemoryScope&) = delete;
  CpuMemoryScope& operator=(const CpuMemoryScope&) = delete;

  // Bytes allocated under a scope and not yet freed.
  int64_t current_bytes() const;
  // The highest current_bytes since the last reset_peak().
  int64_t peak_bytes() const;
  // Starts a new peak at the current value, for the total and for every tag.
  void reset_peak();

  // Per-tag accounting: an allocation counts towards the tag of the thread that made it (until
  // it is freed, by whichever thread), e.g. a pipeline stage's worker. Tags are 0..kMaxTags-1;
  // -1 (every thread's default) means untagged.
  static constexpr int kMaxTags = 1024;
  static void set_thread_tag(int tag);
  int64_t current_bytes(int tag) const;
  int64_t peak_bytes(int tag) const;

  // Memory held outside ATen's allocator (a message in another process's shared memory that a
  // stage keeps): counted like an allocation of `bytes` by the calling thread until the returned
  // function is called, once, from any thread.
  static std::function<void()> count_held(int64_t bytes);

  // The counted block starting at `data` becomes the calling thread's: its bytes move to this
  // thread's tag, and leave it when the block is freed. Memory that was not allocated under a
  // scope stays uncounted.
  static void hand_over(const void* data);

  // Whether a scope is installed now (allocations are being counted).
  static bool counting();
};

}  // namespace pipebal::profiler
