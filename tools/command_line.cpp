// See command_line.h.
#include "tools/command_line.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <optional>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipebal/common/aligned_stack.h"
#include "pipebal/common/cores.h"
#include "pipebal/common/env_flag.h"
#include "pipebal/common/error_text.h"
#include "pipebal/common/git_commit.h"
#include "pipebal/common/parse_integers.h"
#include "tools/value_syntax.h"
#include "tools/version.h"

namespace pipebal::tools {

std::string rank_prefix() {
  const char* world = std::getenv("WORLD_SIZE");
  const char* rank = std::getenv("RANK");
  if (world == nullptr || rank == nullptr || std::string(world) == "1") return "";
  const std::optional<int64_t> value = parse_integer(rank);
  if (!value || *value < 0) return "";
  return fmt::format("rank {}: ", *value);
}

std::string warning_prefix() {
  return "pipebal: warning: " + rank_prefix();
}

std::string files_in(const std::string& directory, const std::vector<std::string>& names) {
  std::string prefix = directory;
  while (prefix.size() > 1 && prefix.back() == '/') prefix.pop_back();
  if (prefix != "/") prefix += '/';
  return printable(prefix + fmt::format("{}", fmt::join(names, ", ")));
}

void check_not_a_rank(const std::string& command) {
  const char* world = std::getenv("WORLD_SIZE");
  if (world == nullptr || std::getenv("RANK") == nullptr) return;
  const std::optional<int64_t> size = parse_integer(world);
  if (!size || *size <= 1) return;
  throw std::invalid_argument(fmt::format(
      "{} runs as one process, not as one of WORLD_SIZE={} ranks: start it without a launcher, "
      "or unset RANK and WORLD_SIZE (`train` and `link` run as ranks; `validate --processes N` "
      "starts its own)",
      command, *size));
}

bool asks_for_help(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") return false;
    if (word == "-h" || word == "--help" || word == "--version") return true;
  }
  return false;
}

void check_thread_count_variable(const char* name, const char* value) {
  if (value == nullptr) return;
  const std::string text = value;
  bool valid = true;
  bool first = true;
  for (size_t start = 0; valid && start <= text.size(); first = false) {
    const size_t end = std::min(text.find(',', start), text.size());
    std::string item = text.substr(start, end - start);
    // Blanks around an item, a CRLF file's carriage return among them, as libgomp skips them.
    constexpr const char* kBlanks = " \t\n\v\f\r";
    item.erase(0, item.find_first_not_of(kBlanks));
    item.erase(item.find_last_not_of(kBlanks) + 1);
    // LibTorch reads the first item as an int; libgomp takes any positive count after it.
    const std::optional<int64_t> count = parse_integer(item);
    valid = count && *count >= 1 && (!first || *count <= std::numeric_limits<int>::max());
    start = end + 1;
  }
  if (!valid) {
    throw std::invalid_argument(fmt::format(
        "{}='{}' is not a number of threads: give a positive integer, e.g. {}=4, or unset it", name,
        text, name));
  }
}

std::unique_ptr<CLI::App> make_pipebal_app() {
  auto app = std::make_unique<CLI::App>(
      "pipebal: profile a model, balance it into pipeline stages, train it pipelined,\n"
      "and compare the predicted speed-up with the measured one.");
  app->set_version_flag("--version",
                        std::string("pipebal ") + kVersion + " (" + git_commit() + ")");
  app->require_subcommand(1);
  app->footer(
      "Examples:\n"
      "  pipebal demo\n"
      "  pipebal models\n"
      "  pipebal balance profile.json --stages 4 --chunks 8 -o plan.json\n"
      "  pipebal plan profile.json --devices 4 -o plan.json\n"
      "Run `pipebal COMMAND --help` for a command's options.");
  return app;
}

namespace {

// Why a write to standard output that failed earlier in the command did, as far as can be told
// now: errno has moved on since (a file written after, say).
int earlier_stdout_failure() {
  if (::fcntl(STDOUT_FILENO, F_GETFD) < 0) return EBADF;
  pollfd out{STDOUT_FILENO, POLLOUT, 0};
  // A pipe (or socket) whose reader is gone: `pipebal profile ... | head -1`.
  if (::poll(&out, 1, 0) == 1 && (out.revents & POLLERR) != 0) return EPIPE;
  // Else errno, if nothing since has changed it to a cause no write has (a file not found).
  const int last = errno;
  for (const int cause : {ENOSPC, EDQUOT, EFBIG, EIO, EPIPE}) {
    if (last == cause) return cause;
  }
  return 0;
}

// `status`, unless what the command printed did not arrive: a full disk, a closed stdout or a
// pipe closed by its reader is an error, not success (the files the command wrote stay).
int output_arrived(int status) {
  if (status != 0) return status;
  // errno tells the cause of a failure only right after it: an earlier one's is gone.
  const bool failed_before = !std::cout;
  int cause = failed_before ? earlier_stdout_failure() : 0;
  if (!failed_before) {
    errno = 0;
    std::cout.flush();
    cause = errno;
  }
  if (std::cout && std::fflush(stdout) == 0 && !std::ferror(stdout)) return status;
  if (cause == 0 && !failed_before) cause = errno;  // the fflush's
  print_error_line("pipebal: error: " + rank_prefix() + "cannot write to standard output (" +
                   (cause != 0 ? std::strerror(cause) : "the write failed") + ")");
  return kUserErrorStatus;
}

// CLI11's words, except for a whole number that passed the syntax check but does not fit the
// option's type ("Could not convert: --steps = 99999999999").
std::string parse_error_text(const CLI::ParseError& error) {
  const std::string text = first_line(error.what());
  // An option of one value given more than once (CLI11: "--steps: At Most 1 required but
  // received 2").
  const std::string once = ": At Most 1 required but received ";
  const size_t repeated = text.find(once);
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) != nullptr &&
      repeated != std::string::npos) {
    return fmt::format("{} given {} times: give it once", text.substr(0, repeated),
                       text.substr(repeated + once.size()));
  }
  const std::string prefix = "Could not convert: ";
  const size_t equals = text.find(" = ");
  if (dynamic_cast<const CLI::ConversionError*>(&error) == nullptr || text.rfind(prefix, 0) != 0 ||
      equals == std::string::npos) {
    return text;
  }
  const std::string name = text.substr(prefix.size(), equals - prefix.size());
  const std::string value = text.substr(equals + 3);
  return fmt::format("{} {}: too {} for this option", name, value,
                     value.rfind('-', 0) == 0 ? "small" : "large");
}

// How many single-character edits turn `a` into `b` (Levenshtein).
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// For an option the command does not have: "train has no option --stages: ...", with the
// command's option it most likely meant (a typo of two characters or fewer, in a name of five or
// more, of an option not given already), or what to give instead where pipebal knows. With
// `missing_required`, only when the option meant is a required one not given (the typo is why
// it is missing). Empty when no `--name` word of the command line is unknown, or none fits:
// CLI11's words then stand.
std::string unknown_option_text(const CLI::App& app, int argc, char** argv, bool missing_required) {
  const auto parsed = app.get_subcommands();
  if (parsed.empty()) return "";
  const CLI::App& command = *parsed.front();
  for (int i = 2; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") break;  // a launched command's words
    if (word.rfind("--", 0) != 0) continue;
    const std::string name = word.substr(0, word.find('='));
    if (name.size() < 3) continue;
    if (command.get_option_no_throw(name) != nullptr || app.get_option_no_throw(name) != nullptr) {
      continue;
    }
    std::string text = fmt::format("{} has no option {}", command.get_name(), name);
    if (!missing_required && command.get_name() == "train" && name == "--stages") {
      return text + ": --balance (e.g. 3,2) or --plan says where to cut (`pipebal plan`, or " +
             "`pipebal balance PROFILE --stages N -o plan.json`, makes a plan)";
    }
    std::string closest;
    const CLI::Option* meant = nullptr;
    size_t closest_distance = 3;  // more edits than this is another word
    for (const CLI::Option* option : command.get_options()) {
      if (option->count() > 0) continue;  // given already: not what this word meant
      for (const std::string& long_name : option->get_lnames()) {
        const size_t distance = edit_distance(name.substr(2), long_name);
        if (long_name.size() >= 5 && distance < closest_distance) {
          closest = "--" + long_name;
          meant = option;
          closest_distance = distance;
        }
      }
    }
    if (missing_required && (meant == nullptr || !meant->get_required())) return "";
    if (!closest.empty()) return text + fmt::format("; did you mean {}?", closest);
    // launch's command words given without `--` before them: the option is the command's.
    const CLI::Option* launched = command.get_option_no_throw("command");
    if (command.get_name() == "launch" && launched != nullptr && launched->count() > 0) {
      return text +
             ": give the command to run after --, e.g. pipebal launch --nproc-per-node 2 "
             "-- pipebal train --balance 3,2";
    }
    return text;
  }
  return "";
}

// launch's command may come without `--` where none of its words is an option (`launch
// --nproc-per-node 2 true`). CLI11 reads an option among them as the launcher's: an unknown one is
// refused (unknown_option_text then says to give the command after --), but one of the
// launcher's own was taken silently (`launch --nproc-per-node 2 echo --grace 3` ran a bare echo).
// Such a word is refused too.
void check_launch_options_before_command(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "launch") != 0) return;
  const CLI::App* launch = nullptr;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == "launch") launch = sub;
  }
  if (launch == nullptr) return;
  std::string first_word;  // of the command, once seen
  for (int i = 2; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") return;
    const bool option_like = word.size() > 1 && word[0] == '-';
    const std::string name = word.substr(0, word.find('='));
    const CLI::Option* option = option_like ? launch->get_option_no_throw(name) : nullptr;
    if (first_word.empty()) {
      if (!option_like) {
        first_word = word;
      } else if (option != nullptr && option->get_type_size() != 0 && name == word) {
        ++i;  // its value
      }
      continue;
    }
    if (option != nullptr) {
      throw std::invalid_argument(fmt::format(
          "launch's {} comes after the command's first word '{}', where it is the command's: "
          "give launch's options before the command, and the command after --, e.g. pipebal "
          "launch --nproc-per-node 2 -- pipebal train --balance 3,2",
          name, first_word));
    }
  }
}

}  // namespace

int run_command_line(CLI::App& app, int argc, char** argv, const CommandLineHooks& hooks) {
  remember_startup_cores();  // before any thread binds itself to one (common/cores.h)
  // The first word names the command: say plainly when it names none.
  std::vector<std::string> commands;
  for (const CLI::App* sub : app.get_subcommands({})) commands.push_back(sub->get_name());
  const std::string listed = fmt::format("{}", fmt::join(commands, ", "));
  if (argc < 2) {
    print_error_line("pipebal: error: give a command (" + listed + "; see --help)");
    return kUserErrorStatus;
  }
  if (argv[1][0] != '-' && std::find(commands.begin(), commands.end(), argv[1]) == commands.end()) {
    print_error_line("pipebal: error: unknown command '" + std::string(argv[1]) +
                     "' (commands: " + listed + ")");
    return kUserErrorStatus;
  }
  try {
    // Mistyped environment switches are refused before any work; --help and --version answer
    // whatever the environment says.
    if (!asks_for_help(argc, argv)) {
      stack_offset();
      env_flag(kShmDisableVariable);
      env_flag(kTensorChannelVariable);
      env_flag(kKeepDenormalsVariable);
      if (hooks.prepare) hooks.prepare();
    }
    check_list_items(app, argc, argv);
    check_input_specs_have_dtypes(argc, argv);
    check_launch_options_before_command(app, argc, argv);
    app.parse(argc, argv);
  } catch (const ExitStatus& exit) {
    return exit.status;
  } catch (const CLI::ParseError& error) {
    // --help and --version arrive here too, with exit code 0.
    if (error.get_exit_code() == 0) return output_arrived(app.exit(error));
    std::string text = parse_error_text(error);
    // A mistyped option is unknown (an extra), and leaves the one it meant missing when required.
    const bool extras = dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr;
    const bool missing = dynamic_cast<const CLI::RequiredError*>(&error) != nullptr;
    if (extras || missing) {
      const std::string unknown = unknown_option_text(app, argc, argv, missing);
      if (!unknown.empty()) text = unknown;
    }
    print_error_line("pipebal: error: " + rank_prefix() + text + " (see --help)");
    return kUserErrorStatus;
  } catch (const std::exception& error) {
    if (hooks.special) {
      if (const std::optional<int> status = hooks.special(error)) return *status;
    }
    const ErrorReport report = report_error(error, rank_prefix(), hooks.summarize);
    print_error_line(report.line);
    return report.status;
  }
  return output_arrived(0);
}

}  // namespace pipebal::tools
