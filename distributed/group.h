// The processes of one multi-process run, joined over c10d: a TCPStore rendezvous on
// MASTER_ADDR:MASTER_PORT and a Gloo process group for the messages. Besides the group itself
// it keeps what the run needs around the messages:
//  - a failure board: the first process whose stage fails posts what happened; every other
//    process notices within a fraction of a second and ends its waits with that message. A
//    process on this host that ends without a word (killed, crashed) is noticed as fast, and
//    posted as such; one on another host shows as a lost connection. One that gives no sign
//    of life (its host down or cut off, its process stopped) is named by the rank before it,
//    which watches its heartbeat on the store (heartbeat.h);
//  - a clock offset to rank 0's steady clock, so that the processes' timelines line up;
//  - a gather of strings to rank 0 (the per-rank results of a run);
//  - which peers on the same host it shares memory with.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include "pipebal/distributed/launch_env.h"
#include "pipebal/distributed/remote_failure.h"

namespace c10d {
class ProcessGroupGloo;  // a ProcessGroup in LibTorch 1.x, a Backend in 2.x
class Store;
class Work;
}  // namespace c10d

namespace pipebal::distributed {

class Group {
 public:
  // Joins the run: every process must call it; returns once all `env.world_size` processes
  // are connected. Waits and messages give up after `timeout` (the rendezvous included).
  // Throws std::invalid_argument with one line for a port in use or a master that cannot be
  // reached.
  Group(const LaunchEnv& env, std::chrono::milliseconds timeout);
  // Rank 0 waits (up to the timeout) until every process has finished with the store it
  // serves.
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const;
  int size() const;
  c10d::ProcessGroupGloo& process_group();

  // Posts `what` as this run's failure, unless another process posted one first. Never throws.
  void report_failure(const std::string& what) noexcept;
  // The posted failure, once this process has noticed it.
  std::optional<std::string> failure() const;

  // Waits for `work` (a receive or send of this process); a failure posted meanwhile ends the
  // wait early. Throws RemoteFailure for a posted failure, and rethrows the work's own error
  // (a lost connection, the timeout) prefixed by `what`.
  void wait(c10d::Work& work, const std::string& what);
  // The same for a collective (an all-reduce), which c10d's Gloo cannot abort: it is left
  // running when a failure ends the wait.
  void wait_collective(c10d::Work& work, const std::string& what);

  // A tensor to rank `to`, and one received from rank `from` into `into` (its shape and dtype),
  // both through host memory, waited for as wait() does.
  void send(const at::Tensor& tensor, int to, int tag, const std::string& what);
  void receive(at::Tensor& into, int from, int tag, const std::string& what);

  // Rank 0 gets every rank's `mine`, by rank; the others get an empty vector.
  std::vector<std::string> gather(const std::string& name, const std::string& mine);

  // Milliseconds to add to this process's steady clock to read rank 0's.
  double clock_offset_ms() const;
  // How far off that offset may be: half the round trip of the exchange it came from (0 on
  // rank 0).
  double clock_uncertainty_ms() const;

  // Whether this process and `peer` exchange the pipeline's messages through shared memory
  // (shared_slots.h): both on one host, each able to map the other's memory, and neither run
  // with PIPEBAL_SHM_DISABLE=1. The first call for a peer settles it with a handshake through
  // the store, so both must make it, each calling for its peers in increasing rank order.
  bool shares_memory_with(int peer);
  // The peers settled so far that do, in increasing order.
  std::vector<int> shared_memory_peers() const;
  // Of a peer on this host: throws PeerFailed when a failure has been posted, and RemoteFailure
  // naming the peer and `what` when its process has ended (after waiting a moment for its
  // report, which it may have posted on its way out). Does nothing for a peer of another host.
  void check_peer(int peer, const std::string& what);

  // The store's values under this run's prefix: `publish` sets one, `await` returns one once
  // set, polling (a posted failure or the timeout ends the wait, as for wait()).
  void publish(const std::string& key, const std::string& value);
  std::string await(const std::string& key);
  // 0, 1, 2, ...: how many times this process has asked for `name` before. Two processes that
  // make the same things in the same order number them alike (e.g. a channel's store keys).
  int next_serial(const std::string& name);
  std::chrono::milliseconds timeout() const;
  // How much longer than timeout() a wait for another rank goes on for a failure's report to
  // arrive: a rank that hangs names itself at its own timeout, which may have begun later than
  // the wait (the timeout, at most 5 s; a step's watch extends its deadline as much).
  std::chrono::milliseconds report_grace() const;

  // The run's store under `name`: where the members of a group of their own meet (as
  // subgroup() does for Gloo groups; nccl_link.h for NCCL).
  c10::intrusive_ptr<c10d::Store> store(const std::string& name);

  // A Gloo group of some of the ranks (`members`, in order, this one among them), for
  // collectives among them only (e.g. one stage's replicas). Every member must call it with the
  // same name and members.
  c10::intrusive_ptr<c10d::ProcessGroupGloo> subgroup(const std::string& name,
                                                      const std::vector<int>& members);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace pipebal::distributed
