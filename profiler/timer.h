// Timer backends: how the profiler measures one region (a layer's forward or its backward).
//   wallclock  steady clock around the region; on a CUDA device it synchronises first and last
//   events     CUDA events recorded on the current stream around the region (CUDA builds)
//   cupti      CUPTI activity records: the durations of the kernels the region launched, summed,
//              attributed through an external correlation id (CUDA builds with CUPTI)
//   auto       cupti when built in and the device is CUDA, else events on CUDA, else wallclock
#pragma once

#include <memory>
#include <string>

#include <c10/core/Device.h>

namespace pipebal::profiler {

enum class TimerBackend { kAuto, kWallclock, kEvents, kCupti };

// "auto", "wallclock", "events", "cupti"; throws std::invalid_argument listing them otherwise.
TimerBackend parse_timer_backend(const std::string& text);
std::string to_string(TimerBackend backend);

// Whether this build has the CUDA code paths and CUPTI.
bool built_with_cuda();
bool built_with_cupti();

// The backend that will measure on `device`: resolves kAuto, and throws std::invalid_argument
// for events or cupti without a CUDA device, or cupti in a build without CUPTI.
TimerBackend resolve_timer_backend(TimerBackend requested, const c10::Device& device);

// Measures one region at a time: start(), run the region, stop_ms(). stop_ms() waits for the
// device when it must. Used from one thread only.
class LayerTimer {
 public:
  virtual ~LayerTimer() = default;
  virtual void start() = 0;
  virtual double stop_ms() = 0;
};

// A timer of a resolved backend (not kAuto) for `device`; throws what resolve_timer_backend()
// throws, and std::runtime_error when the backend's setup fails.
std::unique_ptr<LayerTimer> make_layer_timer(TimerBackend backend, const c10::Device& device);

}  // namespace pipebal::profiler
