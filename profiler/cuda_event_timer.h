// The `events` timer backend and a device synchronisation helper, for CUDA builds only
// (PIPEBAL_WITH_CUDA, set by CMake when LibTorch has CUDA).
#pragma once

#ifdef PIPEBAL_WITH_CUDA

#include <memory>

#include "pipebal/profiler/timer.h"

namespace pipebal::profiler {

// Two timing events recorded on the device's current stream around the region; stop_ms() waits
// for the second. at::cuda::CUDAEvent rather than the device-generic c10::Event: the latter has
// no elapsed time in LibTorch 1.13.
std::unique_ptr<LayerTimer> make_cuda_event_timer(const c10::Device& device);

// Waits until `device` has finished all queued work. Throws c10::Error on a CUDA error.
void synchronize_cuda_device(const c10::Device& device);

}  // namespace pipebal::profiler

#endif  // PIPEBAL_WITH_CUDA
