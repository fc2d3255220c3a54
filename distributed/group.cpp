// See group.h.
#include "pipebal/distributed/group.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>

#include <fmt/format.h>
#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "pipebal/common/env_flag.h"
#include "pipebal/distributed/heartbeat.h"
#include "pipebal/distributed/process_watch.h"
#include "pipebal/distributed/rendezvous.h"
#include "pipebal/distributed/shared_segment.h"
#include "pipebal/distributed/tags.h"
#include "pipebal/pipeline/error_text.h"

namespace pipebal::distributed {
namespace {

using Clock = std::chrono::steady_clock;

double now_ms() {
  return std::chrono::duration<double, std::milli>(Clock::now().time_since_epoch()).count();
}

std::string text_of(const std::vector<uint8_t>& bytes) {
  return {bytes.begin(), bytes.end()};
}
std::vector<uint8_t> bytes_of(const std::string& text) {
  return {text.begin(), text.end()};
}

}  // namespace

// What a collective's completion callback touches: not the State, which owns the process group
// whose worker thread runs the callback (dropping the last State there would join that thread).
struct CollectiveBoard {
  std::mutex mutex;
  std::condition_variable done;
};

struct Group::State {
  LaunchEnv env;
  std::chrono::milliseconds timeout{0};
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  double clock_offset_ms = 0;
  double clock_uncertainty_ms = 0;  // half the round trip of the exchange the offset came from

  std::mutex mutex;
  std::condition_variable stop_monitor;
  std::shared_ptr<CollectiveBoard> collectives = std::make_shared<CollectiveBoard>();
  bool abandoned_collective = false;  // a failure ended a wait_collective before its work
  bool stopping = false;
  std::optional<std::string> failure;
  std::set<c10d::Work*> waiting;
  std::thread monitor;
  std::map<int, bool> shares_memory;  // by peer, once settled
  std::map<int, int> peer_pids;       // by peer on this host: a pidfd, else -pid
  std::set<int> departed;             // peers of this host that left the run as they should
  std::map<std::string, int> serials;

  ~State() {
    for (const auto& [peer, handle] : peer_pids) close_process_handle(handle);
  }

  // The value of `key` once another process has set it, polling the store (a failure posted
  // meanwhile ends the wait).
  std::string await(const std::string& key);

  // Every tenth of a second: has another process posted a failure, has a process of this host
  // ended without a word, or has the rank this one watches given no sign of life for a while?
  // Then end this one's waits.
  void watch_for_failures() {
    Heartbeat heartbeat(env.rank, env.world_size, Heartbeat::silence_limit(timeout), Clock::now());
    std::unique_lock<std::mutex> lock(mutex);
    while (!stop_monitor.wait_for(lock, std::chrono::milliseconds(100), [&] { return stopping; })) {
      if (failure) continue;
      std::map<int, int> local_peers = peer_pids;
      for (int peer : departed) local_peers.erase(peer);
      lock.unlock();
      std::optional<std::string> posted;
      std::vector<int> left;
      try {
        posted = posted_failure();
        if (!posted) posted = silent_end(local_peers, left);
        if (!posted) posted = silent_peer(heartbeat);
      } catch (const std::exception& error) {
        posted = fmt::format("lost the rendezvous store at {}:{} (has rank 0 ended?): {}",
                             env.master_addr, env.master_port, pipeline::first_line(error.what()));
      }
      lock.lock();
      departed.insert(left.begin(), left.end());
      if (posted && !stopping) fail(*posted);
    }
  }

  std::optional<std::string> posted_failure() const {
    if (!store->check({"failure"})) return std::nullopt;
    return text_of(store->get("failure"));
  }

  // A peer of this host whose process has ended without leaving the run (~Group) or posting a
  // failure: posted for it, and returned. Those that ended having left are added to `left`.
  std::optional<std::string> silent_end(const std::map<int, int>& local_peers,
                                        std::vector<int>& left) {
    for (const auto& [peer, handle] : local_peers) {
      if (!process_ended(handle)) continue;
      if (store->check({left_key(peer)})) {
        left.push_back(peer);
        continue;
      }
      return post_unless_reported(fmt::format(
          "rank {}'s process ended without reporting an error (killed, or crashed)", peer));
    }
    return std::nullopt;
  }

  // Twice a second, beats for this process and reads the count of the rank it watches: posted
  // for that rank, and returned, once it has been silent for longer than the limit without
  // having left the run. A host that is down or cut off, or a process stopped, says nothing and
  // closes no connection.
  std::optional<std::string> silent_peer(Heartbeat& heartbeat) {
    const auto now = Clock::now();
    if (!heartbeat.beat_due(now)) return std::nullopt;
    store->add(Heartbeat::key(env.rank), 1);
    const std::optional<int> peer = heartbeat.watched();
    if (!peer || !heartbeat.silent(store->add(Heartbeat::key(*peer), 0), now)) {
      return std::nullopt;
    }
    if (store->check({left_key(*peer)})) return std::nullopt;
    return post_unless_reported(fmt::format(
        "rank {} has given no sign of life for {:g} s (its host down or cut off, or its process "
        "stopped)",
        *peer, heartbeat.limit().count() / 1000.0));
  }

  // Posts `what` as the run's failure, unless one was posted already (a process that failed
  // posts its report before it ends): the failure posted.
  std::optional<std::string> post_unless_reported(const std::string& what) {
    if (auto report = posted_failure()) return report;
    if (store->add("failed", 1) == 1) store->set("failure", bytes_of(what));
    return posted_failure();
  }

  static std::string left_key(int rank) { return fmt::format("left/{}", rank); }

  static std::string finished_key(int rank) { return fmt::format("finished/{}", rank); }

  // Whether `peer` runs on this host and its process has ended.
  bool peer_ended(int peer) {
    std::lock_guard<std::mutex> lock(mutex);
    const auto known = peer_pids.find(peer);
    return known != peer_pids.end() && process_ended(known->second);
  }

  // Under `mutex`.
  void fail(const std::string& what) {
    if (failure) return;
    failure = what;
    for (c10d::Work* work : waiting) {
      try {
        work->abort();
      } catch (const std::exception&) {
        // Not abortable: its wait ends with the failure instead (wait_collective).
      }
    }
    collectives->done.notify_all();  // its waits check the failure at least every 100 ms
  }

  // The processes of this host among the peers, from the identities they published.
  void watch_local_peers() {
    for (int r = 0; r < env.world_size; ++r) {
      const std::string key = fmt::format("process/{}", r);
      if (r == env.rank || !store->check({key})) continue;
      if (const std::optional<int> handle = watch_process(text_of(store->get(key)))) {
        std::lock_guard<std::mutex> lock(mutex);
        peer_pids.emplace(r, *handle);
      }
    }
  }

  void synchronize_clocks();
};

// Rank r asks rank 0 for its clock a few times and keeps the exchange with the shortest round
// trip: offset = rank 0's reading minus the midpoint of r's send and receive.
void Group::State::synchronize_clocks() {
  constexpr int kRounds = 8;
  const int size = env.world_size;
  auto stamp = at::zeros({1}, at::kDouble);
  if (env.rank == 0) {
    for (int r = 1; r < size; ++r) {
      for (int round = 0; round < kRounds; ++round) {
        std::vector<at::Tensor> message{stamp};
        group->recv(message, r, kClockTag)->wait();
        stamp.fill_(now_ms());
        group->send(message, r, kClockTag)->wait();
      }
    }
    return;
  }
  double best_round_trip = std::numeric_limits<double>::infinity();
  for (int round = 0; round < kRounds; ++round) {
    std::vector<at::Tensor> message{stamp};
    const double sent = now_ms();
    group->send(message, 0, kClockTag)->wait();
    group->recv(message, 0, kClockTag)->wait();
    const double received = now_ms();
    if (received - sent < best_round_trip) {
      best_round_trip = received - sent;
      clock_offset_ms = stamp.item<double>() - (sent + received) / 2;
      clock_uncertainty_ms = best_round_trip / 2;
    }
  }
}

std::string Group::State::await(const std::string& key) {
  const auto deadline = Clock::now() + timeout;
  while (!store->check({key})) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (failure) throw PeerFailed(*failure);
    }
    if (Clock::now() > deadline) {
      throw RemoteFailure(fmt::format("waited {:g} s for {} in the rendezvous store",
                                      timeout.count() / 1000.0, key));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return text_of(store->get(key));
}

Group::Group(const LaunchEnv& env, std::chrono::milliseconds timeout)
    : state_(std::make_shared<State>()) {
  State& st = *state_;
  st.env = env;
  st.timeout = timeout;
  st.store = meet(env, timeout, process_identity());
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
  try {
    options->devices.push_back(gloo_device(env));
  } catch (const std::exception& error) {
    throw std::invalid_argument(
        fmt::format("cannot open a network device for Gloo ({}): {}",
                    interface ? fmt::format("GLOO_SOCKET_IFNAME={}", interface)
                              : "the address this host's name resolves to",
                    pipeline::error_summary(error)));
  }
  try {
    st.group = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("gloo", st.store), env.rank, env.world_size,
        options);
  } catch (const std::exception& error) {
    // Every process reached the store: what failed is the connections between them.
    throw std::invalid_argument(fmt::format(
        "all {} processes reached the rendezvous store, but their Gloo connections did not all "
        "open within {:g} s (a firewall between the hosts, or a host name that resolves to a "
        "loopback address: set GLOO_SOCKET_IFNAME to the interface the hosts reach each other "
        "on): {}",
        env.world_size, timeout.count() / 1000.0, pipeline::error_summary(error)));
  }
  st.watch_local_peers();
  st.synchronize_clocks();
  st.monitor = std::thread([state = state_] { state->watch_for_failures(); });
}

Group::~Group() {
  State& st = *state_;
  if (std::uncaught_exceptions() == 0) {
    try {
      st.store->set(State::left_key(st.env.rank), bytes_of("1"));
    } catch (const std::exception&) {
      // The store is gone: nobody is left to tell.
    }
  } else if (!failure()) {
    // Leaving on an error outside the pipeline's steps, which posts those it meets: say so (the
    // error itself is this process's output) rather than let the others think it was killed.
    report_failure("stopped on an error of its own (its output says which)");
  }
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    st.stopping = true;
  }
  st.stop_monitor.notify_all();
  st.monitor.join();
  // The store lives in rank 0: it stays up until every process is done with it.
  try {
    st.store->set(State::finished_key(st.env.rank), bytes_of("1"));
    if (st.env.rank == 0 && !st.env.agent_store) {
      // After a failure a process may have ended without saying so: wait briefly, and not for
      // those of this host seen ended.
      const auto deadline =
          Clock::now() + (failure() ? std::chrono::milliseconds(2000) : st.timeout);
      std::vector<int> pending;
      for (int r = 1; r < st.env.world_size; ++r) pending.push_back(r);
      while (!pending.empty() && Clock::now() < deadline) {
        const bool failed = failure().has_value();
        pending.erase(std::remove_if(pending.begin(), pending.end(),
                                     [&](int r) {
                                       return st.store->check({State::finished_key(r)}) ||
                                              (failed && st.peer_ended(r));
                                     }),
                      pending.end());
        if (!pending.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  } catch (const std::exception&) {
    // The store is gone already: nothing is left to wait for.
  }
  if (st.abandoned_collective) {
    // Its work still runs on the process group's thread, which destroying the group would join:
    // the process is ending on a failure, and leaves the group to the exit.
    new std::shared_ptr<State>(state_);
  }
}

int Group::rank() const {
  return state_->env.rank;
}
int Group::size() const {
  return state_->env.world_size;
}
c10d::ProcessGroupGloo& Group::process_group() {
  return *state_->group;
}
double Group::clock_uncertainty_ms() const {
  return state_->clock_uncertainty_ms;
}

double Group::clock_offset_ms() const {
  return state_->clock_offset_ms;
}

void Group::report_failure(const std::string& what) noexcept {
  State& st = *state_;
  const std::string message = fmt::format("rank {} failed: {}", st.env.rank, what);
  try {
    if (st.store->add("failed", 1) == 1) st.store->set("failure", bytes_of(message));
  } catch (...) {
    // The store is gone: the others learn of it from the lost connection instead.
  }
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    st.fail(message);
  }
  // Rank 0 serves the store: it lingers until the others have polled the report, since its
  // exit would otherwise reach them first, as a lost store.
  if (st.env.rank == 0 && !st.env.agent_store)
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
}

std::optional<std::string> Group::failure() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->failure;
}

void Group::send(const at::Tensor& tensor, int to, int tag, const std::string& what) {
  std::vector<at::Tensor> message{tensor.to(at::kCPU).contiguous()};
  wait(*process_group().send(message, to, tag), what);
}

void Group::receive(at::Tensor& into, int from, int tag, const std::string& what) {
  std::vector<at::Tensor> message{at::empty(into.sizes(), into.options().device(at::kCPU))};
  wait(*process_group().recv(message, from, tag), what);
  into.copy_(message[0]);
}

void Group::wait(c10d::Work& work, const std::string& what) {
  State& st = *state_;
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    if (st.failure) throw PeerFailed(*st.failure);
    st.waiting.insert(&work);
  }
  bool completed = false;
  std::exception_ptr error;
  try {
    completed = work.wait();
  } catch (...) {
    error = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    st.waiting.erase(&work);
  }
  if (completed && !error) return;
  // A lost connection is most often the echo of a failure elsewhere, and a receive that timed
  // out may wait for a rank that hangs: prefer the report of either, which follows shortly.
  const auto deadline = Clock::now() + report_grace();
  while (error && !failure() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (auto posted = failure()) throw PeerFailed(*posted);
  if (!error) throw RemoteFailure(what + ": aborted");
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    throw RemoteFailure(fmt::format("{}: {}", what, pipeline::error_summary(e)));
  }
}

void Group::wait_collective(c10d::Work& work, const std::string& what) {
  State& st = *state_;
  const c10::intrusive_ptr<c10::ivalue::Future> done = work.getFuture();
  const std::shared_ptr<CollectiveBoard> board = st.collectives;
  done->addCallback([board](c10::ivalue::Future&) {
    std::lock_guard<std::mutex> lock(board->mutex);
    board->done.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(board->mutex);
    while (!done->completed()) {
      if (const std::optional<std::string> posted = failure()) {
        std::lock_guard<std::mutex> state_lock(st.mutex);
        st.abandoned_collective = true;
        throw PeerFailed(*posted);
      }
      board->done.wait_for(lock, std::chrono::milliseconds(100));
    }
  }
  wait(work, what);  // done: returns at once, or reports its error
}

// Each side offers the other a probe segment holding a random token, opens the other's and reads
// its token back, and says whether that worked; memory is shared only if it did both ways. A
// peer on another host (or in another container, or run by another user) fails to open it.
bool Group::shares_memory_with(int peer) {
  State& st = *state_;
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    if (auto known = st.shares_memory.find(peer); known != st.shares_memory.end())
      return known->second;
  }
  const int me = st.env.rank;
  const std::string pair =
      fmt::format("shared_memory/{}-{}/", std::min(me, peer), std::max(me, peer));
  const bool wanted = !env_flag(kShmDisableVariable);
  std::unique_ptr<SharedSegment> probe;
  std::random_device random;
  const uint64_t token = (uint64_t{random()} << 32) | random();
  if (wanted) {
    try {
      probe = SharedSegment::create(sizeof token);
      std::memcpy(probe->data(), &token, sizeof token);
    } catch (const std::system_error&) {
      // No memory files here: messages go through Gloo.
    }
  }
  st.store->set(
      pair + std::to_string(me),
      bytes_of(probe ? fmt::format("{} {} {}", probe->address().pid, probe->address().fd, token)
                     : "none"));
  bool reached = false;
  SegmentAddress address;
  uint64_t their_token = 0;
  if (std::istringstream offer(st.await(pair + std::to_string(peer)));
      probe && offer >> address.pid >> address.fd >> their_token) {
    try {
      const auto theirs = SharedSegment::open(address, sizeof their_token);
      reached = std::memcmp(theirs->data(), &their_token, sizeof their_token) == 0;
    } catch (const std::system_error&) {
      // Another host, or memory this process may not map.
    }
  }
  st.store->set(pair + "reached/" + std::to_string(me), bytes_of(reached ? "1" : "0"));
  const bool shared = st.await(pair + "reached/" + std::to_string(peer)) == "1" && reached;
  std::lock_guard<std::mutex> lock(st.mutex);
  st.shares_memory[peer] = shared;
  if (shared && st.peer_pids.count(peer) == 0) {
    st.peer_pids[peer] = process_handle(static_cast<pid_t>(address.pid));
  }
  return shared;
}

void Group::check_peer(int peer, const std::string& what) {
  State& st = *state_;
  int handle = 0;
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    if (st.failure) throw PeerFailed(*st.failure);
    const auto known = st.peer_pids.find(peer);
    if (known == st.peer_pids.end()) return;
    handle = known->second;
  }
  if (!process_ended(handle)) return;
  // A process that failed posts its report on its way out: prefer it to the bare fact.
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (!failure() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (auto posted = failure()) throw PeerFailed(*posted);
  throw RemoteFailure(fmt::format("{}: rank {}'s process ended", what, peer));
}

void Group::publish(const std::string& key, const std::string& value) {
  state_->store->set(key, bytes_of(value));
}

std::string Group::await(const std::string& key) {
  return state_->await(key);
}

int Group::next_serial(const std::string& name) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->serials[name]++;
}

std::chrono::milliseconds Group::timeout() const {
  return state_->timeout;
}

std::chrono::milliseconds Group::report_grace() const {
  return std::min<std::chrono::milliseconds>(state_->timeout, std::chrono::seconds(5));
}

std::vector<int> Group::shared_memory_peers() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<int> peers;
  for (const auto& [peer, shared] : state_->shares_memory)
    if (shared) peers.push_back(peer);
  return peers;
}

c10::intrusive_ptr<c10d::Store> Group::store(const std::string& name) {
  return c10::make_intrusive<c10d::PrefixStore>("group/" + name, state_->store);
}

c10::intrusive_ptr<c10d::ProcessGroupGloo> Group::subgroup(const std::string& name,
                                                           const std::vector<int>& members) {
  State& st = *state_;
  const auto me = std::find(members.begin(), members.end(), st.env.rank);
  if (me == members.end()) {
    throw std::logic_error(fmt::format("rank {} is not a member of group {}", st.env.rank, name));
  }
  auto options = c10d::ProcessGroupGloo::Options::create(st.timeout);
  options->devices = st.group->getOptions()->devices;
  try {
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store(name),
                                                       static_cast<int>(me - members.begin()),
                                                       static_cast<int>(members.size()), options);
  } catch (const std::exception& error) {
    throw RemoteFailure(fmt::format("the ranks of group {} did not all connect within {:g} s: {}",
                                    name, st.timeout.count() / 1000.0,
                                    pipeline::error_summary(error)));
  }
}

std::vector<std::string> Group::gather(const std::string& name, const std::string& mine) {
  State& st = *state_;
  st.store->set(fmt::format("gather/{}/{}", name, st.env.rank), bytes_of(mine));
  if (st.env.rank != 0) return {};
  std::vector<std::string> all;
  for (int r = 0; r < st.env.world_size; ++r) {
    // Watching for a failure posted meanwhile (a rank failing after its last step).
    all.push_back(st.await(fmt::format("gather/{}/{}", name, r)));
  }
  return all;
}

}  // namespace pipebal::distributed
