// `pipebal`: runs `balance`, `plan` and `report`, which need no LibTorch, in this small
// executable, so that they start at once (loading LibTorch and the libraries it pulls in takes
// about half a second); every other command line, --help and --version included, is handed as it
// is to `pipebal-torch` beside it, which replaces this process (same pid, signals and exit
// status).
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <unistd.h>

#include "pipebal/common/atomic_file.h"
#include "tools/balance_command.h"
#include "tools/command_line.h"
#include "tools/plan_command.h"
#include "tools/report_command.h"
#include "tools/value_syntax.h"

namespace {

constexpr const char* kTorchExecutable = "pipebal-torch";

bool runs_here(const std::string& command) {
  return command == "balance" || command == "plan" || command == "report";
}

// This executable's directory, links resolved; empty when the kernel does not say.
std::string own_directory() {
  std::string path(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size());
  if (n <= 0 || static_cast<size_t>(n) >= path.size()) return "";
  path.resize(static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && runs_here(argv[1])) {
    pipebal::install_interrupt_cleanup(pipebal::tools::rank_prefix().empty());
    const auto app = pipebal::tools::make_pipebal_app();
    pipebal::tools::add_balance_command(*app);
    pipebal::tools::add_plan_command(*app);
    pipebal::tools::add_report_command(*app);
    pipebal::tools::enforce_value_syntax(*app);
    return pipebal::tools::run_command_line(*app, argc, argv);
  }
  // LibTorch's OpenMP runtime reads OMP_NUM_THREADS (LibTorch MKL_NUM_THREADS too) as it loads,
  // before pipebal-torch's main: a value it cannot take would be warnings and a stack trace, then
  // a thread count of its own. (--help and --version answer whatever the environment says.)
  if (!pipebal::tools::asks_for_help(argc, argv)) {
    try {
      for (const char* name : {"OMP_NUM_THREADS", "MKL_NUM_THREADS"}) {
        pipebal::tools::check_thread_count_variable(name, std::getenv(name));
      }
    } catch (const std::invalid_argument& error) {
      pipebal::tools::print_error_line("pipebal: error: " + pipebal::tools::rank_prefix() +
                                       error.what());
      return pipebal::tools::kUserErrorStatus;
    }
  }
  const std::string directory = own_directory();
  if (directory.empty()) {
    pipebal::tools::print_error_line("pipebal: error: " + pipebal::tools::rank_prefix() +
                                     "cannot find " + kTorchExecutable +
                                     ": /proc/self/exe does not name this executable");
    return pipebal::tools::kUserErrorStatus;
  }
  const std::string torch = directory + "/" + kTorchExecutable;
  ::execv(torch.c_str(), argv);
  pipebal::tools::print_error_line(fmt::format(
      "pipebal: error: {}cannot run {} ({}), which runs every command but balance, plan and "
      "report: install it beside pipebal",
      pipebal::tools::rank_prefix(), torch, std::strerror(errno)));
  return pipebal::tools::kUserErrorStatus;
}
