// See plan.h.
#include "balance/plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "common/schema.h"

namespace pipebal::balance {
namespace {

using nlohmann::json;

constexpr const char* kSchemaName = "pipebal.plan";
constexpr int kSchemaMajor = 1;

// True when `value` is an integer that T holds exactly (json would truncate 2.7 to 2 and wrap
// 1e20 into an int without a word).
template <typename T>
bool holds_integer(const json& value) {
  if (value.is_number_unsigned()) {
    return value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  }
  if (!value.is_number_integer()) return false;
  const int64_t v = value.get<int64_t>();
  return v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max();
}

// Reads `key` of `object` as T, naming `where` and the key when it is missing or mistyped.
template <typename T>
T get(const json& object, const char* key, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end())
    throw std::invalid_argument(fmt::format("plan: missing {}{}", where, key));
  bool integral = true;
  if constexpr (std::is_integral_v<T>) {
    integral = holds_integer<T>(*it);
  } else if constexpr (std::is_same_v<T, std::vector<int>> ||
                       std::is_same_v<T, std::vector<int64_t>>) {
    integral = it->is_array() && std::all_of(it->begin(), it->end(), [](const json& v) {
                 return holds_integer<typename T::value_type>(v);
               });
  }
  if (!integral) {
    throw std::invalid_argument(
        fmt::format("plan: {}{} must hold integers, got {}", where, key, it->dump()));
  }
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw std::invalid_argument(
        fmt::format("plan: {}{} has the wrong type ({})", where, key, it->type_name()));
  }
}

const json& get_array(const json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_array()) {
    throw std::invalid_argument(fmt::format("plan: expected an array \"{}\"", key));
  }
  return *it;
}

json stage_to_json(const StagePlan& stage) {
  json out = {{"first_layer", stage.first_layer},   {"layers", stage.layers},
              {"layer_names", stage.layer_names},   {"time_ms", stage.time_ms},
              {"transfer_ms", stage.transfer_ms},   {"allreduce_ms", stage.allreduce_ms},
              {"memory_bytes", stage.memory_bytes}, {"speed", stage.speed}};
  if (stage.memory_cap_bytes != kUnlimitedBytes) out["memory_cap_bytes"] = stage.memory_cap_bytes;
  return out;
}

StagePlan stage_from_json(const json& in, size_t index) {
  const std::string where = fmt::format("stages[{}].", index);
  if (!in.is_object()) throw std::invalid_argument("plan: " + where + " is not an object");
  StagePlan stage;
  stage.first_layer = get<int>(in, "first_layer", where);
  stage.layers = get<int>(in, "layers", where);
  if (in.contains("layer_names")) {
    stage.layer_names = get<std::vector<std::string>>(in, "layer_names", where);
  }
  stage.time_ms = get<double>(in, "time_ms", where);
  stage.transfer_ms = in.contains("transfer_ms") ? get<double>(in, "transfer_ms", where) : 0.0;
  stage.allreduce_ms = in.contains("allreduce_ms") ? get<double>(in, "allreduce_ms", where) : 0.0;
  stage.memory_bytes = get<int64_t>(in, "memory_bytes", where);
  if (in.contains("memory_cap_bytes")) {
    stage.memory_cap_bytes = get<int64_t>(in, "memory_cap_bytes", where);
  }
  stage.speed = in.contains("speed") ? get<double>(in, "speed", where) : 1.0;
  return stage;
}

}  // namespace

std::vector<int64_t> Plan::device_memory_bytes() const {
  const size_t devices = stages.size() / std::max(virtual_stages, 1);
  std::vector<int64_t> held(devices, 0);
  for (size_t s = 0; s < stages.size(); ++s) {
    // Stage bytes saturate at kUnlimitedBytes; so does their sum.
    held[s % devices] = static_cast<int64_t>(
        std::min<__int128>(__int128{held[s % devices]} + stages[s].memory_bytes, kUnlimitedBytes));
  }
  return held;
}

bool Plan::fits_memory() const {
  const std::vector<int64_t> held = device_memory_bytes();
  for (size_t s = 0; s < stages.size(); ++s) {
    if (held[s % held.size()] > stages[s].memory_cap_bytes) return false;
  }
  return true;
}

SimulationResult simulate_balance(const CostModel& model, const std::vector<int>& balance,
                                  int chunks) {
  pipeline::check_balance(balance, model.layer_count(), model.stage_count());
  const CostOptions& options = model.options();
  const pipeline::Schedule schedule = pipeline::make_schedule(
      options.schedule, model.stage_count(), chunks, options.checkpoint, options.virtual_stages);
  // The mini-batch stays the same: with fewer, larger micro-batches each costs proportionally
  // more time and activation memory than the profiled one.
  const double scale = static_cast<double>(options.chunks) / chunks;
  auto scaled = [scale](int64_t bytes) {
    return static_cast<int64_t>(std::llround(static_cast<double>(bytes) * scale));
  };
  std::vector<StageDurations> durations;
  std::vector<StageMemory> memory;
  std::vector<double> transfer_ms;
  std::vector<double> allreduce_ms;
  int first = 0;
  for (int s = 0; s < model.stage_count(); ++s) {
    const int end = first + balance[s];
    allreduce_ms.push_back(model.allreduce_ms(first, end));
    StageDurations d = model.durations(s, first, end);
    durations.push_back({d.forward_ms * scale, d.recompute_ms * scale, d.backward_ms * scale});
    StageMemory m = model.memory_terms(s, first, end);
    memory.push_back({m.fixed_bytes, scaled(m.input_bytes), scaled(m.activation_bytes)});
    if (end < model.layer_count()) {
      // The bytes scale with the micro-batch; the link's latency does not.
      const double latency = model.options().latency_ms;
      transfer_ms.push_back(latency + (model.transfer_ms(end) - latency) * scale);
    }
    first = end;
  }
  return simulate(schedule, durations, transfer_ms, memory, allreduce_ms);
}

Plan make_plan(const CostModel& model, const std::vector<int>& balance,
               const std::string& algorithm) {
  pipeline::check_balance(balance, model.layer_count(), model.stage_count());
  const CostOptions& options = model.options();
  Plan plan;
  plan.algorithm = algorithm;
  plan.balance = balance;
  plan.chunks = options.chunks;
  plan.schedule = options.schedule;
  plan.virtual_stages = options.virtual_stages;
  plan.checkpoint = options.checkpoint;
  plan.param_scale = options.param_scale;
  plan.bandwidth_bytes_per_ms = options.bandwidth_bytes_per_ms;
  plan.replicas = options.replicas;
  plan.allreduce_bytes_per_ms = options.allreduce_bytes_per_ms;
  int first = 0;
  for (int s = 0; s < model.stage_count(); ++s) {
    const int end = first + balance[s];
    StagePlan stage;
    stage.first_layer = first;
    stage.layers = balance[s];
    for (int l = first; l < end; ++l) stage.layer_names.push_back(model.layers()[l].name);
    stage.time_ms = model.time_ms(s, first, end);
    stage.transfer_ms = model.transfer_ms(end);
    stage.allreduce_ms = model.allreduce_ms(first, end);
    stage.memory_bytes = model.memory_bytes(s, first, end);
    stage.memory_cap_bytes = model.memory_cap_bytes(s);
    stage.speed = model.speed(s);
    plan.bottleneck_ms = std::max(plan.bottleneck_ms, model.cost_ms(s, first, end));
    plan.stages.push_back(stage);
    first = end;
  }
  const SimulationResult pipelined = simulate_balance(model, balance, options.chunks);
  const SimulationResult naive = simulate_balance(model, balance, 1);
  Prediction& p = plan.prediction;
  p.schedule = options.schedule;
  p.chunks = options.chunks;
  p.step_ms = pipelined.step_ms;
  p.naive_step_ms = naive.step_ms;
  p.speedup = pipelined.step_ms > 0 ? naive.step_ms / pipelined.step_ms : 1.0;
  p.bubble_fraction = pipelined.bubble_fraction;
  return plan;
}

json plan_to_json(const Plan& plan) {
  json stages = json::array();
  for (const StagePlan& stage : plan.stages) stages.push_back(stage_to_json(stage));
  const Prediction& p = plan.prediction;
  json doc = {{"schema", schema_tag(kSchemaName, kSchemaMajor)},
              {"model", plan.model},
              {"input_shape", plan.input_shape},
              {"algorithm", plan.algorithm},
              {"balance", plan.balance},
              {"bottleneck_ms", plan.bottleneck_ms},
              {"chunks", plan.chunks},
              {"schedule", pipeline::to_string(plan.schedule)},
              {"checkpoint", pipeline::to_string(plan.checkpoint)},
              {"param_scale", plan.param_scale},
              {"bandwidth_bytes_per_ms", plan.bandwidth_bytes_per_ms},
              {"replicas", plan.replicas},
              {"allreduce_bytes_per_ms", plan.allreduce_bytes_per_ms},
              {"stages", stages},
              {"prediction",
               {{"schedule", pipeline::to_string(p.schedule)},
                {"chunks", p.chunks},
                {"step_ms", p.step_ms},
                {"naive_step_ms", p.naive_step_ms},
                {"speedup", p.speedup},
                {"bubble_fraction", p.bubble_fraction}}}};
  if (plan.threads_per_stage > 0) doc["threads_per_stage"] = plan.threads_per_stage;
  if (!plan.inputs.empty()) doc["inputs"] = plan.inputs;
  if (!plan.dtype.empty()) doc["dtype"] = plan.dtype;
  if (plan.virtual_stages > 1) doc["virtual_stages"] = plan.virtual_stages;
  if (plan.search_nodes > 0) {
    doc["search"] = {{"nodes", plan.search_nodes}, {"exhaustive", plan.search_exhaustive}};
  }
  return doc;
}

Plan plan_from_json(const json& doc) {
  check_schema(doc, kSchemaName, kSchemaMajor, /*required=*/true);
  Plan plan;
  plan.model = doc.contains("model") ? get<std::string>(doc, "model", "") : "";
  if (doc.contains("input_shape")) {
    plan.input_shape = get<std::vector<int64_t>>(doc, "input_shape", "");
  }
  if (doc.contains("inputs")) plan.inputs = get<std::vector<std::string>>(doc, "inputs", "");
  if (doc.contains("dtype")) plan.dtype = get<std::string>(doc, "dtype", "");
  plan.algorithm = get<std::string>(doc, "algorithm", "");
  plan.balance = get<std::vector<int>>(doc, "balance", "");
  if (doc.contains("virtual_stages")) {
    plan.virtual_stages = get<int>(doc, "virtual_stages", "");
    if (plan.virtual_stages < 1 || plan.virtual_stages > static_cast<int>(plan.balance.size())) {
      throw std::invalid_argument(fmt::format("plan: \"virtual_stages\" is {}, expected 1 to {}",
                                              plan.virtual_stages, plan.balance.size()));
    }
  }
  plan.bottleneck_ms = get<double>(doc, "bottleneck_ms", "");
  plan.chunks = get<int>(doc, "chunks", "");
  plan.schedule = pipeline::parse_schedule_kind(get<std::string>(doc, "schedule", ""));
  plan.checkpoint = pipeline::parse_checkpoint_mode(get<std::string>(doc, "checkpoint", ""));
  plan.param_scale = get<double>(doc, "param_scale", "");
  if (doc.contains("bandwidth_bytes_per_ms")) {
    plan.bandwidth_bytes_per_ms = get<double>(doc, "bandwidth_bytes_per_ms", "");
  }
  if (doc.contains("replicas")) {
    plan.replicas = get<int>(doc, "replicas", "");
    if (plan.replicas < 1 || plan.replicas > 4096) {
      throw std::invalid_argument(
          fmt::format("plan: replicas is {}, expected 1 to 4096", plan.replicas));
    }
  }
  if (doc.contains("allreduce_bytes_per_ms")) {
    plan.allreduce_bytes_per_ms = get<double>(doc, "allreduce_bytes_per_ms", "");
  }
  if (doc.contains("threads_per_stage")) {
    plan.threads_per_stage = get<int>(doc, "threads_per_stage", "");
    if (plan.threads_per_stage < 0 || plan.threads_per_stage > 4096) {
      throw std::invalid_argument(
          fmt::format("plan: threads_per_stage is {}, expected 0 to 4096", plan.threads_per_stage));
    }
  }
  const json& stages = get_array(doc, "stages");
  for (size_t s = 0; s < stages.size(); ++s) plan.stages.push_back(stage_from_json(stages[s], s));
  if (plan.stages.size() != plan.balance.size()) {
    throw std::invalid_argument(fmt::format("plan: {} stages but balance has {} entries",
                                            plan.stages.size(), plan.balance.size()));
  }
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    if (plan.stages[s].layers != plan.balance[s]) {
      throw std::invalid_argument(fmt::format("plan: stages[{}].layers is {} but balance[{}] is {}",
                                              s, plan.stages[s].layers, s, plan.balance[s]));
    }
  }
  const auto prediction = doc.find("prediction");
  if (prediction == doc.end() || !prediction->is_object()) {
    throw std::invalid_argument("plan: missing prediction");
  }
  Prediction& p = plan.prediction;
  const std::string where = "prediction.";
  p.schedule = pipeline::parse_schedule_kind(get<std::string>(*prediction, "schedule", where));
  p.chunks = get<int>(*prediction, "chunks", where);
  p.step_ms = get<double>(*prediction, "step_ms", where);
  p.naive_step_ms = get<double>(*prediction, "naive_step_ms", where);
  p.speedup = get<double>(*prediction, "speedup", where);
  p.bubble_fraction = get<double>(*prediction, "bubble_fraction", where);
  return plan;
}

void write_plan(const std::string& path, const Plan& plan) {
  write_file_atomically(path, plan_to_json(plan).dump(2) + "\n");
}

Plan read_plan(const std::string& path) {
  const json doc = parse_json(read_file(path), path);
  try {
    return plan_from_json(doc);
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(path + ": " + error.what());
  }
}

}  // namespace pipebal::balance
