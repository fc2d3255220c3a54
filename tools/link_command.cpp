// See link_command.h.
#include "tools/link_command.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipebal/balance/link_model.h"
#include "pipebal/balance/profile_reader.h"
#include "pipebal/balance/units.h"
#include "pipebal/common/atomic_file.h"
#include "pipebal/common/distinct_paths.h"
#include "pipebal/common/error_text.h"
#include "pipebal/common/git_commit.h"
#include "pipebal/common/schema.h"
#include "pipebal/common/time_limit.h"
#include "pipebal/distributed/group.h"
#include "pipebal/distributed/launch_env.h"
#include "pipebal/distributed/link_probe.h"
#include "pipebal/distributed/settings_agreement.h"
#include "pipebal/workflow/training_run.h"

namespace pipebal::tools {
namespace {

struct LinkParams {
  std::string profile;
  std::string output;
  std::vector<std::string> sizes{"64K", "256K", "1M", "4M", "16M", "64M"};
  int repeats = 10;
  double timeout_s = 0;
};

// The sizes to measure: the given ones, plus (with a profile) up to 16 of the sizes its layer
// boundaries send.
std::vector<int64_t> sizes_to_measure(const LinkParams& p) {
  std::set<int64_t> sizes;
  for (const auto& text : p.sizes) {
    const int64_t bytes = balance::parse_bytes(text);
    if (bytes < 1 || bytes > (int64_t{1} << 32)) {
      throw std::invalid_argument(fmt::format("--sizes: {} is not between 1 byte and 4 GiB", text));
    }
    sizes.insert(bytes);
  }
  if (!p.profile.empty()) {
    std::set<int64_t> cuts;
    for (const auto& layer : balance::read_profile(p.profile).layers) {
      if (layer.output_bytes > 0 && layer.output_bytes <= (int64_t{1} << 32)) {
        cuts.insert(layer.output_bytes);
      }
    }
    const std::vector<int64_t> sorted(cuts.begin(), cuts.end());
    const size_t keep = std::min<size_t>(16, sorted.size());
    for (size_t i = 0; i < keep; ++i) sizes.insert(sorted[i * sorted.size() / keep]);
  }
  // The fit of latency and bandwidth needs two (balance::fit_link): refused before measuring.
  if (sizes.size() < 2) {
    throw std::invalid_argument(fmt::format(
        "--sizes: give two different message sizes or more (latency and bandwidth are fitted), "
        "got {}",
        sizes.size()));
  }
  return {sizes.begin(), sizes.end()};
}

void run_link(const LinkParams& p) {
  if (p.repeats < 1 || p.repeats > 100000) {
    throw std::invalid_argument(
        fmt::format("--repeats must be from 1 to 100000, got {}", p.repeats));
  }
  check_time_limit(p.timeout_s, "--timeout", "300");
  // --profile is written back with the link in it; -o over it would replace it with the link.
  check_outputs_apart({{"--profile", p.profile}}, {{"-o", p.output}});
  const auto env = distributed::launch_env_from_process();
  if (!env || env->world_size != 2) {
    throw std::invalid_argument(fmt::format(
        "link measures between two processes{}: run it as pipebal launch --nproc-per-node 2 -- "
        "pipebal link ... (or one process on each of two nodes)",
        env ? fmt::format(", not {}", env->world_size) : ""));
  }
  const std::vector<int64_t> sizes = sizes_to_measure(p);
  for (const std::string& path : {p.profile, p.output}) {  // refused before the measurement
    if (env->rank == 0 && !path.empty()) check_writable(path);
  }
  const double timeout_s = p.timeout_s > 0 ? p.timeout_s : workflow::kDefaultProcessTimeoutS;
  const auto group = std::make_shared<distributed::Group>(
      *env, std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  // Both ranks must walk the same sizes the same number of times, or one waits for the other.
  distributed::require_same_settings(
      *group, {{"pipebal build", git_commit()},
               {"list of message sizes", fmt::format("{}", fmt::join(sizes, ","))},
               {"--repeats", std::to_string(p.repeats)}});
  const std::vector<balance::LinkSample> samples = distributed::probe_link(group, sizes, p.repeats);
  if (group->rank() != 0) return;
  const balance::LinkModel link = balance::fit_link(samples);
  fmt::print("{:>12} {:>12} {:>14}\n", "bytes", "one way", "bandwidth");
  for (const auto& s : link.samples) {
    fmt::print("{:>12} {:>9.3f} ms {:>14}\n", format_bytes(s.bytes), s.one_way_ms,
               balance::format_bandwidth(static_cast<double>(s.bytes) / s.one_way_ms));
  }
  fmt::print("\nfit: {:.3f} ms latency + bytes at {} (rank 0 <-> rank 1, {} round trips each)\n",
             link.latency_ms, balance::format_bandwidth(link.bandwidth_bytes_per_ms), p.repeats);
  const nlohmann::json measured = balance::link_to_json(link);
  if (!p.profile.empty()) {
    nlohmann::json profile = parse_json(read_file(p.profile), p.profile);
    profile["link"] = measured;
    write_file_atomically(p.profile, profile.dump(2) + "\n");
    fmt::print("added the link to {}\n", p.profile);
  }
  if (!p.output.empty()) {
    nlohmann::json document = measured;
    document["schema"] = schema_tag("pipebal.link", 1);
    write_file_atomically(p.output, document.dump(2) + "\n");
    fmt::print("wrote {}\n", printable(p.output));
  }
}

}  // namespace

void add_link_command(CLI::App& app) {
  auto p = std::make_shared<LinkParams>();
  CLI::App* cmd = app.add_subcommand(
      "link", "Measure the link between two processes (latency, bandwidth) for balance");
  cmd->add_option("--profile", p->profile,
                  "add the link to this profile (and measure the sizes its layers send)");
  cmd->add_option("-o,--output", p->output,
                  "write the link as JSON (pipebal.link/1: a record; balance reads the link "
                  "--profile adds)");
  cmd->add_option("--sizes", p->sizes, "message sizes")->delimiter(',')->capture_default_str();
  cmd->add_option("--repeats", p->repeats, "round trips per size (median)")->capture_default_str();
  cmd->add_option("--timeout", p->timeout_s, "seconds to wait for the other process (0: 300)")
      ->capture_default_str();
  cmd->footer(
      "Runs as two processes (rank 0 and 1 measure; rank 0 writes), through the channels the\n"
      "pipeline uses: shared memory on one host (unless PIPEBAL_SHM_DISABLE=1), else Gloo\n"
      "(tensor by tensor with PIPEBAL_TENSOR_CHANNEL=1).\n"
      "`balance` then prices each transfer as latency + bytes / bandwidth unless --bandwidth is\n"
      "given.\n"
      "Example:\n"
      "  pipebal launch --nproc-per-node 2 -- pipebal link --profile profile.json\n"
      "  # across hosts: one process on each (rank 0, on host0, writes the profile)\n"
      "  pipebal launch --nnodes 2 --node-rank 0 --master-addr host0 -- \\\n"
      "      pipebal link --profile profile.json -o link.json");
  cmd->callback([p] { run_link(*p); });
}

}  // namespace pipebal::tools
