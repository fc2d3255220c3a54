// Which part of the pipeline and which replica each rank of a run is. A pipeline occupies
// `devices` ranks (world size = devices x replicas, rank = replica x devices + device: ranks
// 0 .. devices-1 are replica 0, a whole pipeline). Stage s runs on device s % devices: one stage
// per rank, or with the interleaved schedule's V stages per device, stages d, d + devices, ...
// Torch-free.
#pragma once

#include <stdexcept>
#include <string>

namespace pipebal::distributed {

struct Placement {
  int devices = 1;
  int replicas = 1;

  int device_of(int rank) const { return rank % devices; }
  int replica_of(int rank) const { return rank / devices; }
  int rank_of(int device, int replica) const { return replica * devices + device; }
  int device_of_stage(int stage) const { return stage % devices; }
  // Whether `rank` runs stage `stage` of its replica's pipeline.
  bool runs(int stage, int rank) const { return device_of_stage(stage) == device_of(rank); }
};

// A run of `stages` stages, `virtual_stages` per device (1 but for the interleaved schedule) and
// `replicas` pipelines on `world_size` processes. Throws std::invalid_argument when the world
// size is not devices x replicas.
inline Placement place(int world_size, int stages, int replicas, int virtual_stages = 1) {
  if (virtual_stages < 1 || stages % virtual_stages != 0) {
    throw std::invalid_argument(std::to_string(stages) + " stages do not make " +
                                std::to_string(virtual_stages) + " stages per device");
  }
  const int devices = stages / virtual_stages;
  if (devices < 1 || replicas < 1 || world_size != devices * replicas) {
    const std::string per_device =
        virtual_stages > 1 ? " (" + std::to_string(virtual_stages) + " per process)" : "";
    throw std::invalid_argument(
        "WORLD_SIZE is " + std::to_string(world_size) + ", but the balance has " +
        std::to_string(stages) + " stages" + per_device +
        (replicas > 1 ? " x " + std::to_string(replicas) + " replicas" : "") + ": start " +
        (virtual_stages > 1 ? std::to_string(devices) + " processes per pipeline"
                            : "one process per stage") +
        (replicas > 1 ? " and replica" : ""));
  }
  return {devices, replicas};
}

}  // namespace pipebal::distributed
