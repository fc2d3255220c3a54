// See rendezvous.h.
#include "pipebal/distributed/rendezvous.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <stdexcept>

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
        "cannot reach the rendezvous at {} within {:g} s (is rank 0 running there? check "
        "MASTER_ADDR and MASTER_PORT): {}",
        where, timeout.count() / 1000.0, cause));
  }
  return c10::make_intrusive<c10d::PrefixStore>(
      fmt::format("pipebal/attempt_{}", env.restart_count), store);
}

}  // namespace pipebal::distributed
