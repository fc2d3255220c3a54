// `pipebal-torch`: every pipebal command, with LibTorch. The `pipebal` executable
// (front_main.cpp) runs the commands that need no LibTorch itself and hands every other command
// line to this one.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include "pipebal/common/address_space.h"
#include "pipebal/common/atomic_file.h"
#include "pipebal/common/cores.h"
#include "pipebal/distributed/launcher.h"
#include "pipebal/distributed/peer_failure_notice.h"
#include "pipebal/distributed/remote_failure.h"
#include "pipebal/distributed/rendezvous.h"
#include "pipebal/pipeline/error_text.h"
#include "pipebal/pipeline/pipeline.h"
#include "pipebal/workflow/cpu_memory_guard.h"
#include "pipebal/workflow/denormals.h"
#include "pipebal/workflow/malloc_tuning.h"
#include "tools/balance_command.h"
#include "tools/command_line.h"
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

namespace {

using pipebal::tools::print_error_line;
using pipebal::tools::rank_prefix;

// The errors that end a run their own way.
std::optional<int> end_run(const std::exception& error) {
  if (dynamic_cast<const pipebal::pipeline::StepTimeout*>(&error) != nullptr) {
    // A layer may still be running on a stage's thread: leave without waiting for it.
    print_error_line("pipebal: error: " + rank_prefix() + error.what());
    std::_Exit(pipebal::tools::kUserErrorStatus);
  }
  if (dynamic_cast<const pipebal::distributed::RendezvousAbandoned*>(&error) != nullptr) {
    // A thread still blocks in a store call, which exit's handlers could wake it into.
    print_error_line("pipebal: error: " + rank_prefix() + error.what());
    pipebal::remove_temporaries_and_exit_now(pipebal::tools::kUserErrorStatus);
  }
  if (const auto* echo = dynamic_cast<const pipebal::distributed::PeerFailed*>(&error)) {
    // An echo of another rank's failure: the launcher reports that rank, not this one.
    print_error_line("pipebal: error: " + rank_prefix() + error.what());
    pipebal::distributed::notify_launcher_of_peer_failure(echo->failed_rank());
    return pipebal::distributed::kPeerFailedExitStatus;
  }
  return std::nullopt;
}

// std::terminate: an exception no code caught. One thrown in a thread LibTorch runs (its
// rendezvous store's connection reading what something other than a store sent) nothing of
// pipebal's can catch: one line and exit status 2, the temporary files removed, instead of an
// abort. On the main thread, or without an exception, it is a bug of pipebal's: said as one.
[[noreturn]] void end_on_uncaught_exception() {
  std::string what;
  if (const std::exception_ptr error = std::current_exception()) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      what = pipebal::pipeline::error_summary(e);
    } catch (...) {
      what = "an exception of unknown type";
    }
  }
  if (what.empty() || ::gettid() == ::getpid()) {
    print_error_line(fmt::format(
        "pipebal: internal error (a bug in pipebal; please report it with the command line): "
        "{}std::terminate: {}",
        rank_prefix(), what.empty() ? "no exception" : what));
    pipebal::remove_temporaries_and_exit_now(pipebal::tools::kInternalErrorStatus);
  }
  const std::string& store = pipebal::distributed::store_client_address();
  print_error_line(fmt::format(
      "pipebal: error: {}a background thread failed: {}{}", rank_prefix(), what,
      store.empty() ? ""
                    : fmt::format(" (connected to the rendezvous store at {}: is something other "
                                  "than the run's rank 0 listening there?)",
                                  store)));
  pipebal::remove_temporaries_and_exit_now(pipebal::tools::kUserErrorStatus);
}

}  // namespace

int main(int argc, char** argv) {
  std::set_terminate(end_on_uncaught_exception);
  pipebal::workflow::keep_freed_memory_in_process();
  pipebal::workflow::guard_cpu_allocations();
  pipebal::install_interrupt_cleanup(rank_prefix().empty());
  const auto app = pipebal::tools::make_pipebal_app();
  pipebal::tools::add_demo_command(*app);
  pipebal::tools::add_launch_command(*app);
  pipebal::tools::add_link_command(*app);
  pipebal::tools::add_models_command(*app);
  pipebal::tools::add_balance_command(*app);
  pipebal::tools::add_plan_command(*app);
  pipebal::tools::add_profile_command(*app);
  pipebal::tools::add_report_command(*app);
  pipebal::tools::add_train_command(*app);
  pipebal::tools::add_validate_command(*app);
  pipebal::tools::enforce_value_syntax(*app);
  pipebal::tools::CommandLineHooks hooks;
  // Before any thread starts (workflow/denormals.h).
  hooks.prepare = [argv] {
    pipebal::workflow::flush_denormals_unless_kept();
    // The threads that may run matrix products: LibTorch's intra-op pool, or in one process of
    // several stages a thread on every core. A launcher runs none.
    const bool launched = !rank_prefix().empty();
    if (std::string(argv[1]) != "launch") {
      pipebal::check_address_space_room(
          launched ? at::get_num_threads()
                   : std::max(at::get_num_threads(), pipebal::usable_cores()));
    }
  };
  hooks.summarize = pipebal::pipeline::error_summary;
  hooks.special = end_run;
  return pipebal::tools::run_command_line(*app, argc, argv, hooks);
}
