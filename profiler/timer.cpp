// See timer.h. The wall-clock backend lives here; the CUDA ones in cuda_event_timer.cpp and
// cupti_timer.cpp, compiled only in CUDA builds.
#include "pipebal/profiler/timer.h"

#include <chrono>
#include <stdexcept>

#ifdef PIPEBAL_WITH_CUDA
#include "pipebal/profiler/cuda_event_timer.h"
#endif
#ifdef PIPEBAL_WITH_CUPTI
#include "pipebal/profiler/cupti_timer.h"
#endif

namespace pipebal::profiler {
namespace {

class WallclockTimer final : public LayerTimer {
 public:
  explicit WallclockTimer(const c10::Device& device) : device_(device) {}

  void start() override {
    synchronize();  // work queued before the region must not count
    start_ = std::chrono::steady_clock::now();
  }
  double stop_ms() override {
    synchronize();  // the region's own queued work must count
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
        .count();
  }

 private:
  void synchronize() const {
#ifdef PIPEBAL_WITH_CUDA
    if (device_.is_cuda()) synchronize_cuda_device(device_);
#endif
  }

  c10::Device device_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

TimerBackend parse_timer_backend(const std::string& text) {
  if (text == "auto") return TimerBackend::kAuto;
  if (text == "wallclock") return TimerBackend::kWallclock;
  if (text == "events") return TimerBackend::kEvents;
  if (text == "cupti") return TimerBackend::kCupti;
  throw std::invalid_argument("unknown timer backend '" + text +
                              "' (valid: auto, wallclock, events, cupti)");
}

std::string to_string(TimerBackend backend) {
  switch (backend) {
    case TimerBackend::kAuto:
      return "auto";
    case TimerBackend::kWallclock:
      return "wallclock";
    case TimerBackend::kEvents:
      return "events";
    case TimerBackend::kCupti:
      return "cupti";
  }
  return "unknown";
}

bool built_with_cuda() {
#ifdef PIPEBAL_WITH_CUDA
  return true;
#else
  return false;
#endif
}

bool built_with_cupti() {
#ifdef PIPEBAL_WITH_CUPTI
  return true;
#else
  return false;
#endif
}

TimerBackend resolve_timer_backend(TimerBackend requested, const c10::Device& device) {
  const bool cuda = device.is_cuda();
  switch (requested) {
    case TimerBackend::kAuto:
      if (cuda) return built_with_cupti() ? TimerBackend::kCupti : TimerBackend::kEvents;
      return TimerBackend::kWallclock;
    case TimerBackend::kWallclock:
      return requested;
    case TimerBackend::kEvents:
    case TimerBackend::kCupti:
      if (!built_with_cuda()) {
        throw std::invalid_argument("timer backend '" + to_string(requested) +
                                    "' needs a CUDA device, but pipebal was built without CUDA "
                                    "(use --backend wallclock or auto)");
      }
      if (!cuda) {
        throw std::invalid_argument("timer backend '" + to_string(requested) +
                                    "' needs a CUDA device, got device '" + device.str() +
                                    "' (use --device cuda, or --backend wallclock)");
      }
      if (requested == TimerBackend::kCupti && !built_with_cupti()) {
        throw std::invalid_argument(
            "timer backend 'cupti': pipebal was built without CUPTI (use --backend events)");
      }
      return requested;
  }
  throw std::invalid_argument("unknown timer backend");
}

std::unique_ptr<LayerTimer> make_layer_timer(TimerBackend backend, const c10::Device& device) {
  switch (resolve_timer_backend(backend, device)) {
    case TimerBackend::kWallclock:
      return std::make_unique<WallclockTimer>(device);
#ifdef PIPEBAL_WITH_CUDA
    case TimerBackend::kEvents:
      return make_cuda_event_timer(device);
#endif
#ifdef PIPEBAL_WITH_CUPTI
    case TimerBackend::kCupti:
      return make_cupti_timer(device);
#endif
    default:
      break;
  }
  // resolve_timer_backend() has rejected every backend this build cannot make.
  throw std::logic_error("timer backend '" + to_string(backend) + "' is not built in");
}

}  // namespace pipebal::profiler
