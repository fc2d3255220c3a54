// Which stage and which pipeline replica each rank of a run is: world size = stages x replicas,
// rank = replica x stages + stage (ranks 0 .. stages-1 are replica 0, a whole pipeline).
// Torch-free.
#pragma once

#include <stdexcept>
#include <string>

namespace pipebal::distributed {

struct Placement {
  int stages = 1;
  int replicas = 1;

  int stage_of(int rank) const { return rank % stages; }
  int replica_of(int rank) const { return rank / stages; }
  int rank_of(int stage, int replica) const { return replica * stages + stage; }
};

// Throws std::invalid_argument when `world_size` is not stages x replicas.
inline Placement place(int world_size, int stages, int replicas) {
  if (stages < 1 || replicas < 1 || world_size != stages * replicas) {
    throw std::invalid_argument(
        "WORLD_SIZE is " + std::to_string(world_size) + ", but the balance has " +
        std::to_string(stages) + " stages" +
        (replicas > 1 ? " x " + std::to_string(replicas) + " replicas" : "") +
        ": start one process per stage" + (replicas > 1 ? " and replica" : ""));
  }
  return {stages, replicas};
}

}  // namespace pipebal::distributed
