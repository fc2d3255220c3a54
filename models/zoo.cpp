// SPEC parsing and the catalog of built-in models; see zoo.h.
#include "pipebal/models/zoo.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/utils.h>

#include "pipebal/common/parse_integers.h"
#include "pipebal/models/amoebanet.h"
#include "pipebal/models/gpt.h"
#include "pipebal/models/mlp.h"
#include "pipebal/models/resnet.h"
#include "pipebal/models/unet.h"
#include "pipebal/pipeline/script_layer.h"

namespace pipebal::models {
namespace {

using Knobs = std::map<std::string, int64_t>;

struct Entry {
  ModelInfo info;
  std::function<pipeline::LayerSeq(const Knobs&)> build;
  std::function<std::vector<int64_t>(const Knobs&)> input_shape;
  std::function<int64_t(const Knobs&)> classes;
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> all = {
      {{"mlp",
        "multi-layer perceptron: Linear+ReLU blocks and a linear head",
        {{"layers", 16, "hidden Linear+ReLU blocks", 4096},
         {"width", 512, "hidden width (= input features)", 65536},
         {"classes", 10, "output classes", 1048576}},
        {64, 512},
        InputKind::kFloat,
        LossKind::kCrossEntropy},
       [](const Knobs& k) {
         MlpOptions options;
         options.layers = k.at("layers");
         options.width = k.at("width");
         options.classes = k.at("classes");
         return make_mlp(options);
       },
       [](const Knobs& k) {
         return std::vector<int64_t>{64, k.at("width")};
       },
       [](const Knobs& k) { return k.at("classes"); }},
      {{"resnet",
        "ResNet (basic blocks for 18/34, bottlenecks for 50/101/152), one layer per block",
        {{"depth", 50, "18, 34, 50, 101 or 152", 152},
         {"width", 64, "channels of the first group", 4096},
         {"classes", 10, "output classes", 1048576}},
        {32, 3, 64, 64},
        InputKind::kFloat,
        LossKind::kCrossEntropy},
       [](const Knobs& k) {
         ResNetOptions options;
         options.depth = k.at("depth");
         options.width = k.at("width");
         options.classes = k.at("classes");
         return make_resnet(options);
       },
       [](const Knobs&) {
         return std::vector<int64_t>{32, 3, 64, 64};
       },
       [](const Knobs& k) { return k.at("classes"); }},
      {{"unet",
        "U-Net with encoder-decoder skip connections carried as skip tensors",
        {{"B", 2, "down/up levels (input H, W divisible by 2^B)", 8},
         {"C", 16, "channels of the first level", 4096}},
        {16, 3, 64, 64},
        InputKind::kFloat,
        LossKind::kMse},
       [](const Knobs& k) {
         UNetOptions options;
         options.B = k.at("B");
         options.C = k.at("C");
         return make_unet(options);
       },
       [](const Knobs&) {
         return std::vector<int64_t>{16, 3, 64, 64};
       },
       [](const Knobs&) { return int64_t{0}; }},
      {{"amoebanetd",
        "AmoebaNet-D: stem, normal and reduction cells, classifier",
        {{"L", 6, "normal cells per group", 64},
         {"D", 32, "filters", 4096},
         {"classes", 10, "output classes", 1048576}},
        {16, 3, 64, 64},
        InputKind::kFloat,
        LossKind::kCrossEntropy},
       [](const Knobs& k) {
         AmoebaNetOptions options;
         options.L = k.at("L");
         options.D = k.at("D");
         options.classes = k.at("classes");
         return make_amoebanet(options);
       },
       [](const Knobs&) {
         return std::vector<int64_t>{16, 3, 64, 64};
       },
       [](const Knobs& k) { return k.at("classes"); }},
      {{"gpt",
        "GPT-style decoder: embedding, pre-norm causal transformer blocks, norm, head",
        {{"layers", 8, "decoder blocks", 1024},
         {"dim", 256, "model width", 16384},
         {"heads", 4, "attention heads (divide dim)", 256},
         {"seq", 64, "longest sequence", 65536},
         {"vocab", 1000, "vocabulary size", 1048576},
         {"dropout", 0, "dropout in percent", 99}},
        {64, 64},
        InputKind::kTokens,
        LossKind::kCrossEntropy},
       [](const Knobs& k) {
         GptOptions options;
         options.layers = k.at("layers");
         options.dim = k.at("dim");
         options.heads = k.at("heads");
         options.seq = k.at("seq");
         options.vocab = k.at("vocab");
         options.dropout_percent = k.at("dropout");
         return make_gpt(options);
       },
       [](const Knobs& k) {
         return std::vector<int64_t>{64, k.at("seq")};
       },
       [](const Knobs& k) { return k.at("vocab"); }},
  };
  return all;
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& e : entries()) names.push_back(e.info.name);
  return names;
}

const Entry& find_entry(const std::string& name) {
  for (const auto& e : entries()) {
    if (e.info.name == name) return e;
  }
  throw std::invalid_argument(
      fmt::format("unknown model '{}' (valid: {}, or a TorchScript .pt file)", name,
                  fmt::join(model_names(), ", ")));
}

int64_t parse_option(const std::string& text, const std::string& key) {
  const std::optional<int64_t> value = parse_integer(text);
  if (!value) {
    throw std::invalid_argument(fmt::format("model option {}={}: expected an integer", key, text));
  }
  return *value;
}

}  // namespace

const std::vector<ModelInfo>& model_catalog() {
  static const std::vector<ModelInfo> catalog = [] {
    std::vector<ModelInfo> all;
    for (const auto& e : entries()) all.push_back(e.info);
    return all;
  }();
  return catalog;
}

std::string default_model_spec() {
  return "gpt:layers=6,dim=128,heads=4,seq=64";
}

ModelSpec parse_model_spec(const std::string& text) {
  ModelSpec spec;
  if (text.find('/') != std::string::npos ||
      (text.size() > 3 && text.compare(text.size() - 3, 3, ".pt") == 0)) {
    spec.path = text;
    return spec;
  }
  const auto colon = text.find(':');
  spec.name = text.substr(0, colon);
  const Entry& entry = find_entry(spec.name);
  if (colon == std::string::npos) return spec;

  std::string rest = text.substr(colon + 1);
  size_t start = 0;
  while (start <= rest.size()) {
    const size_t comma = std::min(rest.find(',', start), rest.size());
    const std::string item = rest.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) {
      throw std::invalid_argument(
          fmt::format("model option '{}' in '{}': expected key=value", item, text));
    }
    const std::string key = item.substr(0, eq);
    const auto& knobs = entry.info.knobs;
    const bool known =
        std::any_of(knobs.begin(), knobs.end(), [&](const ModelKnob& k) { return k.key == key; });
    if (!known) {
      std::vector<std::string> keys;
      for (const auto& k : knobs) keys.push_back(k.key);
      throw std::invalid_argument(fmt::format("model {} has no option '{}' (valid: {})", spec.name,
                                              key, fmt::join(keys, ", ")));
    }
    if (spec.options.count(key) > 0) {  // which one was meant?
      throw std::invalid_argument(
          fmt::format("model option '{}' is given twice in '{}': give it once", key, text));
    }
    spec.options[key] = parse_option(item.substr(eq + 1), key);
  }
  return spec;
}

Model build_model(const std::string& text, uint64_t seed) {
  const ModelSpec spec = parse_model_spec(text);
  torch::manual_seed(seed);
  Model model;
  if (!spec.path.empty()) {
    pipeline::ScriptModel script = pipeline::load_script_model(spec.path);
    model.layers = std::move(script.layers);
    // What a profile, its plans and a run record: the file, from whatever directory they are used.
    model.layers.set_name(model_file_name(spec.path));
    model.reference = std::move(script.reference);
    model.save = std::move(script.save);
    model.info.name = model.layers.name();
    model.info.description = "TorchScript model";
    model.info.loss = LossKind::kMse;
    return model;
  }
  const Entry& entry = find_entry(spec.name);
  model.info = entry.info;
  for (const auto& knob : entry.info.knobs) model.knobs[knob.key] = knob.default_value;
  for (const auto& [key, value] : spec.options) {
    if (value < 1 && !(spec.name == "gpt" && key == "dropout" && value == 0)) {
      throw std::invalid_argument(fmt::format("model option {}={}: must be positive", key, value));
    }
    const auto& knobs = entry.info.knobs;
    const auto knob = std::find_if(knobs.begin(), knobs.end(),
                                   [&key = key](const ModelKnob& k) { return k.key == key; });
    if (value > knob->max_value) {
      throw std::invalid_argument(fmt::format("model option {}={}: at most {} for {}", key, value,
                                              knob->max_value, spec.name));
    }
    model.knobs[key] = value;
  }
  model.layers = entry.build(model.knobs);
  model.layers.set_name(describe(model));
  model.info.default_input_shape = entry.input_shape(model.knobs);
  model.classes = entry.classes(model.knobs);
  model.layers.check_skips();
  return model;
}

std::string model_file_name(const std::string& path) {
  std::error_code error;
  // Absolute first: of a relative path none of whose parts exists, weakly_canonical stays relative.
  const std::filesystem::path resolved =
      std::filesystem::weakly_canonical(std::filesystem::absolute(path, error), error);
  return error ? path : resolved.string();
}

std::string relative_model_path(const std::string& spec) {
  const std::string path = parse_model_spec(spec).path;
  return !path.empty() && std::filesystem::path(path).is_relative() ? path : std::string();
}

std::string canonical_spec(const std::string& text) {
  const ModelSpec spec = parse_model_spec(text);
  if (!spec.path.empty()) return model_file_name(spec.path);
  Model model;
  model.info = find_entry(spec.name).info;
  for (const auto& knob : model.info.knobs) model.knobs[knob.key] = knob.default_value;
  for (const auto& [key, value] : spec.options) model.knobs[key] = value;
  return describe(model);
}

std::string describe(const Model& model) {
  if (model.knobs.empty()) return model.info.name;
  std::vector<std::string> parts;
  for (const auto& knob : model.info.knobs) {
    parts.push_back(fmt::format("{}={}", knob.key, model.knobs.at(knob.key)));
  }
  return fmt::format("{}:{}", model.info.name, fmt::join(parts, ","));
}

}  // namespace pipebal::models
