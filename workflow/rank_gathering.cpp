// See rank_gathering.h.
#include "pipebal/workflow/rank_gathering.h"

#include <sys/resource.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "pipebal/distributed/group.h"
#include "pipebal/distributed/placement.h"
#include "pipebal/distributed/tags.h"
#include "pipebal/pipeline/layer_seq.h"
#include "pipebal/profiler/environment.h"
#include "pipebal/reports/run_record.h"

namespace pipebal::workflow {
namespace {

// This process's peak resident set.
int64_t peak_rss_bytes() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return -1;
  return int64_t{usage.ru_maxrss} * 1024;  // kilobytes on Linux
}

// Each step's time axis starts at its earliest action, its actions in stage order.
void start_at_first_action(std::vector<pipeline::Timeline>& timelines) {
  for (auto& timeline : timelines) {
    double first = 0;
    for (size_t i = 0; i < timeline.size(); ++i) {
      first = i == 0 ? timeline[i].start_ms : std::min(first, timeline[i].start_ms);
    }
    for (auto& t : timeline) {
      t.start_ms -= first;
      t.end_ms -= first;
    }
    std::stable_sort(timeline.begin(), timeline.end(),
                     [](const auto& a, const auto& b) { return a.stage < b.stage; });
  }
}

}  // namespace

void gather_measurements(distributed::Group& group, const distributed::Placement& placement,
                         const std::optional<CpuUse>& cpu_use, RankMeasurements& measured,
                         reports::RunRecord& run) {
  nlohmann::json mine;
  mine["rank"] = group.rank();
  mine["host"] = profiler::host_name();
  mine["peak_rss_bytes"] = peak_rss_bytes();
  mine["clock_uncertainty_ms"] = group.clock_uncertainty_ms();
  mine["shared_memory_peers"] = group.shared_memory_peers();
  mine["peak_bytes"] = measured.peak_bytes;
  mine["origins_ms"] = measured.origins_ms;
  mine["cpu_use"] = cpu_use ? cpu_use_to_json(*cpu_use) : nlohmann::json();
  mine["machine"] = this_machine();
  nlohmann::json timelines = nlohmann::json::array();
  for (const auto& t : measured.timelines) timelines.push_back(reports::timeline_to_json(t));
  mine["timelines"] = timelines;
  const std::vector<std::string> all = group.gather("run", mine.dump());
  if (all.empty()) return;  // not rank 0
  std::vector<pipeline::Timeline> merged(measured.timelines.size());
  std::vector<HostCpuUse> cpu_use_by_rank;
  for (const std::string& text : all) {
    const nlohmann::json theirs = nlohmann::json::parse(text);
    cpu_use_by_rank.push_back(
        {theirs.at("machine").get<std::string>(), cpu_use_from_json(theirs.at("cpu_use"))});
    const std::optional<CpuUse>& their_cpu_use = cpu_use_by_rank.back().use;
    const int rank = theirs.at("rank").get<int>();
    const int replica = placement.replica_of(rank);
    const auto origins = theirs.at("origins_ms").get<std::vector<double>>();
    const auto& lines = theirs.at("timelines");
    if (origins.size() != merged.size() || lines.size() != merged.size()) {
      throw std::runtime_error(
          fmt::format("rank {} measured {} steps, rank 0 {}", rank, lines.size(), merged.size()));
    }
    for (size_t k = 0; k < merged.size() && replica == 0; ++k) {  // replica 0's pipeline
      const double shift = origins[k] - measured.origins_ms[k];
      for (pipeline::TimedAction t : reports::timeline_from_json(lines[k])) {
        t.start_ms += shift;
        t.end_ms += shift;
        merged[k].push_back(t);
      }
    }
    const auto peaks = theirs.at("peak_bytes").get<std::vector<int64_t>>();
    for (size_t s = 0; s < peaks.size() && s < measured.peak_bytes.size(); ++s) {
      measured.peak_bytes[s] = std::max(measured.peak_bytes[s], peaks[s]);
    }
    reports::ProcessRun process;
    process.rank = rank;
    process.stage = placement.device_of(rank);
    process.replica = replica;
    process.host = theirs.at("host").get<std::string>();
    process.peak_rss_bytes = theirs.at("peak_rss_bytes").get<int64_t>();
    if (their_cpu_use) process.cpu_seconds = their_cpu_use->own_s;
    process.clock_uncertainty_ms = theirs.at("clock_uncertainty_ms").get<double>();
    process.shared_memory_peers = theirs.at("shared_memory_peers").get<std::vector<int>>();
    run.processes.push_back(process);
  }
  const std::optional<MachineLoad> machine_load = load_of_hosts(cpu_use_by_rank);
  if (machine_load) run.environment["machine_load"] = machine_load_to_json(*machine_load);
  start_at_first_action(merged);
  measured.timelines = std::move(merged);
}

void gather_weights(distributed::Group& group, const distributed::Placement& placement,
                    const pipeline::LayerSeq& layers, const std::vector<int>& balance) {
  const int rank = group.rank();
  torch::NoGradGuard no_grad;
  size_t first = 0;
  for (size_t s = 0; s < balance.size(); ++s) {
    const pipeline::LayerSeq part = layers.slice(first, balance[s]);
    first += static_cast<size_t>(balance[s]);
    const int owner = placement.rank_of(placement.device_of_stage(static_cast<int>(s)), 0);
    if (owner == 0 || (rank != 0 && rank != owner)) continue;
    std::vector<at::Tensor> state = part.parameters();
    for (const at::Tensor& b : part.buffers()) state.push_back(b);
    const std::string what = fmt::format("gathering stage {}'s weights for --save", s);
    for (size_t t = 0; t < state.size(); ++t) {
      const int tag = distributed::kWeightsTagBase + static_cast<int>(t);
      if (rank == 0) {
        group.receive(state[t], owner, tag, what);
      } else {
        group.send(state[t], 0, tag, what);
      }
    }
  }
}

}  // namespace pipebal::workflow
