// See memory_meter.h.
#include "pipebal/profiler/memory_meter.h"

#include <stdexcept>

#include "pipebal/profiler/cpu_memory.h"

namespace pipebal::profiler {
namespace {

class CpuMemoryMeter final : public MemoryMeter {
 public:
  int64_t current_bytes() override { return scope_.current_bytes(); }
  int64_t peak_bytes() override { return scope_.peak_bytes(); }
  void reset_peak() override { scope_.reset_peak(); }

 private:
  CpuMemoryScope scope_;
};

}  // namespace

std::unique_ptr<MemoryMeter> make_memory_meter(const c10::Device& device) {
  if (device.is_cpu()) return std::make_unique<CpuMemoryMeter>();
#ifdef PIPEBAL_WITH_CUDA
  if (device.is_cuda()) return make_cuda_memory_meter(device);
#endif
  throw std::invalid_argument("no memory meter for device " + device.str() +
                              " (pipebal measures memory on cpu and cuda devices)");
}

}  // namespace pipebal::profiler
