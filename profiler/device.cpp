// See device.h.
#include "profiler/device.h"

#include <optional>
#include <stdexcept>

#include <torch/cuda.h>

#include "pipeline/dtype.h"
#include "profiler/timer.h"

namespace pipebal::profiler {

c10::Device parse_device(const std::string& text) {
  c10::Device device(c10::kCPU);
  try {
    device = c10::Device(text);
  } catch (const std::exception&) {
    throw std::invalid_argument("device '" + text + "': expected cpu, cuda or cuda:N");
  }
  if (device.is_cpu()) return device;
  if (!device.is_cuda()) {
    throw std::invalid_argument("device '" + text + "': pipebal profiles on cpu or cuda");
  }
  if (!built_with_cuda()) {
    throw std::invalid_argument("device '" + text +
                                "': pipebal was built without CUDA (build it against a "
                                "CUDA-enabled LibTorch, see tools/gpu-check.sh)");
  }
  const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
  if (count == 0) {
    throw std::invalid_argument("device '" + text + "': no CUDA device is available");
  }
  const c10::DeviceIndex index = device.has_index() ? device.index() : c10::DeviceIndex(0);
  if (index >= count) {
    throw std::invalid_argument("device '" + text + "': only " + std::to_string(count) +
                                " CUDA device(s) present");
  }
  return c10::Device(c10::kCUDA, index);
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
