// See profile_json.h.
#include "pipebal/profiler/profile_json.h"

#include <nlohmann/json.hpp>

#include "pipebal/balance/profile_reader.h"
#include "pipebal/common/atomic_file.h"
#include "pipebal/common/schema.h"

namespace pipebal::profiler {
namespace {

// What changes with the micro-batch size: all a layer at another size writes.
nlohmann::json sized_layer_to_json(const LayerProfile& layer) {
  return {
      {"index", layer.index},
      {"forward_ms", layer.forward_ms},
      {"backward_ms", layer.backward_ms},
      {"forward_p10_ms", layer.forward_p10_ms},
      {"forward_p90_ms", layer.forward_p90_ms},
      {"backward_p10_ms", layer.backward_p10_ms},
      {"backward_p90_ms", layer.backward_p90_ms},
      {"weight_ms", layer.weight_ms},
      {"input_grad_ms", layer.input_grad_ms},
      {"kept_grad_bytes", layer.kept_grad_bytes},
      {"weight_held_bytes", layer.weight_held_bytes},
      {"released_output_bytes", layer.released_output_bytes},
      {"weight_peak_bytes", layer.weight_peak_bytes},
      {"peak_bytes", layer.peak_bytes},
      {"backward_peak_bytes", layer.backward_peak_bytes},
      {"activation_bytes", layer.activation_bytes},
      {"input_bytes", layer.input_bytes},
      {"input_grad_bytes", layer.input_grad_bytes},
      {"carried_bytes", layer.carried_bytes},
      {"output_bytes", layer.output_bytes},
  };
}

nlohmann::json layer_to_json(const LayerProfile& layer) {
  nlohmann::json out = sized_layer_to_json(layer);
  out.update({{"name", layer.name},
              {"type", layer.type},
              {"param_bytes", layer.param_bytes},
              {"buffer_bytes", layer.buffer_bytes},
              {"output_shapes", layer.output_shapes},
              {"forward_samples_ms", layer.forward_samples_ms},
              {"backward_samples_ms", layer.backward_samples_ms}});
  return out;
}

nlohmann::json sizes_to_json(const std::vector<Profile::Size>& sizes) {
  nlohmann::json out = nlohmann::json::array();
  for (const Profile::Size& size : sizes) {
    nlohmann::json layers = nlohmann::json::array();
    for (const LayerProfile& layer : size.layers) layers.push_back(sized_layer_to_json(layer));
    out.push_back({{"chunks", size.chunks},
                   {"micro_batch_size", size.micro_batch_size},
                   {"layers", std::move(layers)}});
  }
  return out;
}

}  // namespace

nlohmann::json profile_to_json(const Profile& profile) {
  nlohmann::json layers = nlohmann::json::array();
  double forward_ms = 0, backward_ms = 0;
  int64_t param_bytes = 0, activation_bytes = 0;
  for (const LayerProfile& layer : profile.layers) {
    layers.push_back(layer_to_json(layer));
    forward_ms += layer.forward_ms;
    backward_ms += layer.backward_ms;
    param_bytes += layer.param_bytes;
    activation_bytes += layer.activation_bytes;
  }
  nlohmann::json doc = {
      {"schema", schema_tag("pipebal.profile", 1)},
      {"model", profile.model},
      {"device", profile.device},
      {"backend", profile.backend},
      {"dtype", profile.dtype},
      {"batch_size", profile.batch_size},
      {"micro_batch_size", profile.batch_size},
      {"input_shapes", profile.input_shapes},
      {"chunks", profile.chunks},
      {"mini_batch_size", profile.input_shape.empty() ? 0 : profile.input_shape[0]},
      {"input_shape", profile.input_shape},
      {"environment", environment_to_json(profile.environment)},
      {"totals",
       {{"forward_ms", forward_ms},
        {"backward_ms", backward_ms},
        {"param_bytes", param_bytes},
        {"activation_bytes", activation_bytes}}},
      {"layers", layers},
  };
  if (!profile.sizes.empty()) doc["sizes"] = sizes_to_json(profile.sizes);
  if (!profile.skipped_sizes.empty()) doc["skipped_sizes"] = profile.skipped_sizes;
  if (!profile.inputs.empty()) doc["inputs"] = profile.inputs;
  if (profile.engine) {
    doc["engine"] = {{"step_ms", profile.engine->step_ms},
                     {"action_ms", profile.engine->action_ms},
                     {"handoff_ms", profile.engine->handoff_ms}};
  }
  return doc;
}

balance::CostProfile cost_profile(const Profile& profile) {
  return balance::profile_from_json(profile_to_json(profile));
}

void write_profile(const std::string& path, const Profile& profile) {
  write_file_atomically(path, profile_to_json(profile).dump(2) + "\n");
}

}  // namespace pipebal::profiler
