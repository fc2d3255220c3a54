// The `pipebal` command line. Every subcommand registers itself; errors of any kind end here
// as one line on stderr and exit status 2.
#include <algorithm>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "common/aligned_stack.h"
#include "common/atomic_file.h"
#include "common/env_flag.h"
#include "common/git_commit.h"
#include "common/parse_integers.h"
#include "distributed/group.h"
#include "distributed/launcher.h"
#include "pipeline/error_text.h"
#include "pipeline/pipeline.h"
#include "tools/balance_command.h"
#include "tools/demo_command.h"
#include "tools/error_report.h"
#include "tools/launch_command.h"
#include "tools/link_command.h"
#include "tools/models_command.h"
#include "tools/plan_command.h"
#include "tools/profile_command.h"
#include "tools/report_command.h"
#include "tools/train_command.h"
#include "tools/validate_command.h"
#include "tools/value_syntax.h"
#include "tools/version.h"
#include "workflow/denormals.h"
#include "workflow/malloc_tuning.h"

namespace {

// "rank 1: " in a process of a multi-process run, so that each line says whose it is; none
// while RANK is not a rank (reading the environment refuses it then, in one line of its own).
std::string rank_prefix() {
  const char* world = std::getenv("WORLD_SIZE");
  const char* rank = std::getenv("RANK");
  if (world == nullptr || rank == nullptr || std::string(world) == "1") return "";
  const std::optional<int64_t> value = pipebal::parse_integer(rank);
  if (!value || *value < 0) return "";
  return fmt::format("rank {}: ", *value);
}

}  // namespace

int main(int argc, char** argv) {
  pipebal::workflow::keep_freed_memory_in_process();
  pipebal::install_interrupt_cleanup(rank_prefix().empty());
  CLI::App app{
      "pipebal: profile a model, balance it into pipeline stages, train it pipelined,\n"
      "and compare the predicted speed-up with the measured one."};
  app.set_version_flag("--version", std::string("pipebal ") + pipebal::tools::kVersion + " (" +
                                        pipebal::git_commit() + ")");
  app.require_subcommand(1);
  app.footer(
      "Examples:\n"
      "  pipebal demo\n"
      "  pipebal models\n"
      "  pipebal balance profile.json --stages 4 --chunks 8 -o plan.json\n"
      "  pipebal plan profile.json --devices 4 -o plan.json\n"
      "Run `pipebal COMMAND --help` for a command's options.");
  pipebal::tools::add_demo_command(app);
  pipebal::tools::add_launch_command(app);
  pipebal::tools::add_link_command(app);
  pipebal::tools::add_models_command(app);
  pipebal::tools::add_balance_command(app);
  pipebal::tools::add_plan_command(app);
  pipebal::tools::add_profile_command(app);
  pipebal::tools::add_report_command(app);
  pipebal::tools::add_train_command(app);
  pipebal::tools::add_validate_command(app);
  pipebal::tools::enforce_value_syntax(app);

  // The first word names the command: say plainly when it names none.
  std::vector<std::string> commands;
  for (const CLI::App* sub : app.get_subcommands({})) commands.push_back(sub->get_name());
  const std::string listed = fmt::format("{}", fmt::join(commands, ", "));
  if (argc < 2) {
    pipebal::tools::print_error_line("pipebal: error: give a command (" + listed + "; see --help)");
    return 2;
  }
  if (argv[1][0] != '-' && std::find(commands.begin(), commands.end(), argv[1]) == commands.end()) {
    pipebal::tools::print_error_line("pipebal: error: unknown command '" + std::string(argv[1]) +
                                     "' (commands: " + listed + ")");
    return 2;
  }

  try {
    // Mistyped environment switches are refused before any work.
    pipebal::stack_offset();
    pipebal::env_flag(pipebal::kShmDisableVariable);
    pipebal::env_flag(pipebal::kTensorChannelVariable);
    // Before any thread starts (workflow/denormals.h).
    pipebal::workflow::flush_denormals_unless_kept();
    app.parse(argc, argv);
  } catch (const pipebal::tools::ExitStatus& exit) {
    return exit.status;
  } catch (const CLI::ParseError& error) {
    // --help and --version arrive here too, with exit code 0.
    if (error.get_exit_code() == 0) return app.exit(error);
    pipebal::tools::print_error_line(
        "pipebal: error: " + pipebal::pipeline::first_line(error.what()) + " (see --help)");
    return 2;
  } catch (const pipebal::pipeline::StepTimeout& error) {
    // A layer may still be running on a stage's thread: leave without waiting for it.
    pipebal::tools::print_error_line("pipebal: error: " + rank_prefix() + error.what());
    std::_Exit(2);
  } catch (const pipebal::distributed::PeerFailed& error) {
    // An echo of another rank's failure: the launcher reports that rank, not this one.
    pipebal::tools::print_error_line("pipebal: error: " + rank_prefix() + error.what());
    return pipebal::distributed::kPeerFailedExitStatus;
  } catch (const std::exception& error) {
    const pipebal::tools::ErrorReport report = pipebal::tools::report_error(error, rank_prefix());
    pipebal::tools::print_error_line(report.line);
    return report.status;
  }
  return 0;
}
