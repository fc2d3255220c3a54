// Where the profiler reads memory from: the counting CPU allocator on the CPU, the caching
// allocator's statistics on a CUDA device. Both report bytes relative to nothing in
// particular; the profiler only ever uses differences and peaks.
#pragma once

#include <cstdint>
#include <memory>

#include <c10/core/Device.h>

namespace pipebal::profiler {

// Called from the profiling thread only.
class MemoryMeter {
 public:
  virtual ~MemoryMeter() = default;
  virtual int64_t current_bytes() = 0;
  virtual int64_t peak_bytes() = 0;
  // Starts a new peak at the current value.
  virtual void reset_peak() = 0;
};

// A CPU meter installs the counting allocator for its lifetime. Throws std::invalid_argument
// for a CUDA device when pipebal was built without CUDA.
std::unique_ptr<MemoryMeter> make_memory_meter(const c10::Device& device);

#ifdef PIPEBAL_WITH_CUDA
// cuda_memory.cpp: the CUDA caching allocator's allocated-bytes statistics for `device`.
std::unique_ptr<MemoryMeter> make_cuda_memory_meter(const c10::Device& device);
#endif

}  // namespace pipebal::profiler
