// End-to-end: how `pipebal` ends on a signal (one line, its status, nothing half-written) and
// which signals it leaves as it found them.
#include <sys/wait.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "tests/tools/cli_support.h"

namespace {

// Ctrl-C: one line, status 130, and neither the output nor a temporary file left behind; a
// closed terminal (SIGHUP) the same, status 129. The signal comes once the run trains (its
// handler installed, its stages' threads up, a second later).
TEST(Cli, InterruptIsOneLineAndLeavesNothingHalfWritten) {
  struct sigaction hangup {};
  ASSERT_EQ(::sigaction(SIGHUP, nullptr, &hangup), 0);
  const bool hangup_ignored = hangup.sa_handler == SIG_IGN;  // under nohup: pipebal keeps it so
  for (const auto& [signal, status, line] :
       {std::tuple<std::string, int, std::string>{"INT", 130, "pipebal: interrupted\n"},
        {"HUP", 129, "pipebal: hung up\n"},
        {"QUIT", 131, "pipebal: quit\n"}}) {
    if (signal == "HUP" && hangup_ignored) continue;
    const std::string dir = pipebal::testing::fresh_dir(signal);
    const std::string command =
        pipebal::testing::kTerminalSignals + std::string(PIPEBAL_BINARY) +
        " train --model mlp:layers=4,width=64 --input-shape 64,64 --balance 3,2 --steps 1000000 "
        "-q -o " +
        dir + "/run.json >" + dir + "/out 2>" + dir + "/err & pid=$!; " +
        pipebal::testing::interrupt_once_training("echo $pid", 1, signal);
    const int raw = std::system(command.c_str());
    ASSERT_TRUE(WIFEXITED(raw)) << signal;
    EXPECT_EQ(WEXITSTATUS(raw), status) << signal;
    EXPECT_EQ(pipebal::testing::read_text(dir + "/err"), line);
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      const std::string name = entry.path().filename();
      EXPECT_TRUE(name == "out" || name == "err") << signal << ": " << name;
    }
  }
}

// A run a shell without job control started in its background finds SIGINT and SIGQUIT ignored,
// so that Ctrl-C stops only the foreground, and keeps them so; SIGTERM still ends it cleanly.
// The SIGINT is sent first: caught, it would have ended the run (status 130) before the SIGTERM.
TEST(Cli, ABackgroundJobKeepsSigintIgnored) {
  const std::string dir = pipebal::testing::fresh_dir("background");
  const std::string command =
      std::string(PIPEBAL_BINARY) +
      " train --model mlp:layers=4,width=64 --input-shape 64,64 --balance 3,2 --steps 1000000 "
      "-q -o " +
      dir + "/run.json >" + dir + "/out 2>" + dir + "/err & pid=$!; " +
      // Training: 3 threads or more, and SIGTERM's handler installed (signal 15: the value 4 in
      // the 4th hex digit of SigCgt from the right).
      "for i in $(seq 1200); do "
      "  threads=$(awk '/^Threads/ {print $2}' /proc/$pid/status 2>/dev/null); "
      "  caught=$(awk '/^SigCgt/ {print substr($2, 13, 1)}' /proc/$pid/status 2>/dev/null); "
      "  case \"$caught\" in [4567cdefCDEF]) [ \"${threads:-0}\" -ge 3 ] && break;; esac; "
      "  sleep 0.1; "
      "done; "
      "awk '/^SigIgn/ {print substr($2, 16)}' /proc/$pid/status > " +
      dir + "/ignored; kill -INT $pid; kill -TERM $pid; wait $pid";
  const int raw = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(raw));
  EXPECT_EQ(WEXITSTATUS(raw), 128 + SIGTERM) << pipebal::testing::read_text(dir + "/err");
  EXPECT_EQ(pipebal::testing::read_text(dir + "/err"), "pipebal: terminated\n");
  // SIGINT and SIGQUIT are ignored: signals 2 and 3, the values 2 and 4 in the mask's last hex
  // digit.
  const std::string ignored = pipebal::testing::read_text(dir + "/ignored");
  ASSERT_FALSE(ignored.empty());
  EXPECT_EQ(std::stoi(ignored.substr(0, 1), nullptr, 16) & 6, 6) << ignored;
  EXPECT_FALSE(std::filesystem::exists(dir + "/run.json"));
}

}  // namespace
