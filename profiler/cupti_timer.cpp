// See cupti_timer.h.
//
// Attribution: start() pushes a fresh external correlation id onto CUPTI's stack for this
// thread, stop() pops it; every runtime or driver API call in between gets an
// EXTERNAL_CORRELATION record linking its correlation id to ours, and each kernel record
// carries the correlation id of the call that launched it. The autograd engine runs CUDA
// backward on its own device thread, whose launches carry no external id; because start() and
// stop() synchronise the device and flush CUPTI's buffers, every kernel that ran in between
// belongs to the region, so kernels without an external id are counted too.
#include "pipebal/profiler/cupti_timer.h"

#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include <c10/util/Exception.h>

#include "pipebal/profiler/cuda_event_timer.h"
#include "pipebal/profiler/cupti_check.h"

namespace pipebal::profiler {
namespace {

constexpr CUpti_ExternalCorrelationKind kCorrelationKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
// CUPTI recommends activity buffers of 1 to 10 MB, 8-byte aligned.
constexpr size_t kBufferBytes = 4 * 1024 * 1024;
constexpr size_t kBufferAlignment = 8;

// The one owner of CUPTI's activity state. CUPTI delivers buffers through plain C callbacks,
// which land in the static trampolines below and forward here: the only global state, never
// destroyed because CUPTI may call back until the process ends.
class CuptiActivityCollector {
 public:
  static CuptiActivityCollector& instance() {
    static CuptiActivityCollector* const owner = new CuptiActivityCollector();
    return *owner;
  }

  // Setup: throws. Reference-counted, so several timers may live at once.
  void acquire() {
    std::lock_guard<std::mutex> lock(setup_mutex_);
    if (users_++ > 0) return;
    try {
      if (!callbacks_registered_) {
        PIPEBAL_CUPTI(cuptiActivityRegisterCallbacks(&buffer_requested, &buffer_completed), kThrow);
        callbacks_registered_ = true;
      }
      // External correlation records are emitted for API records, so the API kinds are on too.
      PIPEBAL_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), kThrow);
      PIPEBAL_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), kThrow);
      PIPEBAL_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER), kThrow);
      PIPEBAL_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION), kThrow);
    } catch (...) {
      --users_;
      throw;
    }
  }

  // Teardown: warns.
  void release() {
    std::lock_guard<std::mutex> lock(setup_mutex_);
    if (--users_ > 0) return;
    PIPEBAL_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), kWarn);
    PIPEBAL_CUPTI(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION), kWarn);
    PIPEBAL_CUPTI(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER), kWarn);
    PIPEBAL_CUPTI(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME), kWarn);
    PIPEBAL_CUPTI(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), kWarn);
    forget();
  }

  // Delivers every pending record (the caller has synchronised the device first).
  void flush() { PIPEBAL_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), kWarn); }

  // Drops what was collected so far.
  void forget() {
    std::lock_guard<std::mutex> lock(records_mutex_);
    external_of_correlation_.clear();
    kernel_ns_of_correlation_.clear();
  }

  // Kernel time of the region tagged `external_id` (plus untagged kernels, see the file
  // comment), then forgets everything collected.
  double take_region_ms(uint64_t external_id) {
    std::lock_guard<std::mutex> lock(records_mutex_);
    uint64_t total_ns = 0;
    for (const auto& [correlation, ns] : kernel_ns_of_correlation_) {
      const auto it = external_of_correlation_.find(correlation);
      if (it == external_of_correlation_.end() || it->second == external_id) total_ns += ns;
    }
    external_of_correlation_.clear();
    kernel_ns_of_correlation_.clear();
    return static_cast<double>(total_ns) / 1e6;
  }

 private:
  CuptiActivityCollector() = default;

  static void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlignment, kBufferBytes));
    *size = *buffer != nullptr ? kBufferBytes : 0;
    *max_records = 0;  // as many as fit
  }

  static void CUPTIAPI buffer_completed(CUcontext /*context*/, uint32_t /*stream_id*/,
                                        uint8_t* buffer, size_t /*size*/, size_t valid_size) {
    instance().read_buffer(buffer, valid_size);
    std::free(buffer);
  }

  // Called on a CUPTI thread or inside cuptiActivityFlushAll. Must not take setup_mutex_:
  // release() holds it while it flushes, which calls back here.
  void read_buffer(uint8_t* buffer, size_t valid_size) {
    if (buffer == nullptr || valid_size == 0) return;
    std::lock_guard<std::mutex> lock(records_mutex_);
    CUpti_Activity* record = nullptr;
    CUptiResult status = CUPTI_SUCCESS;
    while ((status = cuptiActivityGetNextRecord(buffer, valid_size, &record)) == CUPTI_SUCCESS) {
      if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
          record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
        // Version 4 of the kernel record is forward compatible; its leading fields are stable.
        const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel4*>(record);
        if (kernel->end > kernel->start) {
          kernel_ns_of_correlation_[kernel->correlationId] += kernel->end - kernel->start;
        }
      } else if (record->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
        const auto* link = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
        if (link->externalKind == kCorrelationKind) {
          external_of_correlation_[link->correlationId] = link->externalId;
        }
      }
    }
    // The end of the buffer reads as CUPTI_ERROR_MAX_LIMIT_REACHED; anything else is a problem.
    if (status != CUPTI_ERROR_MAX_LIMIT_REACHED) PIPEBAL_CUPTI(status, kWarn);
    size_t dropped = 0;
    if (PIPEBAL_CUPTI(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped), kWarn) &&
        dropped > 0) {
      TORCH_WARN("CUPTI dropped ", dropped, " activity records; kernel times are undercounted");
    }
  }

  std::mutex setup_mutex_;  // guards users_ and callbacks_registered_
  int users_ = 0;
  bool callbacks_registered_ = false;

  std::mutex records_mutex_;  // guards the two maps
  std::unordered_map<uint32_t, uint64_t> external_of_correlation_;
  std::unordered_map<uint32_t, uint64_t> kernel_ns_of_correlation_;
};

class CuptiTimer final : public LayerTimer {
 public:
  explicit CuptiTimer(const c10::Device& device) : device_(device) {
    CuptiActivityCollector::instance().acquire();
  }
  ~CuptiTimer() override {
    if (pushed_) {
      uint64_t ignored = 0;
      PIPEBAL_CUPTI(cuptiActivityPopExternalCorrelationId(kCorrelationKind, &ignored), kWarn);
    }
    CuptiActivityCollector::instance().release();
  }
  CuptiTimer(const CuptiTimer&) = delete;
  CuptiTimer& operator=(const CuptiTimer&) = delete;

  void start() override {
    // Kernels queued before the region (e.g. the backward's seed gradient) must not count.
    synchronize_cuda_device(device_);
    CuptiActivityCollector::instance().flush();
    CuptiActivityCollector::instance().forget();
    ++region_id_;
    pushed_ =
        PIPEBAL_CUPTI(cuptiActivityPushExternalCorrelationId(kCorrelationKind, region_id_), kWarn);
  }

  double stop_ms() override {
    if (pushed_) {
      uint64_t popped = 0;
      PIPEBAL_CUPTI(cuptiActivityPopExternalCorrelationId(kCorrelationKind, &popped), kWarn);
      pushed_ = false;
    }
    synchronize_cuda_device(device_);
    CuptiActivityCollector::instance().flush();
    return CuptiActivityCollector::instance().take_region_ms(region_id_);
  }

 private:
  c10::Device device_;
  uint64_t region_id_ = 0;
  bool pushed_ = false;
};

}  // namespace

std::unique_ptr<LayerTimer> make_cupti_timer(const c10::Device& device) {
  return std::make_unique<CuptiTimer>(device);
}

}  // namespace pipebal::profiler
