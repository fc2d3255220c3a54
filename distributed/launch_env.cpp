// See launch_env.h.
#include "pipebal/distributed/launch_env.h"

#include <cstdlib>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "pipebal/common/parse_integers.h"

namespace pipebal::distributed {
namespace {

int integer(const GetEnv& getenv, const char* name, int low, int high,
            std::optional<int> fallback = std::nullopt) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') {
    if (fallback) return *fallback;
    throw std::invalid_argument(
        fmt::format("{} is not set (WORLD_SIZE is: a multi-process run "
                    "needs RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT)",
                    name));
  }
  const std::optional<int64_t> value = parse_integer(text);
  if (!value || *value < low || *value > high) {
    throw std::invalid_argument(
        fmt::format("{}={}: expected an integer from {} to {}", name, text, low, high));
  }
  return static_cast<int>(*value);
}

}  // namespace

std::optional<LaunchEnv> launch_env_from(const GetEnv& getenv) {
  const char* world = getenv("WORLD_SIZE");
  if (world == nullptr || *world == '\0') {
    // A rank other than 0 is never the only process: its peers, each alone too, would all write
    // the same output.
    const char* rank = getenv("RANK");
    if (rank != nullptr && *rank != '\0' && parse_integer(rank) != std::optional<int64_t>(0)) {
      throw std::invalid_argument(fmt::format(
          "RANK={} is set but WORLD_SIZE is not: a multi-process run needs RANK, WORLD_SIZE, "
          "MASTER_ADDR and MASTER_PORT (pipebal launch or torchrun set them); unset RANK to run "
          "one process",
          rank));
    }
    return std::nullopt;
  }
  LaunchEnv env;
  constexpr int kMaxWorld = 1 << 16;
  env.world_size = integer(getenv, "WORLD_SIZE", 1, kMaxWorld);
  env.rank = integer(getenv, "RANK", 0, env.world_size - 1);
  env.local_world_size = integer(getenv, "LOCAL_WORLD_SIZE", 1, env.world_size, env.world_size);
  // Unset: where RANK falls on its host, ranks laid out host by host as torchrun does.
  env.local_rank =
      integer(getenv, "LOCAL_RANK", 0, env.local_world_size - 1, env.rank % env.local_world_size);
  const char* addr = getenv("MASTER_ADDR");
  if (env.world_size > 1 && (addr == nullptr || *addr == '\0')) {
    throw std::invalid_argument("MASTER_ADDR is not set (the host of rank 0's rendezvous store)");
  }
  if (addr != nullptr && *addr != '\0') env.master_addr = addr;
  env.master_port = integer(getenv, "MASTER_PORT", 1, 65535,
                            env.world_size > 1 ? std::nullopt : std::optional<int>(29500));
  const char* agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
  env.agent_store = agent != nullptr && std::string(agent) == "True";
  const char* bound = getenv(kBindCoresVariable);
  env.cores_of_its_own = bound != nullptr && std::string(bound) == "1";
  env.restart_count = integer(getenv, "TORCHELASTIC_RESTART_COUNT", 0, 1 << 30, 0);
  return env;
}

std::optional<LaunchEnv> launch_env_from_process() {
  return launch_env_from([](const char* name) { return std::getenv(name); });
}

}  // namespace pipebal::distributed
