// See plan.h.
#include "pipebal/balance/plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "pipebal/balance/input_specs.h"
#include "pipebal/balance/micro_batch_costs.h"
#include "pipebal/common/atomic_file.h"
#include "pipebal/common/json_reader.h"
#include "pipebal/common/parse_integers.h"
#include "pipebal/common/schema.h"

namespace pipebal::balance {
namespace {

using nlohmann::json;

constexpr const char* kSchemaName = "pipebal.plan";
constexpr int kSchemaMajor = 1;

json stage_to_json(const StagePlan& stage) {
  json out = {{"first_layer", stage.first_layer},
              {"layers", stage.layers},
              {"layer_names", stage.layer_names},
              {"time_ms", stage.time_ms},
              {"transfer_ms", stage.transfer_ms},
              {"allreduce_ms", stage.allreduce_ms},
              {"memory_bytes", stage.memory_bytes},
              {"timed_memory_bytes", stage.timed_memory_bytes},
              {"speed", stage.speed}};
  if (stage.memory_cap_bytes != kUnlimitedBytes) out["memory_cap_bytes"] = stage.memory_cap_bytes;
  return out;
}

// Far beyond any plan pipebal makes; a count read from a file must not size anything absurd.
constexpr int64_t kMaxCount = int64_t{1} << 30;

int read_count(const JsonReader& value, int64_t min, int64_t max = kMaxCount) {
  return static_cast<int>(value.integer(min, max));
}

StagePlan stage_from_json(const JsonReader& in) {
  StagePlan stage;
  stage.first_layer = read_count(in.at("first_layer"), 0);
  stage.layers = read_count(in.at("layers"), 1);
  stage.layer_names = in.get_or<std::vector<std::string>>("layer_names", {});
  stage.time_ms = in.at("time_ms").number(0);
  stage.transfer_ms = in.has("transfer_ms") ? in.at("transfer_ms").number(0) : 0.0;
  stage.allreduce_ms = in.has("allreduce_ms") ? in.at("allreduce_ms").number(0) : 0.0;
  stage.memory_bytes = in.at("memory_bytes").integer(0);
  stage.timed_memory_bytes = in.has("timed_memory_bytes")
                                 ? in.at("timed_memory_bytes").integer(stage.memory_bytes)
                                 : stage.memory_bytes;
  if (in.has("memory_cap_bytes")) stage.memory_cap_bytes = in.at("memory_cap_bytes").integer(0);
  stage.speed = in.has("speed") ? in.at("speed").number(0) : 1.0;
  return stage;
}

template <typename Parse>
auto parse_field(const JsonReader& value, Parse parse) {
  const std::string text = value.as<std::string>();  // its own error names the field
  try {
    return parse(text);
  } catch (const std::invalid_argument& error) {
    value.fail(std::string("is not valid: ") + error.what());
  }
}

// Each device's sum of one of its stages' byte counts.
std::vector<int64_t> per_device(const Plan& plan, int64_t StagePlan::*bytes) {
  const size_t devices = plan.stages.size() / std::max(plan.virtual_stages, 1);
  std::vector<int64_t> held(devices, 0);
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    // Stage bytes saturate at kUnlimitedBytes; so does their sum.
    held[s % devices] = static_cast<int64_t>(
        std::min<__int128>(__int128{held[s % devices]} + plan.stages[s].*bytes, kUnlimitedBytes));
  }
  return held;
}

}  // namespace

std::vector<int64_t> Plan::device_memory_bytes() const {
  return per_device(*this, &StagePlan::memory_bytes);
}

std::vector<int64_t> Plan::device_timed_memory_bytes() const {
  return per_device(*this, &StagePlan::timed_memory_bytes);
}

bool Plan::fits_memory() const {
  const std::vector<int64_t> held = device_timed_memory_bytes();
  for (size_t s = 0; s < stages.size(); ++s) {
    if (held[s % held.size()] > stages[s].memory_cap_bytes) return false;
  }
  return true;
}

SimulationResult simulate_balance(const CostModel& model, const std::vector<int>& balance,
                                  int chunks) {
  pipeline::check_balance(balance, model.layer_count(), model.stage_count());
  const CostOptions& options = model.options();
  // The delays stay as many micro-batches (at most all of them: make_schedule).
  const pipeline::Schedule schedule =
      pipeline::make_schedule(options.schedule, model.stage_count(), chunks, options.checkpoint,
                              options.virtual_stages, model.schedule().weight_delays);
  // The mini-batch stays the same: with fewer, larger micro-batches each costs proportionally
  // more time and activation memory than the profiled one.
  const double scale = static_cast<double>(options.chunks) / chunks;
  auto scaled = [scale](int64_t bytes) {
    return static_cast<int64_t>(std::llround(static_cast<double>(bytes) * scale));
  };
  std::vector<StageDurations> durations;
  std::vector<StageMemory> memory;
  std::vector<double> transfer_ms;
  std::vector<double> finish_ms;
  int first = 0;
  for (int s = 0; s < model.stage_count(); ++s) {
    const int end = first + balance[s];
    // A device's finishing work runs after its last action, its stages' all-reduces one after
    // another (the engine averages all of a process's stages at once); the engine's cost per
    // step counts once per device.
    finish_ms.push_back(model.allreduce_ms(first, end) +
                        (s < schedule.devices() ? options.engine.step_ms : 0.0));
    durations.push_back(model.durations(s, first, end, scale));
    StageMemory m = model.memory_terms(s, first, end);
    for (int64_t* bytes : {&m.input_bytes, &m.activation_bytes, &m.weight_bytes, &m.backward_bytes,
                           &m.weight_run_bytes, &m.output_bytes, &m.input_grad_bytes}) {
      *bytes = scaled(*bytes);  // per micro-batch (plans take the peaks at scale 1)
    }
    memory.push_back(m);
    if (end < model.layer_count()) {
      // The bytes scale with the micro-batch; the latency and the hand-off do not.
      const double latency = model.message_latency_ms();
      transfer_ms.push_back(latency + (model.transfer_ms(end) - latency) * scale);
    }
    first = end;
  }
  return simulate(schedule, durations, transfer_ms, memory, finish_ms);
}

namespace {

// The options the plan was priced with, less the profile's engine costs.
CostOptions cost_options_of(const Plan& plan) {
  CostOptions options;
  options.schedule = plan.schedule;
  options.virtual_stages = plan.virtual_stages;
  options.weight_delays = plan.weight_delays;
  options.checkpoint = plan.checkpoint;
  options.chunks = plan.chunks;
  options.param_scale = plan.param_scale;
  for (const StagePlan& stage : plan.stages) options.device_speeds.push_back(stage.speed);
  options.bandwidth_bytes_per_ms = plan.bandwidth_bytes_per_ms;
  options.latency_ms = plan.latency_ms;
  options.replicas = plan.replicas;
  options.allreduce_bytes_per_ms = plan.allreduce_bytes_per_ms;
  return options;
}

}  // namespace

Plan reprice_plan(const CostProfile& profile, const Plan& plan) {
  const int64_t layers = std::accumulate(plan.balance.begin(), plan.balance.end(), int64_t{0});
  if (layers != static_cast<int64_t>(profile.layers.size())) {
    throw std::invalid_argument(
        fmt::format("the plan's balance [{}] covers {} layers, the profile of {} has {}",
                    fmt::join(plan.balance, ","), layers, profile.model, profile.layers.size()));
  }
  if (!plan.input_shape.empty() && !profile.input_shape.empty() &&
      plan.input_shape != profile.input_shape) {
    throw std::invalid_argument(
        fmt::format("the plan is for the input shape [{}], the profile for [{}]",
                    fmt::join(plan.input_shape, ","), fmt::join(profile.input_shape, ",")));
  }
  CostOptions options = cost_options_of(plan);
  if (profile.engine) options.engine = *profile.engine;
  const CostModel model = cost_model_for(profile, static_cast<int>(plan.balance.size()), options);
  Plan priced = make_plan(model, plan.balance, plan.algorithm);
  priced.model = plan.model;
  priced.input_shape = plan.input_shape;
  priced.inputs = plan.inputs;
  priced.dtype = plan.dtype;
  priced.threads_per_stage = plan.threads_per_stage;
  return priced;
}

std::vector<int> parse_balance(const std::string& text) {
  const auto counts = parse_integer_list(text);
  if (!counts || std::any_of(counts->begin(), counts->end(), [](int64_t c) {
        return c < std::numeric_limits<int>::min() || c > std::numeric_limits<int>::max();
      })) {
    throw std::invalid_argument(
        fmt::format("balance '{}': expected layer counts separated by commas, e.g. 3,3,2", text));
  }
  return {counts->begin(), counts->end()};
}

namespace {

// `balance` with the whole mini-batch as one micro-batch: at the whole batch's own costs where
// the model has them, else the planned micro-batch's scaled.
SimulationResult simulate_one_micro_batch(const CostModel& model, const std::vector<int>& balance) {
  if (model.whole_batch_layers().empty()) return simulate_balance(model, balance, 1);
  CostOptions options = model.options();
  options.chunks = 1;
  const CostModel whole(model.whole_batch_layers(), model.stage_count(), options);
  return simulate_balance(whole, balance, 1);
}

}  // namespace

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
  plan.weight_delays = model.schedule().weight_delays;
  plan.checkpoint = options.checkpoint;
  plan.param_scale = options.param_scale;
  plan.bandwidth_bytes_per_ms = options.bandwidth_bytes_per_ms;
  plan.latency_ms = options.latency_ms;
  plan.replicas = options.replicas;
  plan.allreduce_bytes_per_ms = options.allreduce_bytes_per_ms;
  // Names are checked against the model a plan trains: only a profile that names every layer
  // gives them.
  const bool named = std::none_of(model.layers().begin(), model.layers().end(),
                                  [](const LayerCost& layer) { return layer.name.empty(); });
  int first = 0;
  for (int s = 0; s < model.stage_count(); ++s) {
    const int end = first + balance[s];
    StagePlan stage;
    stage.first_layer = first;
    stage.layers = balance[s];
    for (int l = first; l < end && named; ++l) {
      stage.layer_names.push_back(model.layers()[l].name);
    }
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
  const SimulationResult naive = simulate_one_micro_batch(model, balance);
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    plan.stages[s].timed_memory_bytes = pipelined.timed_peak_bytes[s];
  }
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
  if (plan.latency_ms > 0) doc["latency_ms"] = plan.latency_ms;
  if (plan.threads_per_stage > 0) doc["threads_per_stage"] = plan.threads_per_stage;
  if (!plan.inputs.empty()) doc["inputs"] = plan.inputs;
  if (!plan.dtype.empty()) doc["dtype"] = plan.dtype;
  if (plan.virtual_stages > 1) doc["virtual_stages"] = plan.virtual_stages;
  if (!plan.weight_delays.empty()) doc["weight_delays"] = plan.weight_delays;
  if (plan.search_nodes > 0) {
    doc["search"] = {{"nodes", plan.search_nodes}, {"exhaustive", plan.search_exhaustive}};
  }
  return doc;
}

std::vector<std::string> Plan::layer_names() const {
  std::vector<std::string> names;
  for (const StagePlan& stage : stages) {
    if (stage.layer_names.size() != static_cast<size_t>(stage.layers)) return {};
    names.insert(names.end(), stage.layer_names.begin(), stage.layer_names.end());
  }
  return names;
}

Plan plan_from_json(const json& doc, const std::string& file) {
  try {
    check_schema(doc, kSchemaName, kSchemaMajor, /*required=*/true);
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(file + ": " + error.what());
  }
  const JsonReader r(doc, file);
  Plan plan;
  plan.model = r.get_or<std::string>("model", "");
  if (r.has("input_shape")) plan.input_shape = r.at("input_shape").integers(1);
  plan.inputs = r.get_or<std::vector<std::string>>("inputs", {});
  if (r.has("inputs")) check_input_specs(r.at("inputs"), plan.inputs, plan.input_shape);
  plan.dtype = r.get_or<std::string>("dtype", "");
  if (!is_float_dtype_name(plan.dtype)) {
    r.at("dtype").fail(fmt::format("is \"{}\", expected {}", plan.dtype, kFloatDtypes));
  }
  plan.algorithm = r.get<std::string>("algorithm");
  for (int64_t layers : r.at("balance").integers(1, kMaxCount))
    plan.balance.push_back(static_cast<int>(layers));
  if (r.has("virtual_stages")) {
    plan.virtual_stages =
        read_count(r.at("virtual_stages"), 1, std::max<int64_t>(1, plan.balance.size()));
  }
  plan.bottleneck_ms = r.at("bottleneck_ms").number(0);
  plan.chunks = read_count(r.at("chunks"), 1);
  plan.schedule = parse_field(r.at("schedule"), pipeline::parse_schedule_kind);
  plan.checkpoint = parse_field(r.at("checkpoint"), pipeline::parse_checkpoint_mode);
  if (r.has("weight_delays")) {
    const JsonReader delays = r.at("weight_delays");
    if (plan.schedule != pipeline::ScheduleKind::kZeroBubbleH1) {
      delays.fail("goes with the zb-h1 schedule, not " + pipeline::to_string(plan.schedule));
    }
    for (int64_t delay : delays.integers(pipeline::kWholeBackward, plan.chunks)) {
      plan.weight_delays.push_back(static_cast<int>(delay));
    }
    if (plan.weight_delays.size() != plan.balance.size()) {
      delays.fail(fmt::format("has {} entries but balance has {}", plan.weight_delays.size(),
                              plan.balance.size()));
    }
  }
  plan.param_scale = r.at("param_scale").number(0);
  if (r.has("bandwidth_bytes_per_ms")) {
    plan.bandwidth_bytes_per_ms = r.at("bandwidth_bytes_per_ms").number(0);
  }
  if (r.has("latency_ms")) plan.latency_ms = r.at("latency_ms").number(0);
  if (r.has("replicas")) plan.replicas = read_count(r.at("replicas"), 1, 4096);
  if (r.has("allreduce_bytes_per_ms")) {
    plan.allreduce_bytes_per_ms = r.at("allreduce_bytes_per_ms").number(0);
  }
  if (r.has("threads_per_stage"))
    plan.threads_per_stage = read_count(r.at("threads_per_stage"), 0, 4096);
  if (r.has("search")) {
    const JsonReader search = r.at("search");
    plan.search_nodes = search.at("nodes").integer(0);
    plan.search_exhaustive = search.get<bool>("exhaustive");
  }
  const std::vector<JsonReader> stages = r.at("stages").elements();
  for (const JsonReader& stage : stages) plan.stages.push_back(stage_from_json(stage));
  if (plan.stages.size() != plan.balance.size()) {
    r.at("stages").fail(fmt::format("has {} stages but balance has {} entries", plan.stages.size(),
                                    plan.balance.size()));
  }
  // The stages must be the balance, laid end to end, each naming its own layers (or none, as
  // plans from before names were kept): a hand edit must not make train skip the name check.
  int first = 0;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const StagePlan& stage = plan.stages[s];
    if (stage.layers != plan.balance[s]) {
      stages[s].at("layers").fail(
          fmt::format("is {} but balance[{}] is {}", stage.layers, s, plan.balance[s]));
    }
    if (stage.first_layer != first) {
      stages[s]
          .at("first_layer")
          .fail(fmt::format("is {} but the stages before it hold layers 0 to {}", stage.first_layer,
                            first - 1));
    }
    if (!stage.layer_names.empty() &&
        stage.layer_names.size() != static_cast<size_t>(stage.layers)) {
      stages[s]
          .at("layer_names")
          .fail(fmt::format("has {} names for {} layers", stage.layer_names.size(), stage.layers));
    }
    first += stage.layers;
  }
  const JsonReader prediction = r.at("prediction");
  Prediction& p = plan.prediction;
  p.schedule = parse_field(prediction.at("schedule"), pipeline::parse_schedule_kind);
  p.chunks = read_count(prediction.at("chunks"), 1);
  if (p.schedule != plan.schedule) {
    prediction.at("schedule")
        .fail("is not the plan's schedule, " + pipeline::to_string(plan.schedule));
  }
  if (p.chunks != plan.chunks) {
    prediction.at("chunks").fail(fmt::format("is not the plan's chunks, {}", plan.chunks));
  }
  p.step_ms = prediction.at("step_ms").number(0);
  p.naive_step_ms = prediction.at("naive_step_ms").number(0);
  p.speedup = prediction.at("speedup").number(0);
  p.bubble_fraction = prediction.at("bubble_fraction").number();
  // What repricing it would refuse, refused now: not after a run has been spent on the plan.
  try {
    check_cost_options(cost_options_of(plan));
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(file + ": " + error.what());
  }
  return plan;
}

void write_plan(const std::string& path, const Plan& plan) {
  write_file_atomically(path, plan_to_json(plan).dump(2) + "\n");
}

Plan read_plan(const std::string& path) {
  return plan_from_json(parse_json(read_file(path), path), path);
}

}  // namespace pipebal::balance
