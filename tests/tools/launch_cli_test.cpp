// `pipebal train` as the processes of a multi-process run, launched the ways users launch it:
// `pipebal launch` and torchrun (`python3 -m torch.distributed.run --no-python`). Both train
// exactly like one process; rank 0 alone writes the outputs, with every rank's part. (What goes
// wrong across processes: launch_failure_cli_test.cpp.)
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipebal/common/cores.h"
#include "pipebal/distributed/launcher.h"
#include "tests/support/loopback_port.h"
#include "tests/tools/cli_support.h"
#include "tests/tools/launch_support.h"

namespace pipebal::testing {
namespace {

nlohmann::json read_json(const std::string& path) {
  return nlohmann::json::parse(read_text(path));
}

std::vector<double> losses(const nlohmann::json& run) {
  std::vector<double> values;
  for (const auto& step : run.at("steps")) values.push_back(step.at("loss").get<double>());
  return values;
}

// Across processes too, the merged timeline keeps the data dependencies — F(1, i) starts after
// F(0, i) ended, B(0, i) after B(1, i) — up to the uncertainty of the clock alignment that the
// run reports (half the best round trip of the exchange with rank 0; a busy machine widens it).
void expect_aligned_timeline(const nlohmann::json& run) {
  double slack = 0;
  for (const auto& p : run.at("processes")) {
    slack = std::max(slack, p.at("clock_uncertainty_ms").get<double>());
  }
  EXPECT_LT(slack, 50.0) << "the clocks are aligned to well within a step";
  std::map<std::tuple<int, std::string, int>, std::pair<double, double>> at;
  for (const auto& e : run.at("timeline")) {
    at[{e.at("stage").get<int>(), e.at("action").get<std::string>(),
        e.at("micro_batch").get<int>()}] = {e.at("start_ms").get<double>(),
                                            e.at("end_ms").get<double>()};
  }
  ASSERT_EQ(at.size(), 16u);  // 2 stages x 4 micro-batches x (F, B), no recompute in 1F1B... or R
  for (int i = 0; i < 4; ++i) {
    EXPECT_GE(at.at({1, "F", i}).first + slack, at.at({0, "F", i}).second) << "F(1," << i << ")";
    EXPECT_GE(at.at({0, "B", i}).first + slack, at.at({1, "B", i}).second) << "B(0," << i << ")";
  }
}

// The (process, thread) lanes of a Chrome trace's actions: (rank, stage) across processes.
using Lanes = std::set<std::pair<int, int>>;
Lanes trace_lanes(const std::string& path) {
  const nlohmann::json trace = read_json(path);
  Lanes lanes;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "X") lanes.insert({e.at("pid").get<int>(), e.at("tid").get<int>()});
  }
  return lanes;
}

TEST(LaunchCli, LaunchAndTorchrunTrainExactlyLikeOneProcess) {
  const std::string dir = scratch_dir();
  const CliResult single = run_pipebal(kTrain + " --checkpoint never -o " + dir + "/single.json");
  ASSERT_EQ(single.status, 0) << single.err;

  const std::string launched_dir = dir + "/launch";
  std::filesystem::create_directories(launched_dir);
  const CliResult launched = run_pipebal(fmt::format(
      "launch --nproc-per-node 2 --master-port 0 -- {}{} --checkpoint never -o {}/run.json "
      "--trace {}/trace.json",
      PIPEBAL_BINARY, kTrain, launched_dir, launched_dir));
  ASSERT_EQ(launched.status, 0) << launched.err;
  expect_files(launched_dir, {"run.json", "trace.json"});

  // Debian's torchrun (torch 1.13 on Python 3.11) fails on its default --redirects/--tee
  // values; any other value works. Its logs go to the scratch directory.
  const std::string torchrun_dir = dir + "/torchrun";
  std::filesystem::create_directories(torchrun_dir);
  const std::string torchrun = fmt::format(
      "timeout -s KILL 120 {} -m torch.distributed.run --nproc_per_node 2 --master_port {} "
      "--redirects 2 --tee 2 --log_dir {}/logs --no_python {}{} --checkpoint never -o {}/run.json "
      ">{}/out 2>{}/err",
      PIPEBAL_TORCH_PYTHON, 29400 + getpid() % 500, dir, PIPEBAL_BINARY, kTrain, torchrun_dir, dir,
      dir);
  ASSERT_EQ(std::system(torchrun.c_str()), 0) << read_text(dir + "/err");

  const nlohmann::json one = read_json(dir + "/single.json");
  const nlohmann::json by_launch = read_json(launched_dir + "/run.json");
  const nlohmann::json by_torchrun = read_json(torchrun_dir + "/run.json");
  EXPECT_EQ(losses(by_launch), losses(one));
  EXPECT_EQ(losses(by_torchrun), losses(one));
  for (const auto* run : {&by_launch, &by_torchrun}) {
    ASSERT_EQ(run->at("processes").size(), 2u);
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(run->at("processes")[r].at("rank").get<int>(), r);
      EXPECT_GT(run->at("processes")[r].at("peak_rss_bytes").get<int64_t>(), 0);
      // Each rank's threads' CPU time over the run (its start-up left out): some, and not much
      // more than all its cores over rank 0's interval (each rank measures its own, nearly the
      // same).
      const double cpu_seconds = run->at("processes")[r].at("cpu_seconds").get<double>();
      const nlohmann::json& load = run->at("environment").at("machine_load");
      EXPECT_GT(cpu_seconds, 0) << "rank " << r;
      EXPECT_LE(cpu_seconds,
                1.5 * load.at("seconds").get<double>() * load.at("cores").get<int>() + 0.1)
          << "rank " << r;
      EXPECT_GT(run->at("stages")[r].at("peak_memory_bytes").get<int64_t>(), 0) << "stage " << r;
    }
    expect_aligned_timeline(*run);
  }
  EXPECT_TRUE(one.at("processes").empty());
  // The machine's load, over the cores the ranks share: counted once, not once per rank.
  const int cores = static_cast<int>(pipebal::allowed_cpus().size());
  for (const auto* run : {&one, &by_launch, &by_torchrun}) {
    const nlohmann::json& load = run->at("environment").at("machine_load");
    EXPECT_EQ(load.at("cores").get<int>(), cores) << load.dump();
    EXPECT_GT(load.at("seconds").get<double>(), 0) << load.dump();
  }
  // The trace has both stages' actions, each in the process lane of its rank.
  EXPECT_EQ(trace_lanes(launched_dir + "/trace.json"), (Lanes{{0, 0}, {1, 1}}));
}

// A stage's memory is what its device holds, whichever way its messages came: GPipe with every
// micro-batch checkpointed keeps all 4 inputs (128 KiB each) on stage 1 until its backward pass.
// Between threads the inputs are the sender's own tensors, across processes views of its shared
// memory; either way they are stage 1's once it took them. (Until then they are the sender's:
// how many wait untaken depends on timing, so stage 0's peak is not compared.)
TEST(LaunchCli, AStagesMemoryIsTheSameInThreadsAndInProcesses) {
  const std::string dir = scratch_dir();
  const std::string train =
      " train --model mlp:layers=4,width=32 --input-shape 4096,32 --balance 3,2 --chunks 4 "
      "--schedule gpipe --checkpoint always --steps 1 --warmup-steps 1 --timeout 60 -q -o ";
  const CliResult threads = run_pipebal(train + dir + "/threads.json");
  ASSERT_EQ(threads.status, 0) << threads.err;
  const CliResult processes =
      run_pipebal(fmt::format("launch --nproc-per-node 2 --master-port 0 -- {}{}{}/processes.json",
                              PIPEBAL_BINARY, train, dir));
  ASSERT_EQ(processes.status, 0) << processes.err;
  const nlohmann::json in_threads = read_json(dir + "/threads.json");
  const nlohmann::json across = read_json(dir + "/processes.json");
  ASSERT_EQ(across.at("processes")[1].at("shared_memory_peers"), nlohmann::json::array({0}));
  const auto last_stage = [](const nlohmann::json& run) {
    return run.at("stages").at(1).at("peak_memory_bytes").get<double>();
  };
  const double inputs = 4 * 1024 * 32 * 4;
  EXPECT_GT(last_stage(in_threads), inputs);
  EXPECT_GT(last_stage(across), inputs);
  EXPECT_NEAR(last_stage(in_threads), last_stage(across), 0.1 * last_stage(across));
}

// Two "hosts" on loopback: a launcher per node (--nnodes 2, --node-rank 0 and 1), one process
// each, meeting at node 0's address, train exactly like one process; node 0's rank 0 reports.
TEST(LaunchCli, TwoNodesTrainExactlyLikeOneProcess) {
  const std::string dir = scratch_dir();
  const CliResult single = run_pipebal(kTrain + " --checkpoint never -o " + dir + "/single.json");
  ASSERT_EQ(single.status, 0) << single.err;
  const int port = 29900 + getpid() % 500;
  const auto node = [&](int rank) {
    return fmt::format(
        "{} launch --nproc-per-node 1 --nnodes 2 --node-rank {} --master-addr 127.0.0.1 "
        "--master-port {} -- {}{} --checkpoint never -o {}/node{}.json >{}/out{} 2>{}/err{}",
        PIPEBAL_BINARY, rank, port, PIPEBAL_BINARY, kTrain, dir, rank, dir, rank, dir, rank);
  };
  const std::string both = fmt::format(
      "timeout -s KILL 120 sh -c '{} & first=$!; {}; second=$?; wait $first; exit $(($? | "
      "second))'",
      node(0), node(1));
  ASSERT_EQ(std::system(both.c_str()), 0) << read_text(dir + "/err0") << read_text(dir + "/err1");
  const nlohmann::json run = read_json(dir + "/node0.json");
  EXPECT_EQ(losses(run), losses(read_json(dir + "/single.json")));
  ASSERT_EQ(run.at("processes").size(), 2u);
  EXPECT_FALSE(std::filesystem::exists(dir + "/node1.json")) << "only rank 0 writes";
  expect_aligned_timeline(run);
}

// The interleaved schedule across processes: two ranks run two stages each (rank r stages r and
// r + 2) and train exactly like one process; each stage's actions sit in its rank's trace lane.
TEST(LaunchCli, InterleavedRunsSeveralStagesPerProcessExactlyLikeOneProcess) {
  const std::string dir = scratch_dir();
  const std::string train =
      " train --model mlp:layers=4,width=32 --input-shape 16,32 --balance 1,1,2,1 --chunks 4 "
      "--schedule interleaved --virtual 2 --steps 3 --warmup-steps 1 --timeout 60 -q";
  const CliResult single = run_pipebal(train + " -o " + dir + "/single.json");
  ASSERT_EQ(single.status, 0) << single.err;
  const CliResult launched = run_pipebal(fmt::format(
      "launch --nproc-per-node 2 --master-port 0 -- {}{} -o {}/run.json --trace {}/trace.json",
      PIPEBAL_BINARY, train, dir, dir));
  ASSERT_EQ(launched.status, 0) << launched.err;

  const nlohmann::json run = read_json(dir + "/run.json");
  EXPECT_EQ(losses(run), losses(read_json(dir + "/single.json")));
  EXPECT_EQ(run.at("schedule"), "interleaved");
  ASSERT_EQ(run.at("processes").size(), 2u);
  ASSERT_EQ(run.at("stages").size(), 4u);
  for (int s = 0; s < 4; ++s) {
    EXPECT_GT(run.at("stages")[s].at("peak_memory_bytes").get<int64_t>(), 0) << "stage " << s;
  }
  EXPECT_EQ(trace_lanes(dir + "/trace.json"), (Lanes{{0, 0}, {1, 1}, {0, 2}, {1, 3}}));
}

// R replicas of a pipeline of `chunks` micro-batches train exactly like one pipeline over their
// whole mini-batch in R × chunks micro-batches, dropout included: each replica's stochastic layers
// are seeded by its micro-batches' place in the mini-batch, and draw the masks the one pipeline
// draws for them. Without dropout the losses would match whatever the seeds.
TEST(LaunchCli, ReplicasWithDropoutTrainExactlyLikeOnePipelineOverTheirBatch) {
  const std::string dir = scratch_dir();
  const std::string model =
      " train --model gpt:layers=2,dim=16,heads=2,seq=8,vocab=40,dropout=30 --dtype float64 "
      "--balance 2,3 --steps 3 --warmup-steps 0 --seed 7 --optimizer sgd --lr 0.5 --timeout 60 -q";
  const CliResult single =
      run_pipebal(model + " --input-shape 8,8 --chunks 4 -o " + dir + "/single.json");
  ASSERT_EQ(single.status, 0) << single.err;
  const CliResult replicas = run_pipebal(
      fmt::format("launch --nproc-per-node 4 --master-port 0 -- {}{} --input-shape 4,8 --chunks 2 "
                  "--replicas 2 -o {}/replicas.json",
                  PIPEBAL_BINARY, model, dir));
  ASSERT_EQ(replicas.status, 0) << replicas.err;
  const std::vector<double> one = losses(read_json(dir + "/single.json"));
  const std::vector<double> two = losses(read_json(dir + "/replicas.json"));
  ASSERT_EQ(one.size(), 3u);
  ASSERT_EQ(two.size(), one.size());
  for (size_t step = 0; step < one.size(); ++step) {
    EXPECT_NEAR(two[step], one[step], 1e-10 * std::abs(one[step])) << "step " << step;
  }
  // Dropout is at work: without it, other losses.
  std::string no_dropout = model;
  no_dropout.replace(no_dropout.find("dropout=30"), 10, "dropout=0");
  const CliResult plain =
      run_pipebal(no_dropout + " --input-shape 8,8 --chunks 4 -o " + dir + "/plain.json");
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_GT(std::abs(losses(read_json(dir + "/plain.json")).back() - one.back()), 1e-6);
}

// --bind-cores: each process runs on its own share of the launcher's cores (as many as the
// launcher's allow, split in order), and asks for none that would be left without one.
TEST(LaunchCli, BindCoresPinsEachProcessToItsShareOfTheCores) {
  // As the kernel lists cores in /proc/PID/status: runs of consecutive ones as first-last.
  const auto listed = [](const std::vector<int>& cores) {
    std::string text;
    for (size_t i = 0; i < cores.size();) {
      size_t end = i + 1;
      while (end < cores.size() && cores[end] == cores[end - 1] + 1) ++end;
      text += fmt::format("{}{}", text.empty() ? "" : ",", cores[i]);
      if (end - i > 1) text += fmt::format("-{}", cores[end - 1]);
      i = end;
    }
    return text;
  };
  const std::string print_cores =
      "-- sh -c 'echo \"$LOCAL_RANK $PIPEBAL_BIND_CORES $(grep Cpus_allowed_list "
      "/proc/self/status | cut -f2)\"'";
  const std::vector<int> cpus = pipebal::allowed_cpus();
  const int processes = std::min<int>(2, cpus.size());
  const CliResult r = run_pipebal(fmt::format(
      "launch --nproc-per-node {} --bind-cores --master-port 0 {}", processes, print_cores));
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<std::vector<int>> shares =
      pipebal::distributed::core_shares(pipebal::physical_cores(cpus), processes);
  for (int local = 0; local < processes; ++local) {
    const std::string line = fmt::format("{} 1 {}\n", local, listed(shares[local]));
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "in " << r.out;
  }
  // Each bound rank reads its own share: the run's load is over their cores together.
  if (processes == 2) {
    const std::string run = scratch_dir() + "/bound-run.json";
    const CliResult bound = run_pipebal(
        fmt::format("launch --nproc-per-node 2 --bind-cores --master-port 0 -- {}{} -o {}",
                    PIPEBAL_BINARY, kTrain, run));
    ASSERT_EQ(bound.status, 0) << bound.err;
    const nlohmann::json load = read_json(run).at("environment").at("machine_load");
    EXPECT_EQ(load.at("cores").get<int>(), static_cast<int>(cpus.size())) << load.dump();
  }
  // Without the flag every process may run on all of the launcher's cores, and is told so.
  const CliResult unbound = run_pipebal("launch --nproc-per-node 2 --master-port 0 " + print_cores);
  ASSERT_EQ(unbound.status, 0) << unbound.err;
  for (int local = 0; local < 2; ++local) {
    const std::string line = fmt::format("{} 0 {}\n", local, listed(cpus));
    EXPECT_NE(unbound.out.find(line), std::string::npos) << line << "in " << unbound.out;
  }
}

// `pipebal link` between two processes adds the measured link to a profile; balance then prices
// transfers with it, each message at least the engine's hand-off.
TEST(LaunchCli, LinkMeasuresBetweenTwoProcessesIntoTheProfile) {
  const std::string dir = scratch_dir();
  const std::string profile = dir + "/profile.json";
  ASSERT_EQ(run_pipebal("profile --model mlp:layers=3,width=64 --input-shape 32,64 --repeat 2 "
                        "--warmup 1 -q -o " +
                        profile)
                .status,
            0);
  const CliResult measured = run_pipebal(fmt::format(
      "launch --nproc-per-node 2 --master-port 0 -- {} link --profile {} --sizes 64K,16M "
      "--repeats 5 --timeout 60 -o {}/link.json",
      PIPEBAL_BINARY, profile, dir));
  ASSERT_EQ(measured.status, 0) << measured.err;
  EXPECT_NE(measured.out.find("fit: "), std::string::npos) << measured.out;
  const nlohmann::json doc = read_json(profile);
  ASSERT_TRUE(doc.contains("link")) << doc.dump();
  // The record -o writes is the same link, as a versioned document.
  nlohmann::json record = read_json(dir + "/link.json");
  EXPECT_EQ(record["schema"], "pipebal.link/1");
  record.erase("schema");
  EXPECT_EQ(record, doc["link"]);
  EXPECT_GT(doc["link"]["bandwidth_bytes_per_ms"].get<double>(), 0);
  EXPECT_GE(doc["link"]["samples"].size(), 3u) << "64K, 16M and the layers' output sizes";
  EXPECT_EQ(doc["layers"].size(), 4u) << "the rest of the profile is kept";
  const CliResult balanced = run_pipebal("balance " + profile + " --stages 2");
  EXPECT_EQ(balanced.status, 0) << balanced.err;
  EXPECT_NE(balanced.out.find("transfers over the link measured in the profile"), std::string::npos)
      << balanced.out;

  // A message costs at least the engine's hand-off between stages, and the note says so when
  // that is more than the link's latency.
  nlohmann::json quick = doc;
  quick["link"]["latency_ms"] = 0.001;
  quick["engine"]["handoff_ms"] = 0.05;
  const std::string quick_path = profile + ".quick.json";
  std::ofstream(quick_path) << quick.dump(2);
  const CliResult noted = run_pipebal("balance " + quick_path + " --stages 2");
  EXPECT_EQ(noted.status, 0) << noted.err;
  EXPECT_NE(noted.out.find("0.001 ms latency + bytes at "), std::string::npos) << noted.out;
  EXPECT_NE(noted.out.find("(each message at least the engine's hand-off, 0.050 ms)"),
            std::string::npos)
      << noted.out;
  quick["engine"]["handoff_ms"] = 0;
  std::ofstream(quick_path) << quick.dump(2);
  const CliResult plain = run_pipebal("balance " + quick_path + " --stages 2");
  EXPECT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(plain.out.find("hand-off"), std::string::npos) << plain.out;
}

// An output that rank 0 cannot write stops the link before it measures anything.
TEST(LaunchCli, LinkRefusesAnOutputItCannotWriteBeforeMeasuring) {
  const std::string dir = scratch_dir();
  const CliResult r = run_pipebal(
      fmt::format("launch --nproc-per-node 2 --master-port 0 -- {} link --sizes 4K,64K --repeats 2 "
                  "--timeout 60 -o {}/missing/link.json",
                  PIPEBAL_BINARY, dir));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("cannot write '" + dir + "/missing/link.json'"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("fit: "), std::string::npos) << r.out;

  // -o over the --profile it writes the link into would replace the profile with the link.
  std::ofstream(dir + "/profile.json") << "{}";
  const CliResult same = run_pipebal(
      fmt::format("launch --nproc-per-node 2 --master-port 0 -- {} link --sizes 4K,64K --repeats 2 "
                  "--timeout 60 --profile {}/profile.json -o {}/profile.json",
                  PIPEBAL_BINARY, dir, dir));
  EXPECT_EQ(same.status, 2) << same.err;
  EXPECT_NE(same.err.find("is the file --profile reads"), std::string::npos) << same.err;
  EXPECT_EQ(read_text(dir + "/profile.json"), "{}");
}

// The two ranks of link must walk the same sizes, or one would wait for the other.
TEST(LaunchCli, LinkRanksGivenOtherSizesStopWithOneLine) {
  const std::string dir = scratch_dir() + "/outputs";
  std::filesystem::create_directories(dir);
  const CliResult r = run_pipebal(fmt::format(
      "launch --nproc-per-node 2 --master-port 0 -- sh -c "
      "'exec {} link --sizes 4K,$((64 + 64 * RANK))K --repeats 2 --timeout 60 -o {}/link.json'",
      PIPEBAL_BINARY, dir));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("rank 0: rank 1's list of message sizes is 4096,131072, rank 0's is "
                       "4096,65536: "
                       "every process of a run must be given the same settings"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("fit: "), std::string::npos) << r.out;
  expect_files(dir, {});
}

// validate --processes trains every candidate as one process per stage.
TEST(LaunchCli, ValidateTrainsTheCandidatesAsProcesses) {
  const std::string dir = scratch_dir() + "/v";
  const CliResult r = run_pipebal(
      "validate --model mlp:layers=4,width=32 --input-shape 16,32 "
      "--stages 2 --processes 2 --steps 2 --profile-repeat 2 -o " +
      dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("as 2 processes"), std::string::npos) << r.out;
  const nlohmann::json run = read_json(dir + "/run.json");
  EXPECT_EQ(run.at("processes").size(), 2u);
  const nlohmann::json validation = read_json(dir + "/validation.json");
  EXPECT_GT(validation.at("candidates")[0].at("measured").at("step_ms").get<double>(), 0);
  expect_files(dir, {"plan.json", "profile-batch.json", "profile.json", "report.html", "run.json",
                     "trace.json", "validation.json"});
  // The one-micro-batch baseline is priced with the pipeline's engine costs, not a second
  // measurement of them that a noise spike could set 300 times apart.
  const nlohmann::json engine = read_json(dir + "/profile.json").at("engine");
  EXPECT_GT(engine.at("step_ms").get<double>(), 0);
  EXPECT_EQ(read_json(dir + "/profile-batch.json").at("engine"), engine);

  // Interleaved: each of the 2 processes (devices) runs 2 of the 4 stages.
  const std::string interleaved = scratch_dir() + "/interleaved";
  const CliResult i = run_pipebal(
      "validate --model mlp:layers=8,width=16 --input-shape 16,16 --stages 2 --schedule "
      "interleaved --chunks 4 --processes 2 --steps 1 --profile-repeat 2 -o " +
      interleaved);
  ASSERT_EQ(i.status, 0) << i.err;
  const nlohmann::json interleaved_run = read_json(interleaved + "/run.json");
  EXPECT_EQ(interleaved_run.at("processes").size(), 2u);
  EXPECT_EQ(interleaved_run.at("stages").size(), 4u);
}

}  // namespace
}  // namespace pipebal::testing
