// What both pipebal executables do around their commands (see tools/front_main.cpp): the same
// application (description, examples, --version), the first word checked to name a command,
// mistyped environment switches refused, and every error ended as one line on stderr with its
// exit status (error_report.h). Needs no LibTorch.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tools/error_report.h"

namespace pipebal::tools {

// The exit status a command wants main() to return, with nothing more printed.
struct ExitStatus {
  int status = 0;
};

// "rank 1: " in a process of a multi-process run, so that each line says whose it is; none
// while RANK is not a rank (reading the environment refuses it then, in one line of its own).
std::string rank_prefix();
// "pipebal: warning: " and the rank prefix: what begins every warning line.
std::string warning_prefix();

// "out/profile.json, plan.json": files written into `directory`, the first with its path (one
// slash between, however the directory was given).
std::string files_in(const std::string& directory, const std::vector<std::string>& names);

// Throws std::invalid_argument when this process is a rank of a launched multi-process run
// (RANK set, WORLD_SIZE above 1): `command` runs as one process, and N copies of it would only
// compete for the machine and write the same output.
void check_not_a_rank(const std::string& command);

// Whether the command line asks for help or the version, which CLI11 answers wherever the flag
// stands before a `--` (after it, words are a launched command's).
bool asks_for_help(int argc, char** argv);

// Throws std::invalid_argument for an OMP_NUM_THREADS or MKL_NUM_THREADS (`name`, `value`;
// nullptr: unset) that the OpenMP runtime and LibTorch would not take: they print warnings,
// LibTorch a stack trace, and go on with a thread count of their own. Taken: positive integers,
// comma-separated (OpenMP's nesting levels; LibTorch reads the first), with blanks around them.
void check_thread_count_variable(const char* name, const char* value);

// pipebal's application, without commands.
std::unique_ptr<CLI::App> make_pipebal_app();

struct CommandLineHooks {
  // Runs before the command line is parsed (e.g. what every thread must see from its start);
  // not for --help or --version.
  std::function<void()> prepare;
  // The cause of an error in one line (null: report_error's default).
  Summarize summarize = nullptr;
  // May end an exception its own way: returns the exit status, or nullopt for the usual line.
  std::function<std::optional<int>(const std::exception&)> special;
};

// Parses and runs `app`'s command line; returns the exit status.
int run_command_line(CLI::App& app, int argc, char** argv, const CommandLineHooks& hooks = {});

}  // namespace pipebal::tools
