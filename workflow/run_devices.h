// The devices a training run's stages take: --devices parsed, "cuda" resolved to this process's
// GPU when it is one of several processes, and each checked against what this host has -- before
// the rendezvous, so that a rank asking for a GPU the host lacks stops at once with one line
// instead of failing inside its first step while the others wait.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>

namespace pipebal::workflow {

// One device per name (cpu, cuda, cuda:1, ...; profiler::device_named) on a host of
// `cuda_count` CUDA devices (profiler::host_cuda_count() for this one). With `local_rank` (one
// process of several on this host), "cuda" without an index is cuda:LOCAL_RANK, torchrun's
// convention. Throws std::invalid_argument with one line for an unknown name, CUDA on a host
// without it, and an index the host does not have.
std::vector<c10::Device> resolve_devices(const std::vector<std::string>& names, int64_t cuda_count,
                                         std::optional<int> local_rank = std::nullopt);

// Each of `stages` stages' CPUs (pipeline::PipelineOptions::stage_cpus) from its device's:
// stage s runs on device s % devices, `stages_per_device` stages each (interleaved: d,
// d + devices, ...). Throws std::invalid_argument when the stages do not make that many devices.
std::vector<std::vector<int>> stage_cpus(const std::vector<std::vector<int>>& device_cpus,
                                         size_t stages, size_t stages_per_device);

}  // namespace pipebal::workflow
