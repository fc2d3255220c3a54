// End-to-end: the `pipebal` binary as a user runs it, checking exit codes and messages.
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "pipebal/common/cgroups.h"
#include "pipebal/common/cores.h"
#include "pipebal/common/format_bytes.h"
#include "tests/tools/cli_support.h"

namespace {

using pipebal::testing::count_lines;
using Result = pipebal::testing::CliResult;
using pipebal::testing::run_pipebal;

TEST(Cli, HelpAndVersionSucceed) {
  const Result help = run_pipebal("--help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("demo"), std::string::npos);
  EXPECT_NE(help.out.find("Examples:"), std::string::npos);
  const Result version = run_pipebal("--version");
  EXPECT_EQ(version.status, 0);
  EXPECT_NE(version.out.find("pipebal 0."), std::string::npos);
}

TEST(Cli, EverySubcommandHasHelpWithAnExample) {
  for (const std::string command :
       {"demo", "models", "profile", "balance", "train", "validate", "report"}) {
    const Result r = run_pipebal(command + " --help");
    EXPECT_EQ(r.status, 0) << command;
    EXPECT_NE(r.out.find("Example"), std::string::npos) << command;
  }
}

// `pipebal` runs balance, plan and report itself, without LibTorch, and hands every other
// command to `pipebal-torch` beside it (tools/front_main.cpp). A copy of it alone still
// balances, plans and reports as pipebal-torch does, and for a command that needs LibTorch says
// in one line what is missing.
TEST(Cli, BalancePlanAndReportRunWithoutLibTorch) {
  const std::string dir = pipebal::testing::fresh_dir("front");
  const std::string profile = dir + "/profile.json";
  ASSERT_EQ(run_pipebal("profile --model mlp:layers=4,width=8 --input-shape 8,8 --chunks 2 "
                        "--repeat 2 -q -o " +
                        profile)
                .status,
            0);
  const std::string alone = dir + "/bin/pipebal";
  std::filesystem::create_directories(dir + "/bin");
  std::filesystem::copy_file(PIPEBAL_BINARY, alone);
  const Result libraries = pipebal::testing::run_executable("ldd", alone);
  ASSERT_EQ(libraries.status, 0) << libraries.err;
  EXPECT_EQ(libraries.out.find("libtorch"), std::string::npos) << libraries.out;
  EXPECT_EQ(libraries.out.find("libc10"), std::string::npos) << libraries.out;

  for (const std::string& args : {"balance " + profile + " --stages 2 --chunks 2",
                                  "plan " + profile + " --devices 2 -o " + dir + "/plan.json"}) {
    const Result whole = pipebal::testing::run_executable(PIPEBAL_TORCH_BINARY, args);
    ASSERT_EQ(whole.status, 0) << args << ": " << whole.err;
    const Result front = pipebal::testing::run_executable(alone, args);
    EXPECT_EQ(front.status, 0) << args << ": " << front.err;
    EXPECT_EQ(front.out, whole.out) << args;
  }
  ASSERT_EQ(pipebal::testing::run_executable(PIPEBAL_TORCH_BINARY,
                                             "report " + dir + " -o " + dir + "/whole.html")
                .status,
            0);
  const Result report =
      pipebal::testing::run_executable(alone, "report " + dir + " -o " + dir + "/front.html");
  EXPECT_EQ(report.status, 0) << report.err;
  const std::string page = pipebal::testing::read_text(dir + "/front.html");
  EXPECT_NE(page.find("<html"), std::string::npos);
  EXPECT_EQ(page, pipebal::testing::read_text(dir + "/whole.html"));
  // Bad input is refused there as everywhere: one line, exit status 2.
  const Result bad = pipebal::testing::run_executable(alone, "balance " + profile + " --stages 9");
  EXPECT_EQ(bad.status, 2);
  EXPECT_EQ(count_lines(bad.err), 1) << bad.err;

  const Result train = pipebal::testing::run_executable(alone, "train --model mlp --steps 1");
  EXPECT_EQ(train.status, 2);
  EXPECT_EQ(count_lines(train.err), 1) << train.err;
  EXPECT_NE(train.err.find(dir + "/bin/pipebal-torch"), std::string::npos) << train.err;
}

// What a command prints must arrive: on a full disk the command fails with one line.
TEST(Cli, OutputThatCannotBeWrittenIsAnError) {
  const std::string profile = PIPEBAL_FIXTURES_DIR "/../../reports/examples/demo/profile.json";
  for (const std::string& args :
       {"balance " + profile + " --stages 2", std::string("models"), std::string("--version")}) {
    const std::string err = pipebal::testing::scratch_path("err");
    const int raw =
        std::system((std::string(PIPEBAL_BINARY) + " " + args + " >/dev/full 2>" + err).c_str());
    ASSERT_TRUE(WIFEXITED(raw)) << args;
    EXPECT_EQ(WEXITSTATUS(raw), 2) << args;
    EXPECT_EQ(pipebal::testing::read_text(err),
              "pipebal: error: cannot write to standard output (No space left on device)\n")
        << args;
  }
  // A closed standard output, the same.
  const std::string err = pipebal::testing::scratch_path("err");
  const int raw = std::system(
      (std::string(PIPEBAL_BINARY) + " balance " + profile + " --stages 2 >&- 2>" + err).c_str());
  ASSERT_TRUE(WIFEXITED(raw));
  EXPECT_EQ(WEXITSTATUS(raw), 2);
  EXPECT_EQ(pipebal::testing::read_text(err),
            "pipebal: error: cannot write to standard output (Bad file descriptor)\n");
}

// A pipe whose reader is gone (`pipebal profile ... | head -1`) is the same: one line, not a
// silent death by SIGPIPE; the profile the command wrote before it printed stays whole.
TEST(Cli, AClosedPipeIsAnErrorNotASilentDeath) {
  const std::string dir = pipebal::testing::scratch_dir();
  const std::string profile = PIPEBAL_FIXTURES_DIR "/../../reports/examples/demo/profile.json";
  for (const std::string& args :
       {"balance " + profile + " --stages 2",
        "profile --model mlp:layers=2,width=8 --input-shape 4,8 --chunks 1 --repeat 3 -q -o " +
            dir + "/profile.json"}) {
    int ends[2];
    ASSERT_EQ(::pipe(ends), 0);
    ::close(ends[0]);  // no reader: the first write fails
    const int raw =
        std::system(fmt::format("{} {} >&{} 2>{}/err", PIPEBAL_BINARY, args, ends[1], dir).c_str());
    ::close(ends[1]);
    ASSERT_TRUE(WIFEXITED(raw)) << args << ": killed by signal " << WTERMSIG(raw);
    EXPECT_EQ(WEXITSTATUS(raw), 2) << args;
    const std::string err = pipebal::testing::read_text(dir + "/err");
    EXPECT_NE(err.find("pipebal: error: cannot write to standard output (Broken pipe)\n"),
              std::string::npos)
        << args << ": " << err;
    EXPECT_EQ(count_lines(err), err.find("warning") == std::string::npos ? 1 : 2) << err;
  }
  EXPECT_NO_THROW(nlohmann::json::parse(pipebal::testing::read_text(dir + "/profile.json")));
}

// An output past the file size limit (ulimit -f) fails its write in one line and leaves no
// temporary file, rather than SIGXFSZ ending the process with the file half-written.
TEST(Cli, TheFileSizeLimitIsOneLineAndLeavesNoFile) {
  const std::string dir = pipebal::testing::scratch_path("outputs");
  std::filesystem::create_directories(dir);
  const std::string profile = PIPEBAL_FIXTURES_DIR "/../../reports/examples/demo/profile.json";
  for (const std::string& args :
       {"balance " + profile + " --stages 2 -o " + dir + "/plan.json",
        "profile --model mlp:layers=2,width=8 --input-shape 4,8 --chunks 1 --repeat 3 -q -o " +
            dir + "/profile.json"}) {
    // The limit holds for the files the command writes (512 bytes), not for /dev/null.
    const Result r = pipebal::testing::run_shell(
        fmt::format("ulimit -f 1 && {} {} >/dev/null", PIPEBAL_BINARY, args));
    EXPECT_EQ(r.status, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find("': File too large\n"), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_TRUE(std::filesystem::is_empty(dir)) << args;
  }
}

TEST(Cli, ModelsListsTheZooWithDefaults) {
  const Result r = run_pipebal("models");
  EXPECT_EQ(r.status, 0);
  for (const std::string name : {"mlp", "resnet", "unet", "amoebanetd", "gpt"}) {
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
  }
  EXPECT_NE(r.out.find("depth"), std::string::npos);
}

TEST(Cli, DemoRunsTheWholeLoopOnASmallModel) {
  const std::string dir = pipebal::testing::fresh_dir("demo");
  const Result r = run_pipebal(
      "demo --model mlp:layers=4,width=8 --input-shape 8,8 --chunks 2 "
      "--steps 2 -o " +
      dir);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("fc1"), std::string::npos);      // the layer table
  EXPECT_NE(r.out.find("[8, 10]"), std::string::npos);  // the head's output shape
  EXPECT_NE(r.out.find("predicted"), std::string::npos);
  for (const std::string file :
       {"profile.json", "plan.json", "run.json", "trace.json", "validation.json", "report.html"}) {
    EXPECT_FALSE(pipebal::testing::read_text(dir + "/" + file).empty()) << file;
  }
}

// Every command flushes subnormal floats to zero (workflow/denormals.h) unless
// PIPEBAL_KEEP_DENORMALS asks to keep them; the profile records which.
TEST(Cli, FlushesDenormalsUnlessAskedToKeepThem) {
  const std::string dir = pipebal::testing::fresh_dir("denormals");
  const auto profile_flushes = [&dir]() {
    const Result r = run_pipebal(
        "profile --model mlp:layers=2,width=8 --input-shape 4,8 "
        "--warmup 0 --repeat 1 -q -o " +
        dir + "/profile.json");
    EXPECT_EQ(r.status, 0) << r.err;
    return nlohmann::json::parse(pipebal::testing::read_text(dir + "/profile.json"))
        .at("environment")
        .at("flushes_denormals")
        .get<bool>();
  };
  EXPECT_TRUE(profile_flushes());
  setenv("PIPEBAL_KEEP_DENORMALS", "1", 1);
  EXPECT_FALSE(profile_flushes());
  unsetenv("PIPEBAL_KEEP_DENORMALS");
}

// Processes that keep the machine's cores busy while they live.
class BusyLoops {
 public:
  explicit BusyLoops(int count) {
    for (int i = 0; i < count; ++i) {
      const pid_t pid = fork();
      if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);  // not outliving a test that crashed
        for (volatile unsigned long n = 0;; n = n + 1) {
        }
      }
      if (pid > 0) pids_.push_back(pid);
    }
  }
  ~BusyLoops() {
    for (pid_t pid : pids_) kill(pid, SIGKILL);
    for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
  }
  BusyLoops(const BusyLoops&) = delete;
  BusyLoops& operator=(const BusyLoops&) = delete;

 private:
  std::vector<pid_t> pids_;
};

// A profile taken, or a run trained, while other processes kept the machine busy says so, and
// records how busy (common/machine_load.h): its times fit that machine, not the idle one.
// (Whether an idle machine gets no warning depends on what else runs beside the test:
// tests/common/machine_load_test.cpp checks the rule on given loads.)
TEST(Cli, AProfileOrARunOnABusyMachineSaysSo) {
  // More than the profile leaves of 2 cores, and a tenth of a larger machine's more than the 5%
  // that counts as busy there.
  const int kBusyLoops =
      std::max(3, static_cast<int>(std::thread::hardware_concurrency() / 10) + 2);
  const std::string dir = pipebal::testing::fresh_dir("busy");
  Result r;
  {
    const BusyLoops loops(kBusyLoops);
    r = run_pipebal(
        "profile --model mlp:layers=16,width=64 --input-shape 256,64 --threads 1 -q -o " + dir +
        "/profile.json");
  }
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.busy_warnings.rfind(
                "pipebal: warning: the machine was busy while profiling: other processes took ", 0),
            0u)
      << r.busy_warnings;
  EXPECT_EQ(count_lines(r.busy_warnings), 1) << r.busy_warnings;
  EXPECT_EQ(r.err, "");
  const nlohmann::json load =
      nlohmann::json::parse(pipebal::testing::read_text(dir + "/profile.json"))
          .at("environment")
          .at("machine_load");
  EXPECT_GE(load.at("others_cores").get<double>(), 0.5) << load.dump();
  EXPECT_GT(load.at("seconds").get<double>(), 0) << load.dump();
  EXPECT_EQ(load.at("cores").get<int>(), static_cast<int>(pipebal::allowed_cpus().size()));

  // A run too: the measured steps fit that machine, not the plan's prediction.
  {
    const BusyLoops loops(kBusyLoops);
    r = run_pipebal(
        "train --model mlp:layers=16,width=64 --input-shape 256,64 --balance 9,8 --steps 20 -q "
        "-o " +
        dir + "/run.json");
  }
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.busy_warnings.rfind(
                "pipebal: warning: the machine was busy while training: other processes took ", 0),
            0u)
      << r.busy_warnings;
  EXPECT_EQ(r.err, "");
  const nlohmann::json run_load =
      nlohmann::json::parse(pipebal::testing::read_text(dir + "/run.json"))
          .at("environment")
          .at("machine_load");
  EXPECT_GE(run_load.at("others_cores").get<double>(), 0.5) << run_load.dump();

  // And a run of several processes, whose rank 0 tells the run's ranks from the others.
  {
    const BusyLoops loops(kBusyLoops);
    r = run_pipebal(fmt::format(
        "launch --nproc-per-node 2 --master-port 0 -- {} train --model mlp:layers=16,width=64 "
        "--input-shape 256,64 --balance 9,8 --steps 20 -q -o {}/ranks.json",
        PIPEBAL_BINARY, dir));
  }
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.busy_warnings.rfind("pipebal: warning: rank 0: the machine was busy while training: "
                                  "other processes took ",
                                  0),
            0u)
      << r.busy_warnings;
  const nlohmann::json ranks_load =
      nlohmann::json::parse(pipebal::testing::read_text(dir + "/ranks.json"))
          .at("environment")
          .at("machine_load");
  EXPECT_GE(ranks_load.at("others_cores").get<double>(), 0.5) << ranks_load.dump();
}

// A process pinned to some cores (taskset, a batch system's cpuset) counts those: more intra-op
// threads than it may run on are refused, as on a machine of that many cores.
TEST(Cli, ThreadsAreCheckedAgainstTheCoresItMayRunOn) {
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  if (CPU_COUNT(&all) < 2) GTEST_SKIP() << "one core already";
  struct Unpin {  // the other tests of this binary run on every core again, whatever fails here
    cpu_set_t all;
    ~Unpin() { sched_setaffinity(0, sizeof(all), &all); }
  } unpin{all};
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(pipebal::allowed_cpus().front(), &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);  // the commands below inherit it
  const std::string model = "--model mlp:layers=2,width=8 --input-shape 4,8 ";
  Result r = run_pipebal("train " + model + "--balance 2,1 --threads 2 --steps 1 -q");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err,
            "pipebal: error: threads per stage must be between 1 and the 1 core pipebal may run "
            "on, got 2\n");
  r = run_pipebal("profile " + model + "--threads 2 -q");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err,
            "pipebal: error: --threads must be between 0 (LibTorch's default) and the 1 core "
            "pipebal may run on, got 2\n");
  r = run_pipebal("train " + model + "--balance 2,1 --threads 1 --steps 1 -q");
  EXPECT_EQ(r.status, 0) << r.err;
}

// A control group of its own with a limit, as a container or a systemd slice has; dir() is empty
// where this machine lets the test make none (not root, a read-only cgroup file system, cgroup v2
// without the controller). The one thing these tests make outside their scratch directories:
// kernel state named by the test's process, removed when gone (the commands in it have ended).
class CgroupWithLimit {
 public:
  using Files = std::vector<std::pair<std::string, std::string>>;  // name, what to write
  // In v1's hierarchy of `controller` ("cpu", "memory") with `v1` written, else in v2's with `v2`.
  CgroupWithLimit(const std::string& controller, const Files& v1, const Files& v2) {
    const std::string name = "/pipebal-test-" + std::to_string(getpid());
    const auto made = [this](const std::string& dir, const Files& files) {
      if (mkdir(dir.c_str(), 0755) != 0) return;
      for (const auto& [file, text] : files) {
        std::ofstream out(dir + "/" + file);
        if (!std::filesystem::exists(dir + "/" + file) || !(out << text << std::flush)) {
          rmdir(dir.c_str());
          return;
        }
      }
      dir_ = dir;
    };
    const std::string v1_root = "/sys/fs/cgroup/" + controller;
    if (std::filesystem::exists(v1_root + "/" + v1.front().first)) {
      made(v1_root + name, v1);
    } else if (std::filesystem::exists("/sys/fs/cgroup/cgroup.controllers")) {
      made("/sys/fs/cgroup" + name, v2);
    }
  }
  ~CgroupWithLimit() {
    if (!dir_.empty()) rmdir(dir_.c_str());
  }
  CgroupWithLimit(const CgroupWithLimit&) = delete;
  CgroupWithLimit& operator=(const CgroupWithLimit&) = delete;
  const std::string& dir() const { return dir_; }

  // Runs pipebal with `args` in this cgroup.
  Result run(const std::string& args) const {
    return pipebal::testing::run_executable(
        "sh",
        "-c 'echo $$ > " + dir_ + "/cgroup.procs && exec " + PIPEBAL_BINARY + " " + args + "'");
  }

 private:
  std::string dir_;
};

// In a container limited to fewer cores than the machine's (docker --cpus, a pod's CPU limit),
// the quota counts: more intra-op threads than it gives are refused, and what a run measured
// says how often the quota held it back.
TEST(Cli, ThreadsAreCheckedAgainstItsControlGroupsCpuQuota) {
  if (pipebal::allowed_cpus().size() < 2) GTEST_SKIP() << "one core already";
  const std::string quota = std::to_string(50000);  // half a core, of 100 ms periods
  const CgroupWithLimit cgroup("cpu",
                               {{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", quota}},
                               {{"cpu.max", quota + " 100000"}});
  if (cgroup.dir().empty()) GTEST_SKIP() << "this machine lets the test make no cgroup";
  const std::string model = "--model mlp:layers=2,width=8 --input-shape 4,8 ";
  Result r = cgroup.run("train " + model + "--balance 2,1 --threads 2 --steps 1 -q");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err,
            "pipebal: error: threads per stage must be between 1 and the 1 core that pipebal's "
            "CPU quota of 0.50 cores lets it run on, got 2\n");
  // The run records the quota and how often it held the run back: two stages busy on half a
  // core are held back in most periods they run in.
  const std::string run = pipebal::testing::scratch_dir() + "/run.json";
  r = cgroup.run(
      "train --model mlp:layers=16,width=64 --input-shape 256,64 --balance 9,8 "
      "--steps 20 -q -o " +
      run);
  EXPECT_EQ(r.status, 0) << r.err;
  const nlohmann::json load =
      nlohmann::json::parse(pipebal::testing::read_text(run)).at("environment").at("machine_load");
  EXPECT_EQ(load.at("quota_cores").get<double>(), 0.5) << load.dump();
  EXPECT_GT(load.at("throttled").get<double>(), 0) << load.dump();
  if (load.at("throttled").get<double>() >= 0.1) {
    EXPECT_NE(r.err.find("pipebal: warning: pipebal's CPU quota of 0.50 cores held it back in "),
              std::string::npos)
        << r.err;
  }
}

// In a container of less memory than the machine's (docker --memory, a pod's limit), an input
// larger than the limit is refused in one line, not filled until the kernel kills the process.
TEST(Cli, AnInputLargerThanItsControlGroupsMemoryLimitIsOneLine) {
  const std::string limit = std::to_string(1 << 30);  // LibTorch itself takes ~200 MiB
  const CgroupWithLimit cgroup("memory", {{"memory.limit_in_bytes", limit}},
                               {{"memory.max", limit}});
  if (cgroup.dir().empty()) GTEST_SKIP() << "this machine lets the test make no cgroup";
  // 2 GiB of float32, far less than any machine that runs these tests has.
  const Result r = cgroup.run(
      "train --model mlp:layers=2,width=8 --input-shape 67108864,8 --balance 2,1 --steps 1 -q");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(r.err,
            "pipebal: error: input float32[67108864,8] needs 2.00 GiB, more than the memory "
            "pipebal's control group may use (1.00 GiB)\n");
}

// Autograd's stack alignment (common/aligned_stack.h): the profile records the offset in force;
// `off` records none, and a value that is no offset is one line and status 2 before any work.
TEST(Cli, StackOffsetIsRecordedAndAMistypedOneRefused) {
  const std::string dir = pipebal::testing::fresh_dir("stack-offset");
  const std::string profile =
      "profile --model mlp:layers=2,width=8 --input-shape 4,8 --warmup 0 --repeat 1 -q -o " + dir +
      "/profile.json";
  const auto recorded = [&dir]() {
    return nlohmann::json::parse(pipebal::testing::read_text(dir + "/profile.json"))
        .at("environment")
        .at("stack_offset");
  };
  setenv("PIPEBAL_STACK_OFFSET", "32", 1);
  Result r = run_pipebal(profile);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(recorded(), 32);
  setenv("PIPEBAL_STACK_OFFSET", "off", 1);
  r = run_pipebal(profile);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(recorded().is_null());
  setenv("PIPEBAL_STACK_OFFSET", "20", 1);
  r = run_pipebal("profile --model mlp:layers=2,width=8 --input-shape 4,8 -q -o " + dir +
                  "/refused.json");
  unsetenv("PIPEBAL_STACK_OFFSET");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("PIPEBAL_STACK_OFFSET='20'"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/refused.json"));
}

// A layer that never returns (in training mode only, so the checks on the sample pass): the run
// ends at --timeout with one line naming the stage and action still running.
TEST(Cli, TimeoutEndsARunWhoseLayerNeverReturns) {
  const std::string model = " --model " PIPEBAL_FIXTURES_DIR
                            "/hang_when_training_scripted.pt --input-shape 4,8 --chunks 2 "
                            "--timeout 2 --steps 1 --warmup-steps 0";
  const Result train = run_pipebal("train --balance 1,1,1" + model);
  EXPECT_EQ(train.status, 2) << train.err;
  EXPECT_EQ(count_lines(train.err), 1) << train.err;
  EXPECT_NE(train.err.find("longer than 2 s (--timeout); still running: "), std::string::npos)
      << train.err;
  EXPECT_NE(train.err.find("stage 1 (forward of micro-batch 0)"), std::string::npos) << train.err;
  // validate hangs first in its profile: the same option bounds it there.
  const std::string dir = pipebal::testing::scratch_path("v");
  const Result validate = run_pipebal("validate --stages 3 -o " + dir + model);
  EXPECT_EQ(validate.status, 2) << validate.err;
  EXPECT_EQ(count_lines(validate.err), 1) << validate.err;
  EXPECT_NE(validate.err.find("pipebal: error: no progress for 2 s (--timeout) while profiling"),
            std::string::npos)
      << validate.err;
  EXPECT_FALSE(std::filesystem::exists(dir)) << "nothing half-written in place";
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(dir).parent_path())) {
    EXPECT_NE(entry.path().filename().string().rfind("v.tmp.", 0), 0u)
        << "the staging directory is left behind: " << entry.path();
  }
  // profile alone too.
  const std::string profile_out = pipebal::testing::scratch_path("p.json");
  const Result profile = run_pipebal("profile --model " PIPEBAL_FIXTURES_DIR
                                     "/hang_when_training_scripted.pt --input-shape 4,8 "
                                     "--timeout 2 -q -o " +
                                     profile_out);
  EXPECT_EQ(profile.status, 2) << profile.err;
  EXPECT_EQ(count_lines(profile.err), 1) << profile.err;
  EXPECT_NE(profile.err.find("pipebal: error: no progress for 2 s (--timeout) while profiling ("),
            std::string::npos)
      << profile.err;
  EXPECT_FALSE(std::filesystem::exists(profile_out));
}

// A model that asks for more memory than the machine has ends at once, in one line: jemalloc would
// hand the memory out (MAP_NORESERVE) and let the process grow until the kernel killed it. Two
// tensors, never written, of 0.6 x (memory + swap) each: the second is refused.
TEST(Cli, AModelThatAllocatesPastMemoryEndsAtOnceInOneLine) {
#ifndef PIPEBAL_WITH_JEMALLOC
  GTEST_SKIP() << "pipebal allocates with glibc here: the kernel itself refuses what cannot fit";
#endif
  if (std::ifstream("/proc/sys/vm/overcommit_memory").get() == '2') {
    GTEST_SKIP() << "the kernel overcommits nothing here: it refuses the first tensor itself";
  }
  const double most = pipebal::usable_memory_bytes() + pipebal::swap_bytes();
  ASSERT_GT(most, 0);
  const auto mib = static_cast<int64_t>(0.6 * most / (1 << 20));
  const std::string out = pipebal::testing::scratch_path("p.json");
  const Result profile = run_pipebal(fmt::format(
      "profile --model {}/allocates_by_width_scripted.pt --input-shape 1,{} --chunks 1 -q -o {}",
      PIPEBAL_FIXTURES_DIR, mib, out));
  EXPECT_EQ(profile.status, 2) << profile.err;
  EXPECT_EQ(count_lines(profile.err), 1) << profile.err;
  EXPECT_NE(profile.err.find("layer 1 ('1', AllocatesByWidth) ran out of memory: "),
            std::string::npos)
      << profile.err;
  EXPECT_NE(profile.err.find("cannot allocate " +
                             pipebal::format_bytes(static_cast<double>(mib) * (1 << 20)) +
                             " for a tensor: with the "),
            std::string::npos)
      << profile.err;
  EXPECT_NE(profile.err.find(" this process holds already, more than "), std::string::npos)
      << profile.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
