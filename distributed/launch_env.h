// Who this process is in a multi-process run: torchrun's environment variables, read the way
// torchrun and `pipebal launch` set them. Torch-free.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace pipebal::distributed {

struct LaunchEnv {
  int rank = 0;                           // RANK: this process among all (stage = rank)
  int world_size = 1;                     // WORLD_SIZE
  int local_rank = 0;                     // LOCAL_RANK: among the processes of this host
  int local_world_size = 1;               // LOCAL_WORLD_SIZE
  std::string master_addr = "127.0.0.1";  // MASTER_ADDR: the host of the rendezvous store
  int master_port = 29500;                // MASTER_PORT
  // TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent already serves the store on
  // MASTER_ADDR:MASTER_PORT, so rank 0 connects to it instead of serving one.
  bool agent_store = false;
  int restart_count = 0;  // TORCHELASTIC_RESTART_COUNT: keys of a restarted run stay apart
  // PIPEBAL_BIND_CORES=1: `pipebal launch --bind-cores` pinned this process to cores no other
  // process of the host runs on (common/cores.h counts only those).
  bool cores_of_its_own = false;
};

// Set by `pipebal launch` in each process: "1" with --bind-cores, else "0".
constexpr const char* kBindCoresVariable = "PIPEBAL_BIND_CORES";

using GetEnv = std::function<const char*(const char*)>;

// The launch environment, or nullopt when WORLD_SIZE is not set (a single process; RANK then
// unset or 0). Throws std::invalid_argument naming the variable for a missing, malformed or
// inconsistent value.
std::optional<LaunchEnv> launch_env_from(const GetEnv& getenv);
std::optional<LaunchEnv> launch_env_from_process();

}  // namespace pipebal::distributed
