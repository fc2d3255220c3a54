// See run_record.h.
#include "pipebal/reports/run_record.h"

#include <algorithm>
#include <cstdint>

#include <limits>

#include <fmt/format.h>

#include "pipebal/balance/layer_cost.h"
#include "pipebal/common/json_reader.h"
#include "pipebal/common/schema.h"

namespace pipebal::reports {

double read_ms(const JsonReader& value, double min) {
  const double ms = value.number(-std::numeric_limits<double>::max());
  if (ms < min || ms > balance::kMaxLayerMs) {
    value.fail(fmt::format("is {:g} ms, expected {:g} to {:g}", ms, min, balance::kMaxLayerMs));
  }
  return ms;
}

double read_ms_or_nan(const JsonReader& parent, const char* key) {
  return parent.has(key) ? read_ms(parent.at(key)) : std::numeric_limits<double>::quiet_NaN();
}

nlohmann::json timeline_to_json(const pipeline::Timeline& timeline) {
  nlohmann::json events = nlohmann::json::array();
  for (const auto& t : timeline) {
    events.push_back({{"stage", t.stage},
                      {"action", pipeline::to_string(t.action.kind)},
                      {"micro_batch", t.action.micro_batch},
                      {"start_ms", t.start_ms},
                      {"end_ms", t.end_ms}});
  }
  return events;
}

pipeline::Timeline timeline_from_json(const JsonReader& events, int stages) {
  pipeline::Timeline timeline;
  for (const JsonReader& e : events.elements()) {
    pipeline::TimedAction t;
    // A report draws one row per stage: an index past the run's must not size it.
    t.stage = static_cast<int>(e.at("stage").integer(0, stages - 1));
    const JsonReader kind = e.at("action");
    try {
      t.action.kind = pipeline::parse_action_kind(kind.as<std::string>());
    } catch (const std::invalid_argument& error) {
      kind.fail(error.what());
    }
    t.action.micro_batch =
        static_cast<int>(e.at("micro_batch").integer(0, kMaxTimelineMicroBatches - 1));
    // Since the start of the step; a rank's clock, aligned to rank 0's, may start a little before.
    t.start_ms = read_ms(e.at("start_ms"), -balance::kMaxLayerMs);
    t.end_ms = read_ms(e.at("end_ms"), t.start_ms);
    timeline.push_back(t);
  }
  return timeline;
}

pipeline::Timeline timeline_from_json(const nlohmann::json& events) {
  return timeline_from_json(JsonReader(events, "timeline"));
}

nlohmann::json run_to_json(const RunRecord& run) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : run.steps)
    steps.push_back({{"step", s.step}, {"ms", s.ms}, {"loss", s.loss}});
  nlohmann::json processes = nlohmann::json::array();
  for (const auto& p : run.processes) {
    processes.push_back(
        {{"rank", p.rank},
         {"stage", p.stage},
         {"replica", p.replica},
         {"host", p.host},
         {"clock_uncertainty_ms", p.clock_uncertainty_ms},
         {"shared_memory_peers", p.shared_memory_peers},
         {"peak_rss_bytes",
          p.peak_rss_bytes >= 0 ? nlohmann::json(p.peak_rss_bytes) : nlohmann::json()},
         {"cpu_seconds", p.cpu_seconds >= 0 ? nlohmann::json(p.cpu_seconds) : nlohmann::json()}});
  }
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : run.stages) {
    nlohmann::json stage = {{"index", s.index},
                            {"first_layer", s.first_layer},
                            {"layers", s.layers},
                            {"busy_ms", s.busy_ms},
                            {"busy_fraction", s.busy_fraction}};
    stage["peak_memory_bytes"] =
        s.peak_memory_bytes >= 0 ? nlohmann::json(s.peak_memory_bytes) : nlohmann::json();
    stages.push_back(stage);
  }
  nlohmann::json doc = {{"schema", schema_tag("pipebal.run", 1)},
                        {"model", run.model},
                        {"input_shape", run.input_shape},
                        {"inputs", run.inputs},
                        {"balance", run.balance},
                        {"devices", run.devices},
                        {"chunks", run.chunks},
                        {"schedule", run.schedule},
                        {"checkpoint", run.checkpoint},
                        {"threads_per_stage", run.threads_per_stage},
                        {"optimizer", run.optimizer},
                        {"lr", run.lr},
                        {"seed", run.seed},
                        {"warmup_steps", run.warmup_steps},
                        {"steps", steps},
                        {"median_step_ms", run.median_step_ms},
                        {"p10_step_ms", run.p10_step_ms},
                        {"p90_step_ms", run.p90_step_ms},
                        {"samples_per_s", run.samples_per_s},
                        {"stages", stages},
                        {"replicas", run.replicas},
                        {"loss", run.loss},
                        {"data", run.data},
                        {"processes", processes},
                        {"timeline", timeline_to_json(run.timeline)},
                        {"environment", run.environment}};
  if (!run.dtype.empty()) doc["dtype"] = run.dtype;
  if (run.virtual_stages > 1) doc["virtual_stages"] = run.virtual_stages;
  if (!run.weight_delays.empty()) doc["weight_delays"] = run.weight_delays;
  if (run.timeline_step >= 0) doc["timeline_step"] = run.timeline_step;
  return doc;
}

RunRecord run_from_json(const nlohmann::json& doc, const std::string& file) {
  try {
    check_schema(doc, "pipebal.run", 1, /*required=*/true);
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(file + ": " + error.what());
  }
  const JsonReader r(doc, file);
  RunRecord run;
  run.model = r.get<std::string>("model");
  run.input_shape = r.get<std::vector<int64_t>>("input_shape");
  run.inputs = r.get_or<std::vector<std::string>>("inputs", {});
  run.dtype = r.get_or<std::string>("dtype", "");
  run.balance = r.get<std::vector<int>>("balance");
  // Stage indices name stages of the balance (each listed, several per device interleaved).
  const int stage_count =
      run.balance.empty()
          ? kMaxTimelineStages
          : static_cast<int>(std::min<size_t>(run.balance.size(), kMaxTimelineStages));
  if (r.has("virtual_stages")) {
    run.virtual_stages = static_cast<int>(
        r.at("virtual_stages")
            .integer(1, std::max<int64_t>(1, static_cast<int64_t>(run.balance.size()))));
  }
  for (int64_t delay : r.has("weight_delays")
                           ? r.at("weight_delays").integers(-1, kMaxTimelineMicroBatches)
                           : std::vector<int64_t>{}) {
    run.weight_delays.push_back(static_cast<int>(delay));
  }
  run.devices = r.get_or<std::vector<std::string>>("devices", {});
  run.chunks = static_cast<int>(r.at("chunks").integer(1, kMaxTimelineMicroBatches));
  run.schedule = r.get<std::string>("schedule");
  run.checkpoint = r.get<std::string>("checkpoint");
  // What the run was trained with; earlier writers of pipebal.run/1 left these out.
  if (r.has("threads_per_stage")) {
    run.threads_per_stage = static_cast<int>(r.at("threads_per_stage").integer(0, 4096));
  }
  run.optimizer = r.get_or<std::string>("optimizer", "");
  run.lr = r.number_or_nan("lr");
  run.seed = r.get_or<uint64_t>("seed", 0);
  if (r.has("warmup_steps")) {
    run.warmup_steps = static_cast<int>(r.at("warmup_steps").integer(0, INT32_MAX));
  }
  for (const JsonReader& s : r.at("steps").elements()) {
    // A loss that was not a number (NaN is written as null) stays NaN.
    run.steps.push_back({static_cast<int>(s.at("step").integer(0, INT32_MAX)), read_ms(s.at("ms")),
                         s.number_or_nan("loss")});
  }
  if (r.has("timeline_step") && !run.steps.empty()) {
    run.timeline_step = static_cast<int>(
        r.at("timeline_step").integer(0, static_cast<int64_t>(run.steps.size()) - 1));
  }
  run.median_step_ms = read_ms(r.at("median_step_ms"));
  run.p10_step_ms = read_ms_or_nan(r, "p10_step_ms");
  run.p90_step_ms = read_ms_or_nan(r, "p90_step_ms");
  run.samples_per_s = r.number_or_nan("samples_per_s");
  for (const JsonReader& s :
       r.has("stages") ? r.at("stages").elements() : std::vector<JsonReader>()) {
    StageRun stage;
    stage.index = static_cast<int>(s.at("index").integer(0, stage_count - 1));
    stage.first_layer = static_cast<int>(s.at("first_layer").integer(0, INT32_MAX));
    stage.layers = static_cast<int>(s.at("layers").integer(0, INT32_MAX));
    stage.busy_ms = read_ms(s.at("busy_ms"));
    stage.busy_fraction = s.at("busy_fraction").number(0);
    stage.peak_memory_bytes =
        s.has("peak_memory_bytes") ? s.at("peak_memory_bytes").integer(0) : -1;
    run.stages.push_back(stage);
  }
  run.replicas = static_cast<int>(r.has("replicas") ? r.at("replicas").integer(1, 4096) : 1);
  run.loss = r.get_or<std::string>("loss", "");
  run.data = r.get_or<std::string>("data", "");
  if (r.has("processes")) {
    for (const JsonReader& p : r.at("processes").elements()) {
      ProcessRun process;
      process.rank = static_cast<int>(p.at("rank").integer(0, INT32_MAX));
      process.stage = static_cast<int>(p.at("stage").integer(0, stage_count - 1));
      process.replica = static_cast<int>(p.has("replica") ? p.at("replica").integer(0, 4095) : 0);
      process.host = p.get<std::string>("host");
      process.clock_uncertainty_ms = p.get_or<double>("clock_uncertainty_ms", 0.0);
      process.peak_rss_bytes = p.has("peak_rss_bytes") ? p.at("peak_rss_bytes").integer(0) : -1;
      process.cpu_seconds = p.has("cpu_seconds") ? p.at("cpu_seconds").number(0) : -1;
      if (p.has("shared_memory_peers")) {
        for (const JsonReader& peer : p.at("shared_memory_peers").elements())
          process.shared_memory_peers.push_back(static_cast<int>(peer.integer(0, INT32_MAX)));
      }
      run.processes.push_back(process);
    }
  }
  if (r.has("timeline")) run.timeline = timeline_from_json(r.at("timeline"), stage_count);
  if (r.has("environment")) run.environment = r.at("environment").value();
  return run;
}

int pipeline_ranks(const RunRecord& run) {
  return static_cast<int>(std::count_if(run.processes.begin(), run.processes.end(),
                                        [](const ProcessRun& p) { return p.replica == 0; }));
}

nlohmann::json chrome_trace(const pipeline::Timeline& timeline, const std::string& title,
                            int ranks) {
  nlohmann::json events = nlohmann::json::array();
  int stages = 0;
  for (const auto& t : timeline) stages = std::max(stages, t.stage + 1);
  auto pid = [ranks](int stage) { return ranks > 0 ? stage % ranks : 0; };
  for (int s = 0; s < stages; ++s) {
    if (pid(s) == s) {  // the first stage of its process
      const std::string name = ranks > 0 ? title + ": rank " + std::to_string(s) : title;
      events.push_back(
          {{"name", "process_name"}, {"ph", "M"}, {"pid", pid(s)}, {"args", {{"name", name}}}});
    }
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", pid(s)},
                      {"tid", s},
                      {"args", {{"name", "stage " + std::to_string(s)}}}});
  }
  for (const auto& t : timeline) {
    const std::string kind = pipeline::to_string(t.action.kind);
    events.push_back({{"name", kind + std::to_string(t.action.micro_batch)},
                      {"cat", kind},
                      {"ph", "X"},
                      {"pid", pid(t.stage)},
                      {"tid", t.stage},
                      {"ts", t.start_ms * 1000.0},  // microseconds
                      {"dur", (t.end_ms - t.start_ms) * 1000.0},
                      {"args", {{"micro_batch", t.action.micro_batch}}}});
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace pipebal::reports
