// See device.h.
#include "pipebal/profiler/device.h"

#include <optional>
#include <stdexcept>

#include <torch/cuda.h>

#include "pipebal/pipeline/dtype.h"
#include "pipebal/profiler/timer.h"

namespace pipebal::profiler {

c10::Device device_named(const std::string& text) {
  std::optional<c10::Device> device;
  try {
    device.emplace(text);
  } catch (const std::exception&) {
    throw std::invalid_argument("device '" + text + "': expected cpu, cuda or cuda:N");
  }
  if (!device->is_cpu() && !device->is_cuda()) {
    throw std::invalid_argument("device '" + text + "': pipebal runs on cpu or cuda");
  }
  return *device;
}

void require_on_host(const c10::Device& device, const std::string& text, int64_t cuda_count) {
  if (!device.is_cuda()) return;
  if (cuda_count == 0) {
    throw std::invalid_argument("device '" + text + "': no CUDA device is available");
  }
  if (device.has_index() && device.index() >= cuda_count) {
    throw std::invalid_argument("device '" + text + "': this host has " +
                                (cuda_count == 1 ? std::string("1 CUDA device (cuda:0)")
                                                 : std::to_string(cuda_count) +
                                                       " CUDA devices (cuda:0 to cuda:" +
                                                       std::to_string(cuda_count - 1) + ")"));
  }
}

int64_t host_cuda_count() {
  return torch::cuda::is_available() ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
}

c10::Device parse_device(const std::string& text) {
  const c10::Device device = device_named(text);
  if (device.is_cpu()) return device;
  if (!built_with_cuda()) {
    throw std::invalid_argument("device '" + text +
                                "': pipebal was built without CUDA (build it against a "
                                "CUDA-enabled LibTorch, see tools/gpu-check.sh)");
  }
  require_on_host(device, text, host_cuda_count());
  return device.has_index() ? device : c10::Device(c10::kCUDA, 0);
}

c10::ScalarType parse_dtype(const std::string& text) {
  const std::optional<c10::ScalarType> dtype = pipeline::dtype_named(text);
  if (!dtype || !c10::isFloatingType(*dtype)) {
    throw std::invalid_argument("dtype '" + text +
                                "': expected float32, float64, float16 or bfloat16");
  }
  return *dtype;
}

std::string dtype_name(c10::ScalarType dtype) {
  return pipeline::dtype_name(dtype);
}

}  // namespace pipebal::profiler
