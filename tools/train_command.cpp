// See train_command.h.
#include "tools/train_command.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipebal/balance/plan.h"
#include "pipebal/balance/units.h"
#include "pipebal/common/atomic_file.h"
#include "pipebal/common/distinct_paths.h"
#include "pipebal/common/error_text.h"
#include "pipebal/common/machine_load.h"
#include "pipebal/common/thread_pinning.h"
#include "pipebal/distributed/launch_env.h"
#include "pipebal/models/input_spec.h"
#include "pipebal/models/loss_kind.h"
#include "pipebal/models/synthetic.h"
#include "pipebal/models/zoo.h"
#include "pipebal/workflow/optimizer_kind.h"
#include "pipebal/workflow/training_run.h"
#include "tools/command_line.h"
#include "tools/common_options.h"
#include "tools/progress.h"

namespace pipebal::tools {
namespace {

using balance::parse_balance;
using workflow::run_training;
using workflow::TrainSettings;

// The run's settings (their defaults feed --help) plus what only the command line has.
struct TrainParams {
  TrainSettings settings;
  std::string input_shape;
  std::string optimizer = to_string(settings.optimizer);
  std::string loss;
  std::string plan;
  std::string balance;
  std::string weight_delays;
  std::string output;
  std::string trace;
  bool bind_cores = false;
  bool quiet = false;
};

// A run that asked no --check-finite finishes even when its loss stops being a number: say so,
// as a summary ending in "nan" is easily missed.
void warn_if_diverged(const reports::RunRecord& run) {
  for (size_t k = 0; k < run.steps.size(); ++k) {
    const double loss = run.steps[k].loss;
    if (std::isfinite(loss)) continue;
    std::cerr << fmt::format(
        "{}the loss became {} at step {} of {}: training diverged (learning rate too large? "
        "inputs too large?); --check-finite stops at the first non-finite loss\n",
        warning_prefix(), std::isnan(loss) ? "nan" : fmt::format("{}", loss), k + 1,
        run.steps.size());
    return;
  }
}

void print_summary(const reports::RunRecord& run) {
  fmt::print("model {}, input {}{}, balance [{}], {} micro-batch{}, {} schedule, checkpoint {}\n",
             printable(run.model),
             run.inputs.empty() ? fmt::format("[{}]", fmt::join(run.input_shape, ","))
                                : fmt::format("{}", fmt::join(run.inputs, " ")),
             run.replicas > 1 ? fmt::format(" x {} replicas", run.replicas) : "",
             fmt::join(run.balance, ","), run.chunks, run.chunks == 1 ? "" : "es", run.schedule,
             run.checkpoint);
  fmt::print("median step {:.3f} ms (p10 {:.3f}, p90 {:.3f}) over {} steps, {:.1f} samples/s\n",
             run.median_step_ms, run.p10_step_ms, run.p90_step_ms, run.steps.size(),
             run.samples_per_s);
  fmt::print("loss ({}{}) {:.5f} -> {:.5f}\n\n", run.loss,
             run.data.empty() ? ", synthetic batch" : ", " + run.data, run.steps.front().loss,
             run.steps.back().loss);
  // The stages' busy times are those of one step (the run's trace), whose time the median of an
  // even count need not be.
  if (run.timeline_step >= 0) {
    fmt::print("in step {} ({:.3f} ms, the closest to the median); busy: of its actions' span\n",
               run.timeline_step + 1, run.steps[static_cast<size_t>(run.timeline_step)].ms);
  }
  fmt::print("stage  layers         busy ms   busy   peak memory\n");
  for (const auto& s : run.stages) {
    fmt::print("{:>5}  {:<12} {:>9.3f}  {:>4.0f}%  {:>12}\n", s.index,
               fmt::format("{}-{} ({})", s.first_layer, s.first_layer + s.layers - 1, s.layers),
               s.busy_ms, 100 * s.busy_fraction,
               s.peak_memory_bytes >= 0 ? format_bytes(s.peak_memory_bytes) : "-");
  }
}

// The samples of one step the plan was made for (all replicas together); 0 when it does not say.
int64_t planned_mini_batch(const balance::Plan& plan) {
  if (!plan.input_shape.empty()) return plan.input_shape[0] * plan.replicas;
  if (!plan.inputs.empty())
    return models::parse_input_spec(plan.inputs[0]).shape[0] * plan.replicas;
  return 0;
}

void run_train(const TrainParams& p, const CLI::App& cmd) {
  std::string plan_warnings;  // said with the others once the run is made
  TrainSettings settings = p.settings;
  if (!p.input_shape.empty()) settings.input_shape = models::parse_shape(p.input_shape);
  settings.optimizer = workflow::parse_optimizer_kind(p.optimizer);
  if (!p.loss.empty()) settings.loss = models::parse_loss_kind(p.loss);
  if (!p.plan.empty()) {
    // The plan's options apply unless given on the command line; its model and input are the
    // ones it was made for, and no other.
    const balance::Plan plan = balance::read_plan(p.plan);
    for (size_t i = 0; i < plan.inputs.size(); ++i) {  // said as the plan's, not as --input
      models::parse_input_spec(plan.inputs[i], fmt::format("{}: inputs[{}]", p.plan, i));
    }
    if (!plan.model.empty()) {
      if (cmd.count("--model") > 0 &&
          models::canonical_spec(p.settings.model) != models::canonical_spec(plan.model)) {
        throw std::invalid_argument(fmt::format(
            "--model {} differs from the model the plan was made for ({}): leave out --model, "
            "or balance a profile of this model",
            p.settings.model, plan.model));
      }
      settings.model = plan.model;
      // Plans name their TorchScript file by its absolute path; one an earlier pipebal made may
      // name it relatively, read from this directory, which need not be the one it was made in.
      const std::string path = models::relative_model_path(plan.model);
      if (!path.empty() && cmd.count("--model") == 0) {
        plan_warnings += fmt::format(
            "{}{} names its model by a relative path ({}), read from the current directory: "
            "{}; give --model to name the file (plans made now name it by its absolute path)\n",
            warning_prefix(), printable(p.plan), printable(path),
            printable(models::model_file_name(path)));
      }
    } else if (cmd.count("--model") == 0) {
      // A plan balanced from a profile that did not name its model; the default model is not it.
      throw std::invalid_argument(
          fmt::format("{} does not name its model: give it with --model", p.plan));
    }
    if (!plan.dtype.empty()) {  // trained in the dtype it was measured in
      if (!settings.dtype.empty() && settings.dtype != plan.dtype) {
        throw std::invalid_argument(fmt::format(
            "--dtype {} differs from the dtype the plan was measured in ({}): leave it out, or "
            "balance a profile made with --dtype {}",
            settings.dtype, plan.dtype, settings.dtype));
      }
      settings.dtype = plan.dtype;
    }
    if (!plan.inputs.empty() && settings.data.empty()) {  // the plan's typed inputs
      if (!settings.inputs.empty() && settings.inputs != plan.inputs) {
        throw std::invalid_argument(fmt::format(
            "--input {} differs from the inputs the plan was made for ({}): leave it out, or "
            "balance a profile made with these inputs",
            fmt::join(settings.inputs, " "), fmt::join(plan.inputs, " ")));
      }
      if (!settings.input_shape.empty()) {
        throw std::invalid_argument(
            fmt::format("the plan was made for --input {}: leave out --input-shape",
                        fmt::join(plan.inputs, " ")));
      }
      settings.inputs = plan.inputs;
    } else if (!plan.input_shape.empty() && settings.data.empty()) {  // --data brings its own
      if (!settings.inputs.empty()) {
        throw std::invalid_argument(
            fmt::format("the plan was made for input shape {}: leave out --input",
                        fmt::join(plan.input_shape, ",")));
      }
      if (!settings.input_shape.empty() && settings.input_shape != plan.input_shape) {
        throw std::invalid_argument(fmt::format(
            "--input-shape {} differs from the input the plan was made for ({}): leave it out, or "
            "balance a profile made with this input",
            fmt::join(settings.input_shape, ","), fmt::join(plan.input_shape, ",")));
      }
      settings.input_shape = plan.input_shape;
    } else if (settings.data.empty() && settings.inputs.empty() && settings.input_shape.empty() &&
               models::parse_model_spec(settings.model).path.empty()) {
      // Balanced from a profile that did not say its batch (a hand-written one). A TorchScript
      // model has no default input, and says so.
      plan_warnings += fmt::format(
          "{}{} does not say what input it was made for: training the model's default input "
          "(give --input-shape to choose)\n",
          warning_prefix(), printable(p.plan));
    }
    settings.balance = plan.balance;
    settings.layer_names = plan.layer_names();
    if (cmd.count("--chunks") == 0) settings.chunks = plan.chunks;
    if (cmd.count("--schedule") == 0) settings.schedule = plan.schedule;
    if (cmd.count("--schedule") + cmd.count("--virtual") == 0) {
      settings.virtual_stages = plan.virtual_stages;
    }
    if (cmd.count("--schedule") == 0) settings.weight_delays = plan.weight_delays;
    if (cmd.count("--checkpoint") == 0) settings.checkpoint = plan.checkpoint;
    if (cmd.count("--replicas") == 0) settings.replicas = plan.replicas;
    if (cmd.count("--threads") == 0 && plan.threads_per_stage > 0) {
      settings.threads_per_stage = plan.threads_per_stage;
    }
    // --data is read in mini-batches of the plan's size unless --batch-size says otherwise.
    const int64_t planned_batch = planned_mini_batch(plan);
    if (!settings.data.empty() && planned_batch > 0 && cmd.count("--batch-size") == 0) {
      settings.batch_size = planned_batch;
    }
    // The command line's choices go before the plan's; the plan's prediction is then not this
    // run's, and a comparison with it would mislead.
    std::vector<std::string> changed;
    if (settings.chunks != plan.chunks) {
      changed.push_back(fmt::format("--chunks {} (planned {})", settings.chunks, plan.chunks));
    }
    if (settings.schedule != plan.schedule) {
      changed.push_back(fmt::format("--schedule {} (planned {})",
                                    pipeline::to_string(settings.schedule),
                                    pipeline::to_string(plan.schedule)));
    }
    if (settings.checkpoint != plan.checkpoint) {
      changed.push_back(fmt::format("--checkpoint {} (planned {})",
                                    pipeline::to_string(settings.checkpoint),
                                    pipeline::to_string(plan.checkpoint)));
    }
    if (settings.replicas != plan.replicas) {
      changed.push_back(
          fmt::format("--replicas {} (planned {})", settings.replicas, plan.replicas));
    }
    if (!settings.data.empty() && planned_batch > 0 && settings.batch_size != planned_batch) {
      changed.push_back(
          fmt::format("--batch-size {} (planned {})", settings.batch_size, planned_batch));
    }
    if (cmd.count("--virtual") > 0 && p.settings.virtual_stages != plan.virtual_stages) {
      changed.push_back(
          fmt::format("--virtual {} (planned {})", p.settings.virtual_stages, plan.virtual_stages));
    }
    if (!changed.empty()) {
      plan_warnings += fmt::format(
          "{}{} {} from the plan: the plan's balance and prediction were made for its own "
          "configuration, not this one (balance again to plan for it)\n",
          warning_prefix(), fmt::join(changed, ", "), changed.size() == 1 ? "differs" : "differ");
    }
  } else {
    settings.balance = parse_balance(p.balance);
  }
  if (!p.weight_delays.empty()) settings.weight_delays = parse_weight_delays(p.weight_delays);
  plan_warnings += long_weight_delays_warning(
      p.weight_delays.empty() ? "the plan's W delays" : "--weight-delays", settings.weight_delays,
      settings.chunks);
  if (p.plan.empty() || cmd.count("--schedule") + cmd.count("--virtual") > 0) {
    settings.virtual_stages = stages_per_device(settings.schedule, p.settings.virtual_stages);
  }

  // Under torchrun or `pipebal launch`, this process is one rank; rank 0 reports the run.
  settings.launch = distributed::launch_env_from_process();
  if (!settings.data.empty()) settings.warmup_steps = 0;  // every step trains on the data
  if (p.bind_cores) {
    if (settings.launch && settings.launch->world_size > 1) {
      throw std::invalid_argument(
          "--bind-cores pins the stages of one process; one process of several is pinned by "
          "pipebal launch --bind-cores");
    }
    const int devices =
        static_cast<int>(settings.balance.size()) / std::max(1, settings.virtual_stages);
    try {
      settings.device_cpus = cores_for_groups(devices, settings.threads_per_stage);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("--bind-cores: ") + e.what());
    }
  }
  const bool reports = !settings.launch || settings.launch->rank == 0;
  // An output that would replace an input, or cannot be written, is refused before the run.
  check_outputs_apart({{"--model", settings.model}, {"--data", settings.data}, {"--plan", p.plan}},
                      {{"-o", p.output}, {"--trace", p.trace}, {"--save", settings.save}});
  for (const std::string& path : {p.output, p.trace, settings.save}) {
    if (reports && !path.empty()) check_writable(path);
  }
  Progress progress(std::cerr, Progress::mode_for_stderr(p.quiet || !reports));
  const int warmup = settings.warmup_steps;
  // Said once the run is made (bad input gets its one line alone). What shares this process's
  // cores: its devices (a device's stages share its thread), the processes on this host, or this
  // process alone under launch --bind-cores (cores of its own, but the host's processes share
  // their CPU quota).
  const int stages = static_cast<int>(settings.balance.size());
  const int devices_on_these_cores =
      !settings.launch                    ? stages / std::max(1, settings.virtual_stages)
      : settings.launch->cores_of_its_own ? 1
                                          : settings.launch->local_world_size;
  std::string warning;
  if (reports) {
    std::string threads_warning =
        oversubscription_warning(devices_on_these_cores, settings.threads_per_stage);
    if (threads_warning.empty() && settings.launch && settings.launch->cores_of_its_own) {
      threads_warning = shared_quota_warning(settings.launch->local_world_size,
                                             settings.threads_per_stage, cpu_quota());
    }
    warning = plan_warnings + threads_warning;
  }
  if (reports && settings.schedule == pipeline::ScheduleKind::kInterleaved &&
      stages == settings.virtual_stages) {
    warning += fmt::format(
        "{}interleaved with {} stages per device puts all {} stages on one "
        "device, which runs them one after another: give {} stages or more ({} per device) to "
        "interleave\n",
        warning_prefix(), settings.virtual_stages, stages, 2 * settings.virtual_stages,
        settings.virtual_stages);
  }
  settings.warn = [&warning, reports](const std::string& line) {
    if (reports) warning += warning_prefix() + line + "\n";
  };
  // One process alone (launched alone too); across processes each rank reads its cores and rank
  // 0 tells the run's ranks from other work (TrainingRun).
  std::optional<MachineLoadMeter> load;
  if (!settings.launch || settings.launch->world_size == 1) load.emplace();
  // --save (written at the run's end), -o and --trace land together or not at all.
  WrittenTogether outputs;
  reports::RunRecord run = run_training(
      settings, [&progress, &warning, warmup](int step, int total, double ms, double loss) {
        std::cerr << warning;
        warning.clear();
        const bool warming_up = step < warmup;
        progress.update(
            warming_up ? "warm-up step" : "step", warming_up ? step + 1 : step + 1 - warmup,
            warming_up ? warmup : total - warmup, fmt::format("{:.1f} ms, loss {:.4f}", ms, loss));
      });
  progress.finish();
  if (!reports) {
    outputs.commit();
    return;
  }
  const std::optional<MachineLoad> machine_load =
      load ? load->load()
           : machine_load_from_json(run.environment.value("machine_load", nlohmann::json()));
  if (load && machine_load) run.environment["machine_load"] = machine_load_to_json(*machine_load);
  print_summary(run);
  warn_if_diverged(run);
  warn_if_machine_busy(machine_load, "training");
  if (!p.trace.empty()) {
    write_file_atomically(
        p.trace,
        reports::chrome_trace(run.timeline, run.model, reports::pipeline_ranks(run)).dump() + "\n");
  }
  if (!p.output.empty()) write_file_atomically(p.output, reports::run_to_json(run).dump(2) + "\n");
  outputs.commit();
  if (!p.output.empty()) fmt::print("\nwrote {}\n", printable(p.output));
  if (!settings.save.empty()) {
    fmt::print("wrote {} (the model with its trained weights; torch.jit.load reads it)\n",
               printable(settings.save));
  }
  if (!p.trace.empty()) {
    fmt::print("wrote {} (open in https://ui.perfetto.dev or chrome://tracing)\n",
               printable(p.trace));
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto p = std::make_shared<TrainParams>();
  p->settings.model = models::default_model_spec();
  p->settings.virtual_stages = 0;  // --virtual not given
  CLI::App* cmd =
      app.add_subcommand("train", "Train pipelined with a balance or a plan, and measure it");
  add_model_option(*cmd, p->settings.model)->capture_default_str();
  add_input_options(*cmd, p->input_shape, p->settings.inputs);
  add_dtype_option(*cmd, p->settings.dtype);
  auto* plan =
      cmd->add_option("--plan", p->plan, "plan.json from `pipebal plan` or `pipebal balance`");
  auto* balance = cmd->add_option("--balance", p->balance, "layers per stage, e.g. 3,3,2");
  plan->excludes(balance);
  balance->excludes(plan);
  cmd->add_option("--devices", p->settings.devices,
                  "one device per stage, or one for all (across processes, cuda means "
                  "cuda:LOCAL_RANK)")
      ->delimiter(',')
      ->capture_default_str();
  add_chunks_option(*cmd, p->settings.chunks);
  add_schedule_option(*cmd, p->settings.schedule);
  add_virtual_stages_option(*cmd, p->settings.virtual_stages);
  add_weight_delays_option(*cmd, p->weight_delays);
  add_checkpoint_option(*cmd, p->settings.checkpoint);
  add_threads_option(*cmd, p->settings.threads_per_stage);
  cmd->add_flag("--bind-cores", p->bind_cores,
                "pin each device's stage thread and its --threads to cores of their own (the "
                "first cores this process may run on, in order), so that no stage changes speed "
                "with the core the scheduler gives it");
  cmd->add_option("--replicas", p->settings.replicas,
                  "pipelines trained data-parallel, one process per stage and replica (each "
                  "replica trains on its own --input-shape batch)")
      ->capture_default_str();
  auto* steps =
      cmd->add_option("--steps", p->settings.steps, "measured steps")->capture_default_str();
  auto* warmup_steps =
      cmd->add_option("--warmup-steps", p->settings.warmup_steps,
                      "steps run before measuring, which also measure the peak memory (the first "
                      "allocates the gradients: 2 reach the steady state)")
          ->capture_default_str();
  cmd->add_option("--optimizer", p->optimizer, "sgd or adam")->capture_default_str();
  cmd->add_option("--lr", p->settings.lr, "learning rate")->capture_default_str();
  add_seed_option(*cmd, p->settings.seed);
  cmd->add_flag("--deferred-batch-norm", p->settings.deferred_batch_norm,
                "update batch-norm running statistics once per mini-batch");
  cmd->add_flag("--check-finite", p->settings.check_finite, "fail on a non-finite loss");
  add_step_timeout_option(*cmd, p->settings.step_timeout_s);
  auto* data = cmd->add_option(
      "--data", p->settings.data,
      "train on this file, written in Python by torch.save({'inputs': x or [x1, x2], 'targets': "
      "y}, path), instead of a synthetic batch; every step trains on it (--epochs sets how many, "
      "not --steps)");
  // Given without --data they would do nothing; --steps with it neither: refused, not ignored.
  steps->excludes(data);
  warmup_steps->excludes(data);
  cmd->add_option("--epochs", p->settings.epochs, "passes over --data")
      ->capture_default_str()
      ->needs(data);
  cmd->add_option("--batch-size", p->settings.batch_size,
                  "mini-batch of --data, in samples (default: the --plan's, else 32)")
      ->needs(data);
  cmd->add_flag("--shuffle", p->settings.shuffle,
                "visit --data in a new random order each epoch (from --seed); default: file order")
      ->needs(data);
  cmd->add_option("--loss", p->loss,
                  "with --data: cross_entropy, mse, nll or none (the model's output is the loss); "
                  "default cross_entropy for integer targets, mse for floating ones. Without "
                  "--data the synthetic targets follow the model's own loss (MSE for a .pt)");
  cmd->add_option("--save", p->settings.save,
                  "write the TorchScript model with its trained weights here (torch.jit.load "
                  "reads it); for a model given as a .pt file, not a built-in one");
  cmd->add_option("-o,--output", p->output, "write the run document (pipebal.run/1)");
  cmd->add_flag("-q,--quiet", p->quiet, "no progress on stderr");
  cmd->add_option(
      "--trace", p->trace,
      "write a Chrome trace of the step closest to the median (run.json timeline_step)");
  cmd->footer(
      "Example:\n"
      "  pipebal train --model resnet:depth=18,width=16 --input-shape 32,3,64,64 \\\n"
      "      --balance 5,5 --chunks 8 --steps 10 -o run.json --trace trace.json\n"
      "  pipebal train --plan plan.json -o run.json   # plan.json from pipebal plan or balance\n"
      "On your data, keeping the trained model (a plan of your TorchScript model):\n"
      "  pipebal train --plan plan.json --data data.pt \\\n"
      "      --epochs 3 --loss cross_entropy --lr 0.1 --save trained.pt -o run.json\n"
      "One process per stage (rank r runs stage r; rank 0 writes the outputs):\n"
      "  pipebal launch --nproc-per-node 2 -- pipebal train --plan plan.json -o run.json\n"
      "  python3 -m torch.distributed.run --nproc_per_node 2 --no_python \\\n"
      "      --redirects 2 --tee 2 --log_dir logs pipebal train --plan plan.json -o run.json");
  cmd->callback([p, cmd] {
    if (p->plan.empty() && p->balance.empty()) {
      throw std::invalid_argument("train: give --plan plan.json or --balance 3,3,2");
    }
    run_train(*p, *cmd);
  });
}

}  // namespace pipebal::tools
