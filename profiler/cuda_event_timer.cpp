// See cuda_event_timer.h. Compiled only when PIPEBAL_WITH_CUDA is set by CMake.
#include "pipebal/profiler/cuda_event_timer.h"

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

namespace pipebal::profiler {
namespace {

class CudaEventTimer final : public LayerTimer {
 public:
  explicit CudaEventTimer(const c10::Device& device)
      : index_(device.has_index() ? device.index() : c10::DeviceIndex(0)),
        start_(cudaEventDefault),  // cudaEventDefault: timing enabled
        stop_(cudaEventDefault) {}

  void start() override {
    c10::cuda::CUDAGuard guard(index_);
    start_.record(c10::cuda::getCurrentCUDAStream(index_));
  }

  double stop_ms() override {
    c10::cuda::CUDAGuard guard(index_);
    stop_.record(c10::cuda::getCurrentCUDAStream(index_));
    stop_.synchronize();
    return static_cast<double>(start_.elapsed_time(stop_));
  }

 private:
  c10::DeviceIndex index_;
  at::cuda::CUDAEvent start_;
  at::cuda::CUDAEvent stop_;
};

}  // namespace

std::unique_ptr<LayerTimer> make_cuda_event_timer(const c10::Device& device) {
  return std::make_unique<CudaEventTimer>(device);
}

void synchronize_cuda_device(const c10::Device& device) {
  c10::cuda::CUDAGuard guard(device.has_index() ? device.index() : c10::DeviceIndex(0));
  C10_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace pipebal::profiler
