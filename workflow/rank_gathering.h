// The end of a training run across processes. Every rank sends rank 0 what it measured (its
// timelines, their origins on rank 0's clock, its stages' peak memory, its peak RSS and the CPU
// its cores gave it); rank 0 merges the first replica's timelines into one per step and records
// a process entry per rank and the hosts' load. For --save, the first replica's ranks send their
// stages' weights to rank 0, whose copy of the model then holds them all.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "pipebal/common/machine_load.h"
#include "pipebal/pipeline/timeline.h"

namespace pipebal::distributed {
class Group;
struct Placement;
}  // namespace pipebal::distributed
namespace pipebal::pipeline {
class LayerSeq;
}
namespace pipebal::reports {
struct RunRecord;
}

namespace pipebal::workflow {

// What one rank measured over its steps.
struct RankMeasurements {
  std::vector<pipeline::Timeline> timelines;  // each measured step's, on this rank's clock
  std::vector<double> origins_ms;             // each timeline's origin on rank 0's clock
  std::vector<int64_t> peak_bytes;            // by stage of the run; -1: not measured here
};

// Every rank calls it. On rank 0, `measured` becomes the run's (timelines merged, each step's
// axis starting at its earliest action; each stage's peak the most of any replica) and `run`
// gets the processes and the hosts' machine load; elsewhere nothing changes. Throws
// std::runtime_error when a rank measured another number of steps.
void gather_measurements(distributed::Group& group, const distributed::Placement& placement,
                         const std::optional<CpuUse>& cpu_use, RankMeasurements& measured,
                         reports::RunRecord& run);

// Every rank calls it: the first replica's stage weights (parameters and buffers) of `layers`,
// cut by `balance`, are copied into rank 0's.
void gather_weights(distributed::Group& group, const distributed::Placement& placement,
                    const pipeline::LayerSeq& layers, const std::vector<int>& balance);

}  // namespace pipebal::workflow
