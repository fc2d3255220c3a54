// The options several commands share, declared once: one name, one help text, one check at
// parse time, so that `--schedule zigzag` is refused the same way by every command before any
// work starts.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "pipebal/common/cores.h"
#include "pipebal/common/machine_load.h"
#include "pipebal/pipeline/schedule.h"

namespace pipebal::tools {

// For a count whose unset value (0) means "the default": a value given must be at least
// `least` ("--virtual: must be at least 1, got 0"), never taken for the default.
CLI::Validator given_at_least(int least);

CLI::Option* add_model_option(CLI::App& cmd, std::string& spec);
CLI::Option* add_input_shape_option(CLI::App& cmd, std::string& shape);
// --input-shape and the repeatable --input specs (models/input_spec.h), which exclude each other.
void add_input_options(CLI::App& cmd, std::string& shape, std::vector<std::string>& inputs);
// float32, float64, float16 or bfloat16, stored by its canonical name ("double" -> "float64").
CLI::Option* add_dtype_option(CLI::App& cmd, std::string& dtype);
CLI::Option* add_chunks_option(CLI::App& cmd, int& chunks);
// gpipe or 1f1b, parsed by pipeline::parse_schedule_kind into the typed value.
CLI::Option* add_schedule_option(CLI::App& cmd, pipeline::ScheduleKind& schedule);
// always, except_last or never, parsed by pipeline::parse_checkpoint_mode.
CLI::Option* add_checkpoint_option(CLI::App& cmd, pipeline::CheckpointMode& checkpoint);
CLI::Option* add_threads_option(CLI::App& cmd, int& threads);
CLI::Option* add_seed_option(CLI::App& cmd, uint64_t& seed);
// --virtual V: stages per device with the interleaved schedule (0 when not given).
CLI::Option* add_virtual_stages_option(CLI::App& cmd, int& virtual_stages);
// --weight-delays 0,1: zb-h1's W delay per stage (see parse_weight_delays).
CLI::Option* add_weight_delays_option(CLI::App& cmd, std::string& delays);
// "0,1,1": zb-h1's W delay per stage, in micro-batches; throws std::invalid_argument otherwise.
std::vector<int> parse_weight_delays(const std::string& text);
// A warning line (with its newline) when a W delay of `delays` (given as `source`:
// "--weight-delays" or "the plan's W delays") is `chunks` micro-batches or more, empty otherwise:
// such a delay runs every W after the stage's last B, as a delay of `chunks` does, and the plan or
// run says that one.
std::string long_weight_delays_warning(const std::string& source, const std::vector<int>& delays,
                                       int chunks);
// The stages per device `schedule` runs with `--virtual given`: 2 by default for interleaved, 1
// for the others; throws std::invalid_argument for --virtual with another schedule or below 1.
int stages_per_device(pipeline::ScheduleKind schedule, int given);
// A warning line (with its newline) when `devices` devices of `threads` (2 or more) intra-op
// threads each need more cores than pipebal may run on (common/cores.h), empty otherwise: their
// threads then share cores and the steps run slower than a profile of one device predicts.
std::string oversubscription_warning(int devices, int threads);
// Under `launch --bind-cores` each of a host's `processes` has cores of its own, checked by
// oversubscription_warning(1, threads), but all of them share their control group's CPU quota
// (they are one launch's children): a warning line when their threads together need more cores
// than their `quota` (cpu_quota(); none: no limit) lets them run on, empty otherwise.
std::string shared_quota_warning(int processes, int threads, const std::optional<CpuQuota>& quota);
// Prints the warning that the machine was busy while measuring (`what`: "profiling") on stderr,
// when `load` says it was (common/machine_load.h), and the one that a CPU quota held pipebal
// back, when it did.
void warn_if_machine_busy(const std::optional<MachineLoad>& load, const std::string& what);
// Writes the warning that the profile at `path` was measured on a busy machine, or held back by a
// CPU quota, to `warnings`, when its `load` says so: a plan from it fits that machine.
void warn_if_profiled_busy(const std::optional<MachineLoad>& load, const std::string& path,
                           std::ostream& warnings);
// Seconds a training step may take (0: no limit).
CLI::Option* add_step_timeout_option(CLI::App& cmd, double& seconds);

}  // namespace pipebal::tools
