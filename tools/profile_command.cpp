// See profile_command.h.
#include "tools/profile_command.h"

#include <algorithm>
#include <iostream>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <thread>

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "models/synthetic.h"
#include "models/zoo.h"
#include "profiler/device.h"
#include "profiler/profile_json.h"
#include "profiler/profile_table.h"
#include "profiler/profiler.h"
#include "tools/common_options.h"
#include "tools/progress.h"

namespace pipebal::tools {
namespace {

constexpr const char* kFooter =
    "Example:\n"
    "  pipebal profile --model resnet:depth=18 --input-shape 32,3,64,64 --chunks 4 -o "
    "profile.json\n"
    "  pipebal profile --model mlp:layers=4,width=256 --repeat 20 --threads 1 -o profile.json\n"
    "  pipebal profile --model gpt:layers=4 --chunks 1,2,4,8 -o profile.json   # for `pipebal "
    "plan`\n"
    "Times are medians after warm-up; the profile is measured at the micro-batch size\n"
    "ceil(batch / chunks), which is what `pipebal balance --chunks` expects. Several counts\n"
    "measure several sizes (the first is the profile's own); balance interpolates between them.";

profiler::ProfileOptions profile_options(const ProfileParams& params) {
  profiler::ProfileOptions options;
  options.backend = profiler::parse_timer_backend(params.backend);
  options.warmup = params.warmup;
  options.repeat = params.repeat;
  options.time_budget_s = params.time_budget_s;
  options.co_runners = params.co_runners;
  options.device = profiler::parse_device(params.device);
  options.dtype = profiler::parse_dtype(params.dtype);
  return options;
}

// The micro-batch size of each chunk count, checked against the batch: every count from 1 to
// the batch, no two counts giving the same size.
std::vector<int64_t> micro_batch_sizes(const std::vector<int>& chunks, int64_t batch) {
  if (chunks.empty()) throw std::invalid_argument("--chunks needs at least one count");
  if (chunks.size() > 64) throw std::invalid_argument("--chunks takes at most 64 counts");
  std::vector<int64_t> sizes;
  for (const int m : chunks) {
    if (m < 1) throw std::invalid_argument(fmt::format("--chunks must be >= 1, got {}", m));
    if (m > batch) {
      throw std::invalid_argument(
          fmt::format("--chunks {} is more than the batch size {} (--input-shape)", m, batch));
    }
    const int64_t size = (batch + m - 1) / m;
    const auto same = std::find(sizes.begin(), sizes.end(), size);
    if (same != sizes.end()) {
      throw std::invalid_argument(
          fmt::format("--chunks {} and {} both mean micro-batches of {} samples: give one of them",
                      chunks[same - sizes.begin()], m, size));
    }
    sizes.push_back(size);
  }
  return sizes;
}

// Per measured size: the whole model's time per micro-batch and per sample, which shows how
// much efficiency small micro-batches lose.
void print_size_summary(const profiler::Profile& profile, std::ostream& out) {
  if (profile.sizes.empty()) return;
  out << fmt::format("\n{:>8} {:>8} {:>14} {:>14}\n", "chunks", "size", "fwd+bwd/mb", "per sample");
  for (const profiler::Profile::Size& size : profile.sizes) {
    double ms = 0;
    for (const profiler::LayerProfile& layer : size.layers) {
      ms += layer.forward_ms + layer.backward_ms;
    }
    out << fmt::format("{:>8} {:>8} {:>11.3f} ms {:>11.4f} ms\n", size.chunks,
                       size.micro_batch_size, ms, ms / double(size.micro_batch_size));
  }
}

}  // namespace

void run_profile(const ProfileParams& params, std::ostream& out, std::ostream* progress,
                 Progress::Mode progress_mode) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (params.threads < 0 || params.threads > cores) {
    throw std::invalid_argument(fmt::format(
        "--threads must be between 0 (LibTorch's default) and the {} cores of this machine, got {}",
        cores, params.threads));
  }
  // Parse every option before the (slow) model build, so that typos fail at once.
  const profiler::ProfileOptions options = profile_options(params);
  if (params.threads > 0) at::set_num_threads(params.threads);

  models::Model model = models::build_model(params.model, params.seed);
  std::vector<int64_t> shape = params.input_shape.empty() ? model.info.default_input_shape
                                                          : models::parse_shape(params.input_shape);
  if (shape.empty()) {
    throw std::invalid_argument(
        fmt::format("model '{}' has no default input shape: give --input-shape", params.model));
  }
  const int64_t batch = shape[0];
  const std::vector<int64_t> sizes = micro_batch_sizes(params.chunks, batch);

  Progress line(progress != nullptr ? *progress : std::cerr,
                progress != nullptr ? progress_mode : Progress::Mode::kQuiet);
  // One profile per micro-batch size, the profile's own first; the later ones start from warm
  // caches and allocator pools, so one warm-up pass does for them.
  std::vector<profiler::Profile> profiles;
  for (size_t k = 0; k < sizes.size(); ++k) {
    const int chunks = params.chunks[k];
    if (chunks > 1 || sizes.size() > 1) {
      out << fmt::format("profiling at micro-batch size {} (batch {} / {} chunks, rounded up)\n",
                         sizes[k], batch, chunks);
    }
    std::vector<int64_t> micro_shape = shape;
    micro_shape[0] = sizes[k];
    const models::SyntheticData data = models::make_synthetic_data(model, micro_shape, params.seed);
    const std::string prefix = sizes.size() > 1 ? fmt::format("size {}: ", sizes[k]) : "";
    const profiler::ProgressFn report = [&line, &prefix](const profiler::ProfileProgress& p) {
      using Phase = profiler::ProfileProgress::Phase;
      const char* phase = p.phase == Phase::kLayers         ? "memory and warm-up, layer"
                          : p.phase == Phase::kWarmupPasses ? "warm-up pass"
                                                            : "timed pass";
      line.update(prefix + phase, p.done, p.total, p.layer);
    };
    profiler::ProfileOptions with_loss = options;
    if (k > 0) with_loss.warmup = std::min(options.warmup, 1);
    with_loss.loss = models::loss_against(model.info.loss, data.target);
    profiles.push_back(profiler::profile_model(model.layers, data.input, with_loss, report));
  }
  line.finish();
  profiler::Profile profile = profiles.front();
  profile.chunks = params.chunks.front();
  profile.input_shape = shape;
  if (profiles.size() > 1) {
    for (size_t k = 0; k < profiles.size(); ++k) {
      profile.sizes.push_back({params.chunks[k], sizes[k], std::move(profiles[k].layers)});
    }
    std::sort(profile.sizes.begin(), profile.sizes.end(),
              [](const auto& a, const auto& b) { return a.micro_batch_size < b.micro_batch_size; });
  }
  if (!params.output_path.empty()) profiler::write_profile(params.output_path, profile);
  profiler::print_profile_table(profile, out);
  print_size_summary(profile, out);
  if (!params.output_path.empty()) out << "\nwrote " << params.output_path << "\n";
}

void add_profile_command(CLI::App& app) {
  auto params = std::make_shared<ProfileParams>();
  CLI::App* sub = app.add_subcommand(
      "profile",
      "Measure every layer's forward and backward time and memory on a sample batch.\n"
      "Writes the cost profile that `pipebal balance` partitions.");
  sub->footer(kFooter);
  add_model_option(*sub, params->model)->required();
  add_input_shape_option(*sub, params->input_shape);
  sub->add_option("--dtype", params->dtype, "float32 or float64")->capture_default_str();
  sub->add_option("--device", params->device, "cpu, cuda or cuda:N")->capture_default_str();
  sub->add_option("--backend", params->backend, "Timer: auto, wallclock, events or cupti")
      ->capture_default_str();
  sub->add_option("--warmup", params->warmup, "Untimed repetitions per layer")
      ->capture_default_str();
  sub->add_option("--repeat", params->repeat, "Timed repetitions per layer")->capture_default_str();
  sub->add_option("--time-budget", params->time_budget_s,
                  "Seconds of timed passes over the model (0: none)")
      ->capture_default_str();
  sub->add_option("--chunks,-m", params->chunks,
                  "Micro-batches per step: profile at ceil(batch / chunks) samples; several "
                  "(e.g. 1,2,4,8) profile each size for `balance` and `plan` to choose from")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--co-runners", params->co_runners,
                  "Threads training the model alongside, as the other stages will (CPU; "
                  "typically stages - 1)")
      ->capture_default_str();
  sub->add_option("--threads", params->threads, "Intra-op threads (0: LibTorch's default)")
      ->capture_default_str();
  add_seed_option(*sub, params->seed);
  sub->add_option("-o,--output", params->output_path, "Write the profile here (pipebal.profile/1)");
  sub->add_flag("-q,--quiet", params->quiet, "No progress on stderr");
  sub->callback([params]() {
    run_profile(*params, std::cout, &std::cerr, Progress::mode_for_stderr(params->quiet));
  });
}

}  // namespace pipebal::tools
