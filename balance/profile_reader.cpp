// See profile_reader.h.
#include "pipebal/balance/profile_reader.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipebal/balance/input_specs.h"
#include "pipebal/balance/micro_batch_costs.h"
#include "pipebal/common/atomic_file.h"
#include "pipebal/common/json_reader.h"
#include "pipebal/common/machine_load.h"
#include "pipebal/common/schema.h"

namespace pipebal::balance {
namespace {

using nlohmann::json;

constexpr const char* kSchemaName = "pipebal.profile";
constexpr int kSchemaMajor = 1;

constexpr size_t kMaxSizes = 64;
constexpr size_t kMaxInputs = 64;
constexpr int64_t kMaxBatch = int64_t{1} << 40;

// "cpu", "cuda", "cuda:0": the devices a profile is measured on.
bool is_device_name(const std::string& device) {
  const size_t colon = device.find(':');
  const std::string type = device.substr(0, colon);
  if (type != "cpu" && type != "cuda") return false;
  if (colon == std::string::npos) return true;
  const std::string index = device.substr(colon + 1);
  return !index.empty() && index.size() <= 4 &&
         std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// What a layer's costs are at one micro-batch size (the rest does not depend on the size).
void read_size_dependent(const JsonReader& layer, LayerCost& cost) {
  cost.forward_ms = layer.at("forward_ms").number(0);
  cost.backward_ms = layer.at("backward_ms").number(0);
  cost.weight_ms = layer.has("weight_ms") ? layer.at("weight_ms").number(0) : 0.0;
  cost.input_grad_ms = layer.has("input_grad_ms") ? layer.at("input_grad_ms").number(0) : -1.0;
  cost.activation_bytes = layer.at("activation_bytes").integer(0);
  cost.output_bytes = layer.at("output_bytes").integer(0);
  cost.input_bytes = layer.has("input_bytes") ? layer.at("input_bytes").integer(0) : -1;
  cost.input_grad_bytes =
      layer.has("input_grad_bytes") ? layer.at("input_grad_bytes").integer(0) : -1;
  cost.carried_bytes = layer.has("carried_bytes") ? layer.at("carried_bytes").integer(0) : 0;
  cost.kept_grad_bytes = layer.has("kept_grad_bytes") ? layer.at("kept_grad_bytes").integer(0) : 0;
  cost.weight_held_bytes =
      layer.has("weight_held_bytes") ? layer.at("weight_held_bytes").integer(0) : -1;
  cost.released_output_bytes =
      layer.has("released_output_bytes") ? layer.at("released_output_bytes").integer(0) : 0;
  cost.weight_peak_bytes =
      layer.has("weight_peak_bytes") ? layer.at("weight_peak_bytes").integer(0) : 0;
  cost.peak_bytes = layer.has("peak_bytes") ? layer.at("peak_bytes").integer(0) : 0;
  cost.backward_peak_bytes =
      layer.has("backward_peak_bytes") ? layer.at("backward_peak_bytes").integer(0) : -1;
}

// A layer's index, which the profiler writes beside it, says its place in the model: a layer
// moved by hand keeps its own and is caught here, where its costs would go to another layer.
void check_index(const JsonReader& layer, size_t position) {
  if (!layer.has("index")) return;
  const JsonReader index = layer.at("index");
  if (index.integer(0, static_cast<int64_t>(kMaxLayers)) != static_cast<int64_t>(position)) {
    index.fail(fmt::format("is {}, expected {}: layers are listed in model order, from 0",
                           index.value().dump(), position));
  }
}

LayerCost read_layer(const JsonReader& layer) {
  LayerCost cost;
  // A profile made by hand may name no layers: none is made up, as a plan would then hold the
  // made-up names against the model it is trained on.
  cost.name = layer.get_or<std::string>("name", "");
  cost.type = layer.get_or<std::string>("type", "");
  read_size_dependent(layer, cost);
  cost.param_bytes = layer.at("param_bytes").integer(0);
  return cost;
}

// The size of `primary` (the profile's layers) in "sizes" repeats them: a field it gives must
// say the same, or an edit of one would be silently outvoted by the other.
void check_repeats_primary(const JsonReader& layer, size_t index, const LayerCost& primary,
                           const LayerCost& repeated) {
  const std::pair<const char*, double> fields[] = {
      {"forward_ms", repeated.forward_ms - primary.forward_ms},
      {"backward_ms", repeated.backward_ms - primary.backward_ms},
      {"weight_ms", repeated.weight_ms - primary.weight_ms},
      {"input_grad_ms", repeated.input_grad_ms - primary.input_grad_ms},
      {"activation_bytes", double(repeated.activation_bytes - primary.activation_bytes)},
      {"output_bytes", double(repeated.output_bytes - primary.output_bytes)},
      {"input_bytes", double(repeated.input_bytes - primary.input_bytes)},
      {"input_grad_bytes", double(repeated.input_grad_bytes - primary.input_grad_bytes)},
      {"carried_bytes", double(repeated.carried_bytes - primary.carried_bytes)},
      {"kept_grad_bytes", double(repeated.kept_grad_bytes - primary.kept_grad_bytes)},
      {"weight_held_bytes", double(repeated.weight_held_bytes - primary.weight_held_bytes)},
      {"released_output_bytes",
       double(repeated.released_output_bytes - primary.released_output_bytes)},
      {"weight_peak_bytes", double(repeated.weight_peak_bytes - primary.weight_peak_bytes)},
      {"peak_bytes", double(repeated.peak_bytes - primary.peak_bytes)},
      {"backward_peak_bytes", double(repeated.backward_peak_bytes - primary.backward_peak_bytes)},
  };
  for (const auto& [field, difference] : fields) {
    if (difference == 0 || !layer.has(field)) continue;
    layer.at(field).fail(fmt::format(
        "differs from layers[{}].{}, the same layer at the same micro-batch size: edit both, or "
        "remove this size",
        index, field));
  }
}

// One entry of "sizes": the size-dependent fields of every layer at another micro-batch size;
// names and parameters are the primary layers' (measured at `primary_size`).
SizedCosts read_size(const JsonReader& entry, const std::vector<LayerCost>& primary,
                     int64_t primary_size, int64_t mini_batch) {
  SizedCosts sized;
  sized.micro_batch_size = entry.at("micro_batch_size").integer(1, kMaxBatch);
  if (entry.has("chunks")) {  // what the size was measured for: it must say the same size
    const JsonReader chunks = entry.at("chunks");
    const int count = static_cast<int>(chunks.integer(1, 1 << 30));
    if (mini_batch > 0 && micro_batch_size(mini_batch, count) != sized.micro_batch_size) {
      chunks.fail(fmt::format("is {}, but {} samples in {} chunks are micro-batches of {}, not {}",
                              count, mini_batch, count, micro_batch_size(mini_batch, count),
                              sized.micro_batch_size));
    }
  }
  const std::vector<JsonReader> layers = entry.at("layers").elements();
  if (layers.size() != primary.size()) {
    entry.at("layers").fail(
        fmt::format("has {} layers, expected {} (one per layer)", layers.size(), primary.size()));
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    check_index(layers[i], i);
    LayerCost cost = primary[i];
    read_size_dependent(layers[i], cost);
    if (sized.micro_batch_size == primary_size) {
      check_repeats_primary(layers[i], i, primary[i], cost);
    }
    sized.layers.push_back(std::move(cost));
  }
  return sized;
}

// The fields that repeat what others say (as the profiler writes them for readers that look for
// them by these names) must say the same.
void check_size_aliases(const JsonReader& r, CostProfile& profile) {
  if (r.has("micro_batch_size")) {
    const int64_t micro = r.at("micro_batch_size").integer(0, kMaxBatch);
    if (!r.has("batch_size")) {
      profile.batch_size = micro;
    } else if (micro != profile.batch_size) {
      r.at("micro_batch_size")
          .fail(fmt::format("is {}, but batch_size (the same size) is {}", micro,
                            profile.batch_size));
    }
  }
  if (r.has("mini_batch_size") && profile.input_shape.empty() &&
      r.at("mini_batch_size").integer(0, kMaxBatch) > 0) {
    // The mini-batch is read from input_shape, which plans also carry to train on (0 and
    // empty: not said).
    r.at("mini_batch_size").fail("is given without input_shape, the mini-batch's shape: add it");
  }
  if (r.has("mini_batch_size") && !profile.input_shape.empty()) {
    const int64_t mini = r.at("mini_batch_size").integer(0, kMaxBatch);
    if (mini != profile.input_shape.front()) {
      r.at("mini_batch_size")
          .fail(fmt::format("is {}, but input_shape's batch (the same size) is {}", mini,
                            profile.input_shape.front()));
    }
  }
}

}  // namespace

CostProfile profile_from_json(const json& doc, const std::string& file) {
  try {
    check_schema(doc, kSchemaName, kSchemaMajor, /*required=*/false);
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(file + ": " + error.what());
  }
  const JsonReader r(doc, file);
  const std::vector<JsonReader> layers = r.at("layers").elements();
  if (layers.empty()) r.at("layers").fail("is empty");
  CostProfile profile;
  profile.model = r.get_or<std::string>("model", "");
  profile.device = r.get_or<std::string>("device", "");
  if (!profile.device.empty() && !is_device_name(profile.device)) {
    // It decides what the first stage holds (below): one pipebal does not run on is no guess.
    r.at("device").fail(
        fmt::format("is \"{}\", expected cpu or cuda (with :N, or none)", profile.device));
  }
  profile.backend = r.get_or<std::string>("backend", "");
  if (r.has("batch_size")) profile.batch_size = r.at("batch_size").integer(0, kMaxBatch);
  if (r.has("chunks")) profile.chunks = static_cast<int>(r.at("chunks").integer(0, 1 << 30));
  if (r.has("input_shape")) profile.input_shape = r.at("input_shape").integers(1, kMaxBatch);
  check_size_aliases(r, profile);
  // Known together, the mini-batch, its chunks and the micro-batch measured must agree: a plan
  // would otherwise be made for micro-batches the profile never measured.
  const int64_t mini = profile.mini_batch_size();
  if (r.has("chunks") && profile.chunks == 0 && mini > 0) {
    // 0 means "not said"; with a mini-batch it must be said, or no size check could be made.
    r.at("chunks").fail(fmt::format(
        "is 0, but input_shape gives a mini-batch of {} samples: say into how many micro-batches "
        "(1 or more) it was cut",
        mini));
  }
  if (profile.chunks > 0 && mini > 0) {
    if (profile.chunks > mini) {
      r.at("chunks").fail(fmt::format("is more than the {} samples of input_shape", mini));
    }
    const int64_t micro = micro_batch_size(mini, profile.chunks);
    if (profile.batch_size > 0 && profile.batch_size != micro) {
      r.at("batch_size")
          .fail(fmt::format("is {}, but {} samples in {} chunks are micro-batches of {}",
                            profile.batch_size, mini, profile.chunks, micro));
    }
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    check_index(layers[i], i);
    profile.layers.push_back(read_layer(layers[i]));
  }
  // The bounds every plan's costs keep to, said here with the file (the cost model says them
  // too, for costs from elsewhere).
  const auto check_bounds = [&file](const std::vector<LayerCost>& costs, const std::string& where) {
    try {
      validate_layer_costs(costs);
    } catch (const std::invalid_argument& error) {
      throw std::invalid_argument(fmt::format("{}: {}{}", file, where, error.what()));
    }
  };
  check_bounds(profile.layers, "");
  // Every prediction is a ratio of times: with none, speed-ups would be 0/0.
  if (std::all_of(profile.layers.begin(), profile.layers.end(),
                  [](const LayerCost& l) { return l.forward_ms + l.backward_ms == 0; })) {
    r.at("layers").fail("has no cost: every layer's forward_ms and backward_ms is 0");
  }
  if (r.has("inputs")) {
    const JsonReader inputs = r.at("inputs");
    if (inputs.elements().size() > kMaxInputs) {
      inputs.fail(fmt::format("has more than {} input specs", kMaxInputs));
    }
    profile.inputs = inputs.as<std::vector<std::string>>();
    check_input_specs(inputs, profile.inputs, profile.input_shape);
  }
  profile.dtype = r.get_or<std::string>("dtype", "");
  if (!is_float_dtype_name(profile.dtype)) {
    r.at("dtype").fail(fmt::format("is \"{}\", expected {}", profile.dtype, kFloatDtypes));
  }
  // The environment is free-form context: a thread count it gives in range is used, anything
  // else there is only shown.
  if (r.has("environment") && r.at("environment").has("intra_op_threads")) {
    const JsonReader field = r.at("environment").at("intra_op_threads");
    const json& threads = field.value();
    if (threads.is_number_integer() && threads.get<int64_t>() > 0 &&
        threads.get<int64_t>() <= 4096) {
      profile.threads = static_cast<int>(threads.get<int64_t>());
    }
  }
  if (r.has("environment") && r.at("environment").has("machine_load")) {
    // Like the rest of the environment only context: one that is not a load (null, hand-edited)
    // is no load, not an error.
    profile.machine_load = machine_load_from_json(r.at("environment").at("machine_load").value());
  }
  if (r.has("sizes")) {
    const std::vector<JsonReader> sizes = r.at("sizes").elements();
    if (sizes.size() > kMaxSizes) {
      r.at("sizes").fail(fmt::format("has more than {} sizes", kMaxSizes));
    }
    for (size_t k = 0; k < sizes.size(); ++k) {
      profile.sizes.push_back(
          read_size(sizes[k], profile.layers, profile.batch_size, profile.mini_batch_size()));
      check_bounds(profile.sizes.back().layers, fmt::format("sizes[{}]: ", k));
      if (k > 0 && profile.sizes[k].micro_batch_size <= profile.sizes[k - 1].micro_batch_size) {
        sizes[k].at("micro_batch_size").fail("does not ascend: micro-batch sizes must ascend");
      }
    }
    const bool has_primary =
        std::any_of(profile.sizes.begin(), profile.sizes.end(),
                    [&](const SizedCosts& s) { return s.micro_batch_size == profile.batch_size; });
    if (!profile.sizes.empty() && profile.batch_size > 0 && !has_primary) {
      r.at("sizes").fail(
          fmt::format("lacks the batch_size {} its layers were measured at", profile.batch_size));
    }
  }
  if (r.has("skipped_sizes")) {  // sizes the profiler left to interpolation: none measured
    const JsonReader skipped = r.at("skipped_sizes");
    for (const int64_t size : skipped.integers(1, kMaxBatch)) {
      for (const SizedCosts& measured : profile.sizes) {
        if (measured.micro_batch_size == size) {
          skipped.fail(fmt::format(
              "names micro-batch size {}, which sizes measures: a size is measured or skipped",
              size));
        }
      }
    }
  }
  // On the CPU the engine's first stage takes its micro-batches as views of the caller's batch,
  // where an accelerator's takes copies: it holds none of the model's input.
  if (profile.device.rfind("cpu", 0) == 0) {
    profile.layers.front().input_bytes = 0;
    for (SizedCosts& sized : profile.sizes) sized.layers.front().input_bytes = 0;
  }
  if (r.has("engine")) {
    const JsonReader engine = r.at("engine");
    profile.engine = EngineCost{engine.at("step_ms").number(0), engine.at("action_ms").number(0),
                                engine.has("handoff_ms") ? engine.at("handoff_ms").number(0) : 0};
    for (const char* key : {"step_ms", "action_ms", "handoff_ms"}) {
      if (engine.has(key) && engine.at(key).number(0) > kMaxEngineMs) {
        engine.at(key).fail(
            fmt::format("is beyond any real step (more than {:g} ms)", kMaxEngineMs));
      }
    }
  }
  if (r.has("link")) profile.link = link_from_json(r.at("link"));
  return profile;
}

CostProfile read_profile(const std::string& path) {
  return profile_from_json(parse_json(read_file(path), path), path);
}

}  // namespace pipebal::balance
