// Pipelines across processes, on loopback, with real processes: started by `pipebal launch`
// (and torchrun, in the CLI tests), or here one by one with torchrun's environment so that the
// ranks' own failure handling is seen without a launcher stopping them.
//  - Transparency: every step's loss and each stage's gradients equal the plain model's to
//    1e-10 (transparency_rank.cpp checks them in each rank) for 2 and 3 processes, GPipe and
//    1F1B, every checkpoint mode, skip tensors and deferred batch norm, zb-h1, and the
//    interleaved schedule with 2 and 3 stages per process; batches whose size changes from step
//    to step (a message larger or smaller than the receive posted for it, or its slot). The
//    messages go through shared memory (the ranks say so), and in some cases through Gloo; on
//    a GPU, a few of these cases with the stages on cuda:0.
//  - Failure: a rank that throws, is killed with SIGKILL, hangs or stops (SIGSTOP, as a host
//    gone) ends every rank, each with one line that names the failed rank; a launch exits with
//    the failed rank's status.
// Every run is bounded by `timeout`, so a hang fails the test instead of stalling the suite.
#include <sys/wait.h>

#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "pipebal/distributed/launcher.h"
#include "tests/support/scratch_dir.h"
#include "tests/tools/cli_support.h"

namespace {

using pipebal::testing::count_lines;
using pipebal::testing::read_text;
using pipebal::testing::scratch_path;

constexpr const char* kGuard = "timeout -s KILL 120 ";

struct Launched {
  int status = -1;
  std::string err;
};

Launched launch(int processes, const std::string& args, const std::string& env = "",
                const std::string& binary = PIPEBAL_RANK_BINARY) {
  const std::string err = scratch_path("launch.err");
  const std::string command =
      fmt::format("{}{}{} launch --nproc-per-node {} --master-port 0 -- {} {} >{} 2>{}", env,
                  kGuard, PIPEBAL_BINARY, processes, binary, args, scratch_path("launch.out"), err);
  const int raw = std::system(command.c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, read_text(err)};
}

struct Config {
  std::string schedule;
  std::string checkpoint;
  std::string balance;
  int chunks;
  bool batch_norm = false;
  int replicas = 1;
  int virtual_stages = 1;     // interleaved: stages per process
  bool vary_samples = false;  // batches of 11, 14, 7 samples: messages grow, then shrink
  bool through_gloo = false;  // PIPEBAL_SHM_DISABLE=1: the messages themselves through Gloo
  // PIPEBAL_TENSOR_CHANNEL=1: with through_gloo, each tensor by itself over a Gloo group of the
  // two ranks, matched in order as NCCL matches them (tensor_channel.h); without, still through
  // shared memory on a CPU or one GPU (NCCL only joins different GPUs).
  bool tensor_by_tensor = false;
};

void PrintTo(const Config& c, std::ostream* os) {
  *os << c.schedule << ", checkpoint " << c.checkpoint << ", balance " << c.balance << ", "
      << c.chunks << " chunks" << (c.batch_norm ? ", deferred batch norm" : "")
      << (c.replicas > 1 ? ", " + std::to_string(c.replicas) + " replicas" : "")
      << (c.virtual_stages > 1 ? ", " + std::to_string(c.virtual_stages) + " stages per process"
                               : "")
      << (c.vary_samples ? ", batches of 11, 14, 7 samples" : "")
      << (c.through_gloo ? ", through Gloo" : "")
      << (c.tensor_by_tensor ? ", PIPEBAL_TENSOR_CHANNEL=1" : "");
}

// Trains `c` as processes on `device` (transparency_rank compares each step with the plain
// model) and expects every rank to say so, its messages carried the way `c` asks.
void expect_transparent(const Config& c, const std::string& device = "cpu") {
  int stages = 1;
  for (char ch : c.balance) stages += ch == ',';
  const int processes = stages / c.virtual_stages * c.replicas;
  const Launched run =
      launch(processes,
             fmt::format("--schedule {} --checkpoint {} --balance {} --chunks {}{}", c.schedule,
                         c.checkpoint, c.balance, c.chunks, c.batch_norm ? " --batch-norm" : "") +
                 fmt::format(" --replicas {} --virtual {}{} --device {}", c.replicas,
                             c.virtual_stages, c.vary_samples ? " --vary-samples" : "", device),
             std::string(c.through_gloo ? "PIPEBAL_SHM_DISABLE=1 " : "") +
                 (c.tensor_by_tensor ? "PIPEBAL_TENSOR_CHANNEL=1 " : ""));
  EXPECT_EQ(run.status, 0) << run.err;
  const std::string out = read_text(scratch_path("launch.out"));
  EXPECT_EQ(count_lines(out), processes) << "each rank says its steps matched";
  // Ranks on one host exchange messages in shared memory unless told not to.
  const std::string way = !c.through_gloo      ? "in memory shared with rank"
                          : c.tensor_by_tensor ? "tensor by tensor through Gloo"
                                               : "through Gloo";
  size_t ranks_that_way = 0;
  for (size_t at = out.find(way); at != std::string::npos; at = out.find(way, at + 1))
    ++ranks_that_way;
  EXPECT_EQ(ranks_that_way, static_cast<size_t>(processes)) << out;
  EXPECT_NE(out.find("steps on " + device), std::string::npos) << out;
}

class AcrossProcesses : public ::testing::TestWithParam<Config> {};

TEST_P(AcrossProcesses, EveryStepEqualsThePlainModelInFloat64) {
  expect_transparent(GetParam());
}

std::vector<Config> configs() {
  std::vector<Config> all;
  for (const char* schedule : {"gpipe", "1f1b"}) {
    for (const char* checkpoint : {"always", "except_last", "never"}) {
      all.push_back({schedule, checkpoint, "3,3,2", 4});  // the skip crosses two processes
    }
    all.push_back({schedule, "except_last", "4,4", 3});
    all.push_back({schedule, "except_last", "2,3", 3, true});
    all.push_back({schedule, "except_last", "4,4", 3, false, 2});  // 2 stages x 2 replicas
    // Batch norm's running statistics summed over the replicas: the whole mini-batch's.
    all.push_back({schedule, "except_last", "2,3", 3, true, 2});
  }
  // A micro-batch's message larger, then smaller than its last: through Gloo, sent with a
  // notice of its size, then into a receive posted ahead with room to spare (in shared memory
  // it fits its slot; shared_memory_test grows one).
  all.push_back({"1f1b", "except_last", "3,3,2", 4, false, 1, 1, true});
  all.push_back({"1f1b", "except_last", "3,3,2", 4, false, 1, 1, true, true});
  all.push_back({"gpipe", "always", "3,3,2", 4, false, 1, 1, false, true});
  all.push_back({"interleaved", "except_last", "2,2,2,2", 4, false, 1, 2, false, true});
  // A micro-batch per sample: GPipe holds all 11 messages of a channel at once, in as many
  // shared-memory slots, reused step after step.
  all.push_back({"gpipe", "never", "4,4", 11});
  // Zero-bubble H1: W's run on each process between its B's, replicas all-reduce after them.
  all.push_back({"zb-h1", "except_last", "3,3,2", 4});
  all.push_back({"zb-h1", "never", "4,4", 3, false, 2});
  // Interleaved: each process runs several stages, taking turns in its device's order; between
  // two processes each pair of neighbouring stages has its own channel.
  all.push_back({"interleaved", "except_last", "2,2,2,2", 4, false, 1, 2});
  all.push_back({"interleaved", "never", "1,2,2,1,1,1", 6, false, 1, 3});
  all.push_back({"interleaved", "always", "2,1,2,1,1,1", 3, false, 1, 2});   // 3 processes
  all.push_back({"interleaved", "except_last", "2,2,2,2", 4, false, 2, 2});  // x 2 replicas
  all.push_back({"interleaved", "except_last", "1,1,2,1", 4, true, 2, 2});   // batch norm too
  // Tensor by tensor, matched in the order sent (as over NCCL): every schedule takes each
  // channel's messages in the order its other end sends them, also two channels between the
  // same ranks (interleaved), skips across two processes and messages that change size.
  for (const char* schedule : {"gpipe", "1f1b", "zb-h1"}) {
    all.push_back({schedule, "except_last", "3,3,2", 4, false, 1, 1, false, true, true});
  }
  all.push_back({"interleaved", "always", "2,2,2,2", 4, false, 1, 2, false, true, true});
  all.push_back({"1f1b", "never", "2,3", 3, true, 1, 1, false, true, true});
  all.push_back({"1f1b", "never", "4,4", 3, false, 2, 1, false, true, true});  // x 2 replicas
  all.push_back({"gpipe", "never", "3,3,2", 4, false, 1, 1, true, true, true});
  return all;
}

INSTANTIATE_TEST_SUITE_P(Matrix, AcrossProcesses, ::testing::ValuesIn(configs()));

// Tensor by tensor, a link matches messages in the order they were sent: a receiver that takes
// one out of turn is refused before it receives a tensor, with one error naming the channel and
// both positions (tensor_channel_rank.cpp; the matrix above runs every schedule this way).
TEST(TensorChannel, CarriesABatchAsSentAndRefusesToTakeAMessageOutOfTurn) {
  const Launched run = launch(2, "", "", PIPEBAL_TENSOR_CHANNEL_RANK_BINARY);
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_EQ(read_text(scratch_path("launch.out")),
            "waiting for rank 1's gradients of micro-batch 2 (stage 1 to 0): it was sent as "
            "message 2 of the channel, taken as message 1: the two stages take the channel's "
            "messages in different orders, which a link that matches them in order cannot "
            "carry\n");
}

// Stages on the GPU, one process each, all on cuda:0 (NCCL refuses two ranks on one device, so
// their messages leave the GPU: through shared memory, or Gloo with PIPEBAL_SHM_DISABLE=1, also
// with PIPEBAL_TENSOR_CHANNEL=1, which takes NCCL only between different GPUs);
// replicas average their gradients over Gloo. Runs where LibTorch sees a CUDA device
// (tools/gpu-check.sh); skipped elsewhere.
TEST(AcrossProcessesOnCuda, EveryStepEqualsThePlainModel_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const std::vector<Config> cases = {
      {"1f1b", "except_last", "3,3,2", 4},
      {"gpipe", "always", "3,3,2", 4, false, 1, 1, false, true},
      {"zb-h1", "except_last", "3,3,2", 4},
      {"1f1b", "never", "2,3", 3, true},
      {"1f1b", "except_last", "4,4", 3, false, 2},
      {"1f1b", "never", "2,3", 3, true, 2},  // batch-norm statistics summed over replicas
      {"interleaved", "except_last", "2,2,2,2", 4, false, 1, 2, false, true},
      {"1f1b", "except_last", "3,3,2", 4, false, 1, 1, false, true, true},
      {"zb-h1", "never", "3,3,2", 4, false, 1, 1, false, false, true},  // not NCCL: one GPU
  };
  for (const Config& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c));
    expect_transparent(c, "cuda:0");
  }
}

// Runs `processes` ranks of transparency_rank directly (no launcher), each with its own
// stderr, and returns each one's wait status. Rank `stopped` stops itself (SIGSTOP): it is
// killed once the others have ended.
std::vector<int> spawn_ranks(int processes, const std::string& args, int stopped = -1) {
  std::string script =
      "pids=(); port=$(python3 -c 'import socket; s=socket.socket(); "
      "s.bind((\"127.0.0.1\", 0)); print(s.getsockname()[1])'); ";
  for (int r = 0; r < processes; ++r) {
    script += fmt::format(
        "WORLD_SIZE={0} RANK={1} LOCAL_RANK={1} LOCAL_WORLD_SIZE={0} MASTER_ADDR=127.0.0.1 "
        "MASTER_PORT=$port {2}{3} {4} 2>{5} & pids+=($!); ",
        processes, r, kGuard, PIPEBAL_RANK_BINARY, args, scratch_path(fmt::format("err{}", r)));
  }
  for (int r = 0; r < processes; ++r) {
    if (r == stopped) continue;
    script += fmt::format("wait ${{pids[{}]}}; echo $? >{}; ", r,
                          scratch_path(fmt::format("status{}", r)));
  }
  if (stopped >= 0) {  // the rank runs under the guard's `timeout`: its child is the rank
    script += fmt::format(
        "pkill -KILL -P ${{pids[{0}]}}; {{ wait ${{pids[{0}]}}; }} 2>/dev/null; echo $? >{1}; ",
        stopped, scratch_path(fmt::format("status{}", stopped)));
  }
  const std::string file = scratch_path("spawn.sh");
  { std::ofstream(file) << script << "\n"; }
  EXPECT_EQ(std::system(("bash " + file + " >/dev/null").c_str()), 0);
  std::vector<int> statuses;
  for (int r = 0; r < processes; ++r) {
    statuses.push_back(std::stoi("0" + read_text(scratch_path(fmt::format("status{}", r)))));
  }
  return statuses;
}

std::string rank_err(int r) {
  return read_text(scratch_path(fmt::format("err{}", r)));
}

// Every rank but `failed` ends with one line that names the failed rank, and with the status of
// a rank stopped by another's failure (pipebal launch reports the cause, not these) or, when its
// own step timed out or lost the connection first, of an error.
void expect_others_stopped_naming(const std::vector<int>& statuses, int failed) {
  for (int r = 0; r < static_cast<int>(statuses.size()); ++r) {
    if (r == failed) continue;
    EXPECT_TRUE(statuses[r] == pipebal::distributed::kPeerFailedExitStatus || statuses[r] == 2)
        << "rank " << r << " exited with " << statuses[r] << ": " << rank_err(r);
    EXPECT_EQ(count_lines(rank_err(r)), 1) << rank_err(r);
    EXPECT_NE(rank_err(r).find(fmt::format("rank {}", failed)), std::string::npos) << rank_err(r);
  }
}

TEST(AcrossProcessesFailure, ARankThatThrowsStopsEveryRank) {
  const auto statuses = spawn_ranks(3, "--balance 3,3,2 --fail throw --fail-rank 1");
  ASSERT_EQ(statuses.size(), 3u);
  EXPECT_EQ(statuses[1], 2);
  EXPECT_NE(rank_err(1).find("injected failure"), std::string::npos) << rank_err(1);
  expect_others_stopped_naming(statuses, 1);
  EXPECT_NE(rank_err(0).find("stopped: rank 1 failed: stage 1, layer 3 ('inject', Inject), "
                             "forward of micro-batch 0: injected failure"),
            std::string::npos)
      << rank_err(0);
  EXPECT_EQ(statuses[0], pipebal::distributed::kPeerFailedExitStatus)
      << "stopped by rank 1's failure";
  EXPECT_NE(rank_err(0).find("injected failure"), std::string::npos) << rank_err(0);
}

TEST(AcrossProcessesFailure, ARankKilledMidStepStopsEveryRank) {
  const auto statuses = spawn_ranks(3, "--balance 3,3,2 --fail kill --fail-rank 1 --timeout 30");
  ASSERT_EQ(statuses.size(), 3u);
  EXPECT_EQ(statuses[1], 128 + 9) << "killed by SIGKILL";
  expect_others_stopped_naming(statuses, 1);
  // Noticed by the watch on the processes of this host, not by a lost connection.
  EXPECT_NE(rank_err(0).find("rank 1's process ended without reporting an error"),
            std::string::npos)
      << rank_err(0);
}

// With replicas the others wait in all-reduces too (rank 3, stage 1 of replica 1, for rank 1's
// gradients), which c10d cannot abort: every one ends naming rank 1, as stopped by its failure.
TEST(AcrossProcessesFailure, ARankKilledEndsTheOthersWaitsInTheReplicasAllReduce) {
  const auto statuses =
      spawn_ranks(4, "--balance 4,4 --replicas 2 --fail kill --fail-rank 1 --timeout 300");
  ASSERT_EQ(statuses.size(), 4u);
  EXPECT_EQ(statuses[1], 128 + 9) << "killed by SIGKILL";
  expect_others_stopped_naming(statuses, 1);
  for (int r : {0, 2, 3}) {
    EXPECT_EQ(statuses[r], pipebal::distributed::kPeerFailedExitStatus) << rank_err(r);
  }
}

TEST(AcrossProcessesFailure, ARankThatHangsIsNamedAtTheTimeout) {
  const auto statuses = spawn_ranks(3, "--balance 3,3,2 --fail hang --fail-rank 1 --timeout 3");
  ASSERT_EQ(statuses.size(), 3u);
  EXPECT_EQ(statuses[1], 2);
  EXPECT_NE(rank_err(1).find("longer than 3 s (--timeout); still running: stage 1 (forward of"),
            std::string::npos)
      << rank_err(1);
  expect_others_stopped_naming(statuses, 1);
}

// A rank that gives no sign of life -- stopped here; its host down or cut off is the same to
// the others, and no pidfd says so -- is named by the rank that watches it (rank 0 watches
// rank 1) once half the timeout has passed, before any wait times out.
TEST(AcrossProcessesFailure, ARankThatGivesNoSignOfLifeIsNamedByItsWatcher) {
  const auto statuses = spawn_ranks(3, "--balance 3,3,2 --fail stop --fail-rank 1 --timeout 20",
                                    /*stopped=*/1);
  ASSERT_EQ(statuses.size(), 3u);
  EXPECT_EQ(statuses[1], 128 + 9) << "stopped, then killed by the test";
  expect_others_stopped_naming(statuses, 1);
  for (int r : {0, 2}) {
    EXPECT_NE(rank_err(r).find("rank 1 has given no sign of life for 10 s (its host down or cut "
                               "off, or its process stopped)"),
              std::string::npos)
        << rank_err(r);
  }
}

TEST(AcrossProcessesFailure, LaunchStopsTheOthersAndExitsWithTheFailedRanksStatus) {
  const Launched run = launch(3, "--balance 3,3,2 --fail throw --fail-rank 2");
  EXPECT_EQ(run.status, 2) << run.err;
  EXPECT_NE(run.err.find("pipebal launch: rank 2 exited with status 2; stopping the other"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("rank 2: stage 2"), std::string::npos) << run.err;
}

}  // namespace
