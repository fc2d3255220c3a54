// See rendezvous.h.
#include "pipebal/distributed/rendezvous.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

#include <c10/util/Logging.h>
#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "pipebal/pipeline/error_text.h"

namespace pipebal::distributed {

namespace {

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

// c10d logs its socket errors to stderr; pipebal reports them itself, in one line.
void quiet_c10d_logging() {
#ifdef C10_USE_GLOG
  FLAGS_minloglevel = google::GLOG_FATAL;
#else
  FLAGS_caffe2_log_level = 3;  // fatal only
#endif
}

std::string& client_address() {
  static std::string address;
  return address;
}

// Advice for whatever shows that the store's port is held by something else.
constexpr const char* kNotAStore =
    "is something other than the run's rank 0 listening there? check MASTER_ADDR and MASTER_PORT";

// Counts this process in and waits until all have come, within the timeout: Gloo's own
// rendezvous waits for each missing rank in turn (90 s for WORLD_SIZE=8192 at --timeout 3).
void await_arrivals(c10d::Store& store, const LaunchEnv& env, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int64_t arrived = 0;
  // Rank 0 serves the store: closed, it gave up waiting (and said why) or failed.
  const auto count = [&](int64_t add) {
    try {
      arrived = store.add("arrived", add);
    } catch (const std::exception& error) {
      if (arrived == 0) {  // it never counted this process: a store, or something else?
        throw std::invalid_argument(fmt::format(
            "the rendezvous at {}:{} closed the connection before counting this process in "
            "({}): rank 0 gave up or failed, or {}",
            env.master_addr, env.master_port, pipeline::error_summary(error), kNotAStore));
      }
      throw std::invalid_argument(fmt::format(
          "the rendezvous store on {}:{} (rank 0's) closed while {} of the {} processes had "
          "connected: rank 0 gave up or failed ({})",
          env.master_addr, env.master_port, arrived, env.world_size,
          pipeline::error_summary(error)));
    }
    // A count no run makes: not a rendezvous store, or the processes of another run with it.
    if (arrived < 1 || arrived > env.world_size) {
      throw std::invalid_argument(fmt::format(
          "the rendezvous store on {}:{} counts {} arrivals in a world of {}: {} (another run "
          "may use them)",
          env.master_addr, env.master_port, arrived, env.world_size, kNotAStore));
    }
  };
  count(1);
  while (arrived < env.world_size && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    count(0);
  }
  if (arrived < env.world_size) {
    throw std::invalid_argument(fmt::format(
        "{} of the {} processes connected within {:g} s (--timeout): were WORLD_SIZE={} "
        "processes started, with this MASTER_ADDR and MASTER_PORT?",
        arrived, env.world_size, timeout.count() / 1000.0, env.world_size));
  }
}

}  // namespace

std::shared_ptr<::gloo::transport::Device> gloo_device(const LaunchEnv& env) {
  if (is_loopback(env.master_addr)) {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME")) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(interface);
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

const std::string& store_client_address() {
  return client_address();
}

c10::intrusive_ptr<c10d::Store> connect_store(const LaunchEnv& env,
                                              std::chrono::milliseconds timeout) {
  quiet_c10d_logging();
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(env.master_port);
  options.isServer = env.rank == 0 && !env.agent_store;
  options.waitWorkers = false;  // the process group's connection is the rendezvous
  // TCPStore counts its connect timeout in whole seconds, under one second none: rank 0 could
  // not reach even its own server. The rendezvous's own wait still ends at `timeout`.
  options.timeout = std::max<std::chrono::milliseconds>(timeout, std::chrono::seconds(1));
  options.multiTenant = true;
  const std::string where = fmt::format("{}:{}", env.master_addr, env.master_port);
  c10::intrusive_ptr<c10d::Store> store;
  // Before the store's threads start: they may read it when they fail.
  if (!options.isServer) client_address() = where;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
  } catch (const std::exception& error) {
    const std::string cause = pipeline::error_summary(error);
    if (options.isServer && cause.find("timed out") != std::string::npos) {
      // The server's own connection to itself timed out: not the port in use, but too short a
      // time, or an address that is not this host's.
      throw std::invalid_argument(
          fmt::format("cannot serve the rendezvous on {} within {:g} s (--timeout; is MASTER_ADDR "
                      "this host?): {}",
                      where, timeout.count() / 1000.0, cause));
    }
    if (options.isServer) {
      throw std::invalid_argument(
          fmt::format("cannot serve the rendezvous on {} (MASTER_PORT in use? pick another with "
                      "--master-port): {}",
                      where, cause));
    }
    throw std::invalid_argument(fmt::format(
        "cannot reach the rendezvous at {} within {:g} s (is rank 0 running there, and nothing "
        "else? check MASTER_ADDR and MASTER_PORT): {}",
        where, timeout.count() / 1000.0, cause));
  }
  return c10::make_intrusive<c10d::PrefixStore>(
      fmt::format("pipebal/attempt_{}", env.restart_count), store);
}

c10::intrusive_ptr<c10d::Store> meet(const LaunchEnv& env, std::chrono::milliseconds timeout,
                                     const std::string& identity) {
  // On a thread of its own, so that a store call that never returns (something on the port
  // that accepts and stays silent) cannot hold this process past the limit: it is left blocked
  // there, and the process ends on the error.
  auto meeting = std::make_shared<std::packaged_task<c10::intrusive_ptr<c10d::Store>()>>(
      [env, timeout, identity] {
        c10::intrusive_ptr<c10d::Store> store = connect_store(env, timeout);
        try {
          store->set(fmt::format("process/{}", env.rank),
                     std::vector<uint8_t>(identity.begin(), identity.end()));
        } catch (const std::exception& error) {
          throw std::invalid_argument(
              fmt::format("the rendezvous at {}:{} closed the connection ({}): {}", env.master_addr,
                          env.master_port, pipeline::error_summary(error), kNotAStore));
        }
        await_arrivals(*store, env, timeout);
        return store;
      });
  std::future<c10::intrusive_ptr<c10d::Store>> met = meeting->get_future();
  std::thread thread([meeting] { (*meeting)(); });
  const auto limit = 2 * timeout + std::chrono::seconds(1);
  if (met.wait_for(limit) != std::future_status::ready) {
    thread.detach();
    throw RendezvousAbandoned(fmt::format(
        "the rendezvous at {}:{} did not answer within {:g} s: is rank 0 stopped or hung, or {}",
        env.master_addr, env.master_port, std::chrono::duration<double>(limit).count(),
        kNotAStore));
  }
  thread.join();
  return met.get();
}

}  // namespace pipebal::distributed
