// End-to-end: the `pipebal` binary as a user runs it, checking exit codes and messages.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace {

struct Result {
  int status = -1;
  std::string out;
  std::string err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Result run_pipebal(const std::string& args) {
  const std::string dir = ::testing::TempDir();
  const std::string out = dir + "/pipebal.out", err = dir + "/pipebal.err";
  const std::string command = std::string(PIPEBAL_BINARY) + " " + args + " >" + out + " 2>" + err;
  const int raw = std::system(command.c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(out), slurp(err)};
}

int count_lines(const std::string& text) {
  int lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

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
  for (const std::string command : {"demo", "models", "balance"}) {
    const Result r = run_pipebal(command + " --help");
    EXPECT_EQ(r.status, 0) << command;
    EXPECT_NE(r.out.find("Example"), std::string::npos) << command;
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

TEST(Cli, DemoRunsASmallModelAndPrintsTheLayerTable) {
  const Result r = run_pipebal("demo --model mlp:layers=2,width=8 --input-shape 4,8");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("fc1"), std::string::npos);
  EXPECT_NE(r.out.find("[4, 10]"), std::string::npos);
}

TEST(Cli, BadInputIsOneLineAndExitStatusTwo) {
  for (const std::string args : {"demo --model nosuchmodel", "demo --model mlp:width=x",
                                 "demo --model mlp:layers=2,width=8 --input-shape 4,9",
                                 "demo --model /missing/model.pt", "nosuchcommand", ""}) {
    const Result r = run_pipebal(args);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_EQ(count_lines(r.err), 1) << args << ": " << r.err;
    EXPECT_EQ(r.err.rfind("pipebal: error: ", 0), 0u) << r.err;
  }
}

}  // namespace
