// See memory_meter.h: the CUDA meter. Compiled only when PIPEBAL_WITH_CUDA is set by CMake.
#include "pipebal/profiler/memory_meter.h"

#include <c10/cuda/CUDACachingAllocator.h>

namespace pipebal::profiler {
namespace {

namespace caching = c10::cuda::CUDACachingAllocator;

// Allocated (not reserved) bytes: what tensors hold, which is what a stage needs; the cache's
// slack depends on history and says nothing about the layer.
class CudaMemoryMeter final : public MemoryMeter {
 public:
  explicit CudaMemoryMeter(const c10::Device& device)
      : index_(device.has_index() ? device.index() : 0) {}
  int64_t current_bytes() override {
    return caching::getDeviceStats(index_).allocated_bytes[kAggregate].current;
  }
  int64_t peak_bytes() override {
    return caching::getDeviceStats(index_).allocated_bytes[kAggregate].peak;
  }
  void reset_peak() override { caching::resetPeakStats(index_); }

 private:
  // StatType::AGGREGATE (all pools), the first entry. Named by index because the enum moved
  // from c10::cuda::CUDACachingAllocator to c10::CachingDeviceAllocator in LibTorch 2.x.
  static constexpr size_t kAggregate = 0;
  c10::DeviceIndex index_;
};

}  // namespace

std::unique_ptr<MemoryMeter> make_cuda_memory_meter(const c10::Device& device) {
  return std::make_unique<CudaMemoryMeter>(device);
}

}  // namespace pipebal::profiler
