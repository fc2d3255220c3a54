// Where the processes of a run meet: the c10d TCPStore on MASTER_ADDR:MASTER_PORT (rank 0
// serves it unless torchrun's agent does), and the network device Gloo binds.
#pragma once

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include <c10/util/intrusive_ptr.h>

#include "pipebal/distributed/launch_env.h"

namespace c10d {
class Store;
}  // namespace c10d
namespace gloo::transport {
class Device;
}  // namespace gloo::transport

namespace pipebal::distributed {

// The run's store, under this attempt's prefix (torchrun restarts start afresh). Throws
// std::invalid_argument with one line for a port in use, a MASTER_ADDR that is not this host
// (rank 0), or a master that cannot be reached within `timeout`.
c10::intrusive_ptr<c10d::Store> connect_store(const LaunchEnv& env,
                                              std::chrono::milliseconds timeout);

// meet() gave up while a call into the store still blocks on a thread of its own: the process
// should end without running its exit handlers, which that thread could wake into.
class RendezvousAbandoned : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The whole meeting: connect_store, then this process's `identity` set under "process/<rank>",
// then a wait until all WORLD_SIZE processes have arrived (each then finds every other's
// identity in the store). Throws std::invalid_argument with one line for what connect_store
// refuses, for processes that do not all arrive within `timeout`, for a store that closes, and
// for something on MASTER_PORT that is not a rendezvous store: one that closes the connection,
// answers nonsense, or never answers (c10d's client waits for a reply without a limit: the
// meeting is given up 2 × `timeout` + 1 s after it began, the longest a real one takes, with
// RendezvousAbandoned).
c10::intrusive_ptr<c10d::Store> meet(const LaunchEnv& env, std::chrono::milliseconds timeout,
                                     const std::string& identity);

// The rendezvous store this process connected to as a client ("127.0.0.1:29500"), once
// connect_store has begun to; empty before. For messages about a failure in a thread LibTorch
// runs for that connection (something other than a store answering there).
const std::string& store_client_address();

// Loopback for a run on one host, else the interface named by GLOO_SOCKET_IFNAME (as in
// PyTorch), else the address this host's name resolves to.
std::shared_ptr<::gloo::transport::Device> gloo_device(const LaunchEnv& env);

}  // namespace pipebal::distributed
