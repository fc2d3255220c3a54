// The built-in model zoo and the SPEC syntax that names a model on the command line:
// `mlp:layers=16,width=512`, `resnet:depth=50`, ..., or the path of a TorchScript file.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "pipebal/models/loss_kind.h"
#include "pipebal/pipeline/layer_seq.h"
#include "pipebal/pipeline/script_layer.h"

namespace pipebal::models {

// What the synthetic data for a model looks like (the loss that trains it: loss_kind.h).
enum class InputKind {
  kFloat,   // normal(0, 1) values of the input shape
  kTokens,  // int64 token ids in [0, vocab)
};

struct ModelKnob {
  std::string key;
  int64_t default_value = 0;
  std::string help;
  int64_t max_value = 0;  // larger values are refused up front (no model that size fits here)
};

struct ModelInfo {
  std::string name;
  std::string description;
  std::vector<ModelKnob> knobs;
  std::vector<int64_t> default_input_shape;  // batch dimension first
  InputKind input = InputKind::kFloat;
  LossKind loss = LossKind::kCrossEntropy;
};

// A parsed SPEC: `name` plus `key=value` options; `path` set instead for TorchScript files.
struct ModelSpec {
  std::string name;
  std::map<std::string, int64_t> options;
  std::string path;
};

struct Model {
  pipeline::LayerSeq layers;
  ModelInfo info;
  std::map<std::string, int64_t> knobs;  // every knob, defaults filled in
  int64_t classes = 0;                   // cross-entropy classes (vocab for gpt); 0 for MSE
  // TorchScript models: the module's own forward, which the layers must reproduce on the
  // sample (make_synthetic_data checks it). Empty for zoo models, which are built as layers.
  pipeline::ReferenceForward reference;
  // TorchScript models: writes the module with the layers' current parameters, as the bytes of
  // a file torch.jit.load reads (empty for zoo models).
  std::function<void(std::ostream& out)> save;
};

// Every zoo model, in the order `pipebal models` lists them.
const std::vector<ModelInfo>& model_catalog();

// The model `pipebal demo` uses.
std::string default_model_spec();

// Parses a SPEC. A string containing '/' or ending in ".pt" is a TorchScript path (as given).
// Throws
// std::invalid_argument with one line listing the valid models or keys on any mistake.
ModelSpec parse_model_spec(const std::string& text);

// Builds the model a SPEC names, with a deterministic initialisation from `seed`.
Model build_model(const std::string& spec, uint64_t seed = 0);

// "mlp:classes=10,layers=16,width=512" — the canonical SPEC of a built model.
std::string describe(const Model& model);

// The canonical SPEC of `text` without building the model: every knob in catalogue order with
// its default filled in, so that two SPECs of the same model compare equal. A TorchScript
// path is returned as model_file_name gives it. Throws like parse_model_spec.
std::string canonical_spec(const std::string& text);

// A TorchScript file as a profile, its plans and a run name it: absolute, links resolved, so
// that it names the file from whatever directory they are used and by whatever path it was
// given (a relative path would name another file from another directory).
std::string model_file_name(const std::string& path);

// The TorchScript path a SPEC read from a file (a plan an earlier pipebal made) names relatively,
// which is read from the current directory and need not be the one the file was made in; empty
// for a zoo model or an absolute path. Throws like parse_model_spec.
std::string relative_model_path(const std::string& spec);

}  // namespace pipebal::models
