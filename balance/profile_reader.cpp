// See profile_reader.h.
#include "balance/profile_reader.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "common/schema.h"

namespace pipebal::balance {
namespace {

using nlohmann::json;

constexpr const char* kSchemaName = "pipebal.profile";
constexpr int kSchemaMajor = 1;

const json& field(const json& layer, size_t index, const char* name) {
  const auto it = layer.find(name);
  if (it == layer.end()) {
    throw std::invalid_argument(fmt::format("layers[{}]: missing \"{}\"", index, name));
  }
  return *it;
}

double read_ms(const json& layer, size_t index, const char* name) {
  const json& value = field(layer, index, name);
  if (!value.is_number()) {
    throw std::invalid_argument(
        fmt::format("layers[{}].{}: expected a number, got {}", index, name, value.type_name()));
  }
  const double ms = value.get<double>();
  if (!std::isfinite(ms) || ms < 0) {
    throw std::invalid_argument(
        fmt::format("layers[{}].{}: {} is not a finite value >= 0", index, name, ms));
  }
  return ms;
}

int64_t read_bytes(const json& layer, size_t index, const char* name) {
  const json& value = field(layer, index, name);
  if (value.is_number_unsigned() || value.is_number_integer()) {
    const int64_t bytes = value.get<int64_t>();
    if (bytes >= 0) return bytes;
  } else if (value.is_number_float()) {
    // Tools that write every number as a double (e.g. 1048576.0) are accepted when integral.
    const double bytes = value.get<double>();
    if (std::isfinite(bytes) && bytes >= 0 && bytes < 9.2e18 && std::floor(bytes) == bytes) {
      return static_cast<int64_t>(bytes);
    }
  } else {
    throw std::invalid_argument(
        fmt::format("layers[{}].{}: expected an integer, got {}", index, name, value.type_name()));
  }
  throw std::invalid_argument(
      fmt::format("layers[{}].{}: {} is not an integer >= 0", index, name, value.dump()));
}

std::string read_optional_string(const json& object, const char* name, std::string fallback,
                                 const std::string& where) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_string()) {
    throw std::invalid_argument(
        fmt::format("{}{}: expected a string, got {}", where, name, it->type_name()));
  }
  return it->get<std::string>();
}

LayerCost read_layer(const json& layer, size_t index) {
  if (!layer.is_object()) {
    throw std::invalid_argument(
        fmt::format("layers[{}]: expected an object, got {}", index, layer.type_name()));
  }
  const std::string where = fmt::format("layers[{}].", index);
  LayerCost cost;
  cost.name = read_optional_string(layer, "name", fmt::format("layer{}", index), where);
  cost.type = read_optional_string(layer, "type", "", where);
  cost.forward_ms = read_ms(layer, index, "forward_ms");
  cost.backward_ms = read_ms(layer, index, "backward_ms");
  cost.param_bytes = read_bytes(layer, index, "param_bytes");
  cost.activation_bytes = read_bytes(layer, index, "activation_bytes");
  cost.output_bytes = read_bytes(layer, index, "output_bytes");
  return cost;
}

// One entry of "sizes": the size-dependent fields of every layer at another micro-batch size;
// names and parameters are the primary layers'.
SizedCosts read_size(const json& entry, size_t k, const std::vector<LayerCost>& primary) {
  const std::string where = fmt::format("profile: sizes[{}]", k);
  if (!entry.is_object()) throw std::invalid_argument(where + ": expected an object");
  const auto size = entry.find("micro_batch_size");
  if (size == entry.end() || !size->is_number_integer() || size->get<int64_t>() < 1 ||
      size->get<int64_t>() > (int64_t{1} << 40)) {
    throw std::invalid_argument(where + ": expected \"micro_batch_size\", a positive integer");
  }
  const auto layers = entry.find("layers");
  if (layers == entry.end() || !layers->is_array() || layers->size() != primary.size()) {
    throw std::invalid_argument(fmt::format(
        "{}: expected \"layers\", an array of {} (one per layer)", where, primary.size()));
  }
  SizedCosts sized;
  sized.micro_batch_size = size->get<int64_t>();
  try {
    for (size_t i = 0; i < layers->size(); ++i) {
      const json& layer = (*layers)[i];
      if (!layer.is_object()) {
        throw std::invalid_argument(fmt::format("layers[{}]: expected an object", i));
      }
      LayerCost cost = primary[i];
      cost.forward_ms = read_ms(layer, i, "forward_ms");
      cost.backward_ms = read_ms(layer, i, "backward_ms");
      cost.activation_bytes = read_bytes(layer, i, "activation_bytes");
      cost.output_bytes = read_bytes(layer, i, "output_bytes");
      sized.layers.push_back(std::move(cost));
    }
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(where + "." + error.what());
  }
  return sized;
}

constexpr size_t kMaxSizes = 64;

}  // namespace

CostProfile profile_from_json(const json& doc) {
  check_schema(doc, kSchemaName, kSchemaMajor, /*required=*/false);
  const auto layers = doc.find("layers");
  if (layers == doc.end() || !layers->is_array()) {
    throw std::invalid_argument("profile: expected a \"layers\" array");
  }
  if (layers->empty()) throw std::invalid_argument("profile: \"layers\" is empty");
  CostProfile profile;
  profile.model = read_optional_string(doc, "model", "", "");
  const auto batch_size = doc.find("batch_size");
  if (batch_size != doc.end() && batch_size->is_number_integer()) {
    profile.batch_size = batch_size->get<int64_t>();
  }
  const auto chunks = doc.find("chunks");
  if (chunks != doc.end() && chunks->is_number_integer() && chunks->get<int64_t>() > 0) {
    profile.chunks = static_cast<int>(std::min<int64_t>(chunks->get<int64_t>(), 1 << 30));
  }
  const auto input_shape = doc.find("input_shape");
  if (input_shape != doc.end() && input_shape->is_array()) {
    for (const auto& d : *input_shape) {
      if (!d.is_number_integer() || d.get<int64_t>() < 1) {
        throw std::invalid_argument("profile: \"input_shape\" must hold positive integers");
      }
      profile.input_shape.push_back(d.get<int64_t>());
    }
  }
  for (size_t i = 0; i < layers->size(); ++i) profile.layers.push_back(read_layer((*layers)[i], i));
  const auto inputs = doc.find("inputs");
  if (inputs != doc.end() && !inputs->is_null()) {
    if (!inputs->is_array() || inputs->size() > 64 ||
        !std::all_of(inputs->begin(), inputs->end(), [](const json& s) { return s.is_string(); })) {
      throw std::invalid_argument("profile: \"inputs\" must be an array of input specs");
    }
    profile.inputs = inputs->get<std::vector<std::string>>();
  }
  const auto dtype = doc.find("dtype");
  if (dtype != doc.end() && !dtype->is_null() &&
      !(dtype->is_string() && dtype->get<std::string>().empty())) {
    static const std::vector<std::string> floating = {"float32", "float64", "float16", "bfloat16"};
    if (!dtype->is_string() ||
        std::find(floating.begin(), floating.end(), dtype->get<std::string>()) == floating.end()) {
      throw std::invalid_argument(
          "profile: \"dtype\" must be float32, float64, float16 or bfloat16");
    }
    profile.dtype = dtype->get<std::string>();
  }
  const auto environment = doc.find("environment");
  if (environment != doc.end() && environment->is_object()) {
    const auto threads = environment->find("intra_op_threads");
    if (threads != environment->end() && threads->is_number_integer() &&
        threads->get<int64_t>() > 0 && threads->get<int64_t>() <= 4096) {
      profile.threads = static_cast<int>(threads->get<int64_t>());
    }
  }
  const auto sizes = doc.find("sizes");
  if (sizes != doc.end() && !sizes->is_null()) {
    if (!sizes->is_array() || sizes->size() > kMaxSizes) {
      throw std::invalid_argument(
          fmt::format("profile: \"sizes\" must be an array of at most {} sizes", kMaxSizes));
    }
    for (size_t k = 0; k < sizes->size(); ++k) {
      profile.sizes.push_back(read_size((*sizes)[k], k, profile.layers));
      if (k > 0 && profile.sizes[k].micro_batch_size <= profile.sizes[k - 1].micro_batch_size) {
        throw std::invalid_argument(
            fmt::format("profile: sizes[{}]: micro-batch sizes must ascend", k));
      }
    }
    const bool has_primary =
        std::any_of(profile.sizes.begin(), profile.sizes.end(),
                    [&](const SizedCosts& s) { return s.micro_batch_size == profile.batch_size; });
    if (!profile.sizes.empty() && profile.batch_size > 0 && !has_primary) {
      throw std::invalid_argument(
          fmt::format("profile: \"sizes\" lacks the batch_size {} its layers were measured at",
                      profile.batch_size));
    }
  }
  const auto link = doc.find("link");
  if (link != doc.end() && !link->is_null()) {
    try {
      profile.link = link_from_json(*link);
    } catch (const std::exception& error) {
      throw std::invalid_argument(std::string("profile: ") + error.what());
    }
  }
  return profile;
}

CostProfile read_profile(const std::string& path) {
  const json doc = parse_json(read_file(path), path);
  try {
    return profile_from_json(doc);
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(path + ": " + error.what());
  }
}

}  // namespace pipebal::balance
