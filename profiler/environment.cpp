// See environment.h.
#include "pipebal/profiler/environment.h"

#include <unistd.h>

#include <array>
#include <ctime>
#include <fstream>
#include <limits>

#include <ATen/Parallel.h>
#include <torch/version.h>
#include <nlohmann/json.hpp>

#include "pipebal/common/aligned_stack.h"
#include "pipebal/common/git_commit.h"
#include "pipebal/common/jemalloc_control.h"

#ifdef PIPEBAL_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#ifndef PIPEBAL_BUILD_TYPE
#define PIPEBAL_BUILD_TYPE "unknown"
#endif

namespace pipebal::profiler {
namespace {

std::string trim(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  const size_t last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

}  // namespace

std::string host_name() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "unknown";
  return name.data();
}

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return trim(line.substr(colon + 1));
    }
  }
  return "unknown";
}

std::string iso8601_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text.data();
}

bool denormals_flushed() {
  // Half the smallest normal float is subnormal: it comes out as zero only when flushed.
  volatile float smallest_normal = std::numeric_limits<float>::min();
  const float half = smallest_normal * 0.5f;
  return half == 0.0f;
}

std::string malloc_name() {
  if (const Mallctl mallctl = jemalloc_mallctl()) {
    const char* version = nullptr;
    size_t size = sizeof(version);
    if (mallctl("version", &version, &size, nullptr, 0) == 0 && version != nullptr)
      return std::string("jemalloc ") + version;
  }
  return "glibc malloc";
}

Environment capture_environment(const c10::Device& device) {
  Environment env;
  env.libtorch_version = TORCH_VERSION;
  env.intra_op_threads = at::get_num_threads();
  env.cpu_model = cpu_model_name();
#ifdef PIPEBAL_WITH_CUDA
  if (device.is_cuda()) {
    env.gpu_name = at::cuda::getDeviceProperties(device.has_index() ? device.index() : 0)->name;
  }
#else
  (void)device;
#endif
  env.host = host_name();
  env.allocator = malloc_name();
  env.flushes_denormals = denormals_flushed();
  env.stack_offset = stack_offset();
  env.build_type = PIPEBAL_BUILD_TYPE;
  env.git_commit = git_commit();
  env.date = iso8601_now();
  return env;
}

nlohmann::json environment_to_json(const Environment& env) {
  nlohmann::json doc = {
      {"libtorch_version", env.libtorch_version},
      {"intra_op_threads", env.intra_op_threads},
      {"cpu_model", env.cpu_model},
      {"gpu_name", nullptr},
      {"host", env.host},
      {"allocator", env.allocator},
      {"flushes_denormals", env.flushes_denormals},
      {"stack_offset", nullptr},
      {"build_type", env.build_type},
      {"git_commit", env.git_commit},
      {"date", env.date},
  };
  if (env.gpu_name) doc["gpu_name"] = *env.gpu_name;
  if (env.stack_offset) doc["stack_offset"] = *env.stack_offset;
  // The profiling settings belong to a profile's environment only (repeat >= 1 there).
  if (env.repeat > 0) {
    doc["warmup"] = env.warmup;
    doc["repeat"] = env.repeat;
    doc["time_budget_s"] = env.time_budget_s;
    if (env.autograd_run_ms) doc["autograd_run_ms"] = *env.autograd_run_ms;
    doc["machine_load"] = nullptr;
    if (env.machine_load) doc["machine_load"] = machine_load_to_json(*env.machine_load);
  }
  return doc;
}

nlohmann::json environment_json(const c10::Device& device) {
  return environment_to_json(capture_environment(device));
}

}  // namespace pipebal::profiler
