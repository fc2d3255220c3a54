// Where a profile was measured: the context block of profile.json, so that a profile read
// months later still says which machine, library and settings produced its numbers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <c10/core/Device.h>
#include <nlohmann/json_fwd.hpp>

#include "pipebal/common/machine_load.h"

namespace pipebal::profiler {

struct Environment {
  std::string libtorch_version;         // e.g. "1.13.1"
  int intra_op_threads = 0;             // at::get_num_threads() while profiling
  std::string cpu_model;                // /proc/cpuinfo "model name"; "unknown" elsewhere
  std::optional<std::string> gpu_name;  // set for a CUDA device
  std::string host;
  std::string allocator;           // the process's malloc, e.g. "jemalloc 5.3.0-0-g54eaed1d8b56"
  bool flushes_denormals = false;  // subnormal floats flushed to zero (workflow/denormals.h)
  // Bytes below a 64-byte boundary autograd's CPU kernels start from (common/aligned_stack.h);
  // none: wherever the calling thread's stack is.
  std::optional<int> stack_offset;
  std::string build_type;  // pipebal's CMAKE_BUILD_TYPE
  std::string git_commit;  // pipebal's commit
  int warmup = 0;
  int repeat = 0;
  double time_budget_s = 0;
  // What one autograd run cost beyond its work, taken off each layer's timed backward
  // (profiler/autograd_run_cost.h); measured on the CPU only.
  std::optional<double> autograd_run_ms;
  std::string date;  // ISO 8601, UTC: 2024-05-01T12:34:56Z
  // What other work took of the machine while this was measured; unknown off Linux.
  std::optional<MachineLoad> machine_load;
};

// Reads the environment now, for profiling on `device`.
Environment capture_environment(const c10::Device& device);

// The context block as JSON: every field above, gpu_name null when unset.
nlohmann::json environment_to_json(const Environment& env);

// capture_environment(device) as JSON: the context block any report can carry.
nlohmann::json environment_json(const c10::Device& device = c10::Device(c10::kCPU));

// The first "model name" in /proc/cpuinfo, or "unknown".
std::string cpu_model_name();
// This machine's host name; "unknown" when it cannot be read.
std::string host_name();

// The malloc serving this process: "jemalloc VERSION" when jemalloc is loaded, else
// "glibc malloc".
std::string malloc_name();

// Whether float arithmetic on the calling thread flushes subnormal results to zero now.
bool denormals_flushed();

// The current time as ISO 8601 in UTC.
std::string iso8601_now();

}  // namespace pipebal::profiler
