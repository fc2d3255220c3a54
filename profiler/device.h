// Parsing the device and dtype that a profile runs on, with the checks that make a bad choice
// a one-line error instead of a crash deep inside LibTorch.
#pragma once

#include <cstdint>
#include <string>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

namespace pipebal::profiler {

// "cpu", "cuda" or "cuda:N" (a bare "cuda" becomes cuda:0). Throws std::invalid_argument for
// anything else, for CUDA in a build without CUDA, or when no such CUDA device is present.
c10::Device parse_device(const std::string& text);

// "cpu", "cuda" or "cuda:N" as a device, a bare "cuda" keeping no index. Throws
// std::invalid_argument with one line for anything else.
c10::Device device_named(const std::string& text);

// Throws std::invalid_argument with one line when `device` (as the user named it, `text`) is a
// CUDA device that a host of `cuda_count` CUDA devices does not have.
void require_on_host(const c10::Device& device, const std::string& text, int64_t cuda_count);

// How many CUDA devices this host has: 0 without any, or in a LibTorch without CUDA.
int64_t host_cuda_count();

// "float32" (or "float"), "float64" (or "double"), "float16", "bfloat16"; throws
// std::invalid_argument listing them otherwise.
c10::ScalarType parse_dtype(const std::string& text);

// "float32" for c10::kFloat, and so on; c10's own name for other types.
std::string dtype_name(c10::ScalarType dtype);

}  // namespace pipebal::profiler
