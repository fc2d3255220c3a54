// See run_record.h.
#include "reports/run_record.h"

#include "common/schema.h"

namespace pipebal::reports {

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

pipeline::Timeline timeline_from_json(const nlohmann::json& events) {
  pipeline::Timeline timeline;
  try {
    for (const auto& e : events) {
      pipeline::TimedAction t;
      t.stage = e.at("stage").get<int>();
      t.action.kind = pipeline::parse_action_kind(e.at("action").get<std::string>());
      t.action.micro_batch = e.at("micro_batch").get<int>();
      t.start_ms = e.at("start_ms").get<double>();
      t.end_ms = e.at("end_ms").get<double>();
      timeline.push_back(t);
    }
  } catch (const nlohmann::json::exception& error) {
    throw std::invalid_argument(std::string("timeline: ") + error.what());
  }
  return timeline;
}

nlohmann::json run_to_json(const RunRecord& run) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : run.steps)
    steps.push_back({{"step", s.step}, {"ms", s.ms}, {"loss", s.loss}});
  nlohmann::json processes = nlohmann::json::array();
  for (const auto& p : run.processes) {
    processes.push_back({{"rank", p.rank},
                         {"stage", p.stage},
                         {"replica", p.replica},
                         {"host", p.host},
                         {"clock_uncertainty_ms", p.clock_uncertainty_ms},
                         {"peak_rss_bytes", p.peak_rss_bytes >= 0 ? nlohmann::json(p.peak_rss_bytes)
                                                                  : nlohmann::json()}});
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
  return doc;
}

RunRecord run_from_json(const nlohmann::json& doc) {
  check_schema(doc, "pipebal.run", 1, /*required=*/true);
  RunRecord run;
  try {
    run.model = doc.at("model").get<std::string>();
    run.input_shape = doc.at("input_shape").get<std::vector<int64_t>>();
    if (doc.contains("inputs")) run.inputs = doc.at("inputs").get<std::vector<std::string>>();
    if (doc.contains("dtype")) run.dtype = doc.at("dtype").get<std::string>();
    if (doc.contains("virtual_stages")) run.virtual_stages = doc.at("virtual_stages").get<int>();
    run.balance = doc.at("balance").get<std::vector<int>>();
    run.devices = doc.at("devices").get<std::vector<std::string>>();
    run.chunks = doc.at("chunks").get<int>();
    run.schedule = doc.at("schedule").get<std::string>();
    run.checkpoint = doc.at("checkpoint").get<std::string>();
    run.threads_per_stage = doc.at("threads_per_stage").get<int>();
    run.optimizer = doc.at("optimizer").get<std::string>();
    run.lr = doc.at("lr").get<double>();
    run.seed = doc.at("seed").get<uint64_t>();
    run.warmup_steps = doc.at("warmup_steps").get<int>();
    for (const auto& s : doc.at("steps")) {
      run.steps.push_back(
          {s.at("step").get<int>(), s.at("ms").get<double>(), s.at("loss").get<double>()});
    }
    run.median_step_ms = doc.at("median_step_ms").get<double>();
    run.p10_step_ms = doc.at("p10_step_ms").get<double>();
    run.p90_step_ms = doc.at("p90_step_ms").get<double>();
    run.samples_per_s = doc.at("samples_per_s").get<double>();
    for (const auto& s : doc.at("stages")) {
      StageRun stage;
      stage.index = s.at("index").get<int>();
      stage.first_layer = s.at("first_layer").get<int>();
      stage.layers = s.at("layers").get<int>();
      stage.busy_ms = s.at("busy_ms").get<double>();
      stage.busy_fraction = s.at("busy_fraction").get<double>();
      const auto& peak = s.at("peak_memory_bytes");
      stage.peak_memory_bytes = peak.is_null() ? -1 : peak.get<int64_t>();
      run.stages.push_back(stage);
    }
    run.replicas = doc.value("replicas", 1);
    run.loss = doc.value("loss", "");
    run.data = doc.value("data", "");
    if (doc.contains("processes")) {
      for (const auto& p : doc.at("processes")) {
        ProcessRun process;
        process.rank = p.at("rank").get<int>();
        process.stage = p.at("stage").get<int>();
        process.replica = p.value("replica", 0);
        process.host = p.at("host").get<std::string>();
        process.clock_uncertainty_ms = p.value("clock_uncertainty_ms", 0.0);
        const auto& rss = p.at("peak_rss_bytes");
        process.peak_rss_bytes = rss.is_null() ? -1 : rss.get<int64_t>();
        run.processes.push_back(process);
      }
    }
    run.timeline = timeline_from_json(doc.at("timeline"));
    run.environment = doc.value("environment", nlohmann::json::object());
  } catch (const nlohmann::json::exception& error) {
    throw std::invalid_argument(std::string("run: ") + error.what());
  }
  return run;
}

nlohmann::json chrome_trace(const pipeline::Timeline& timeline, const std::string& title,
                            bool process_per_stage) {
  nlohmann::json events = nlohmann::json::array();
  int stages = 0;
  for (const auto& t : timeline) stages = std::max(stages, t.stage + 1);
  auto pid = [process_per_stage](int stage) { return process_per_stage ? stage : 0; };
  for (int s = 0; s < stages; ++s) {
    if (s == 0 || process_per_stage) {
      const std::string name = process_per_stage ? title + ": rank " + std::to_string(s) : title;
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
