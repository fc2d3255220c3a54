// See script_layer.h.
#include "pipebal/pipeline/script_layer.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <torch/script.h>

#include "pipebal/common/atomic_file.h"
#include "pipebal/common/zip_directory.h"
#include "pipebal/pipeline/error_text.h"
#include "pipebal/pipeline/run_state.h"
#include "pipebal/pipeline/script_dropout.h"
#include "pipebal/pipeline/script_split.h"
#include "pipebal/pipeline/stored_tensors.h"

namespace pipebal::pipeline {
namespace {

// "__torch__.torch.nn.modules.linear.Linear" -> "Linear".
std::string short_type_name(const torch::jit::Module& module) {
  const auto& qualified = module.type()->name();
  return qualified ? qualified->name() : "ScriptModule";
}

std::vector<at::Tensor> tensors_of(const c10::IValue& value, const std::string& what) {
  if (value.isTensor()) return {value.toTensor()};
  std::vector<at::Tensor> all;
  if (value.isTuple()) {
    for (const auto& element : value.toTupleRef().elements()) {
      if (!element.isTensor()) break;
      all.push_back(element.toTensor());
    }
    if (all.size() == value.toTupleRef().elements().size()) return all;
  }
  throw std::invalid_argument(fmt::format("{} returned {}, expected a tensor or a tuple of tensors",
                                          what, value.tagKind()));
}

// How far apart two runs of the same computation may be: the same operations in the same
// order agree to the last bit, but a dtype's rounding allows a little slack.
std::pair<double, double> tolerance(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Double:
      return {1e-9, 1e-12};
    case c10::ScalarType::Float:
      return {1e-4, 1e-6};
    default:
      return {1e-2, 1e-3};
  }
}

// `copy(module)` made without autograd, its parameters trainable as the module's are: a copy
// made under grad mode would hold non-leaf results of the originals, which gather no gradient.
torch::jit::Module trainable_copy(
    const torch::jit::Module& module,
    const std::function<torch::jit::Module(const torch::jit::Module&)>& copy) {
  torch::jit::Module result;
  {
    torch::NoGradGuard no_grad;
    result = copy(module);
  }
  auto original = module.parameters().begin();
  for (at::Tensor p : result.parameters()) p.requires_grad_((*original++).requires_grad());
  return result;
}

// One piece of a TorchScript model's forward (script_split.h).
class ScriptLayer : public Layer {
 public:
  explicit ScriptLayer(ScriptPiece piece)
      : Layer(piece.name, piece.type),
        piece_(std::move(piece)),
        aten_random_(calls_aten_random_ops(piece_.module)),
        functional_dropout_(piece_.own_code_draws || calls_functional_dropout(piece_.module)) {
    set_skips(piece_.stashes, piece_.pops);
  }

  Batch forward(Batch input) override {
    if (input.tensors.size() != piece_.inputs) {
      throw std::invalid_argument(
          fmt::format("it takes {} tensor(s), given {}", piece_.inputs, input.tensors.size()));
    }
    std::vector<c10::IValue> arguments(input.tensors.begin(), input.tensors.end());
    for (const std::string& name : piece_.reads) {
      const auto skip = input.skips.find(name);
      if (skip == input.skips.end()) {
        throw std::invalid_argument(fmt::format("skip tensor '{}' did not reach it", name));
      }
      arguments.emplace_back(skip->second);
    }
    for (const std::string& name : piece_.pops) input.skips.erase(name);
    const std::vector<at::Tensor> results = tensors_of(
        piece_.module.forward(std::move(arguments)), fmt::format("TorchScript layer '{}'", name()));
    input.tensors.assign(results.begin(), results.begin() + piece_.outputs);
    for (size_t s = 0; s < piece_.stashes.size(); ++s) {
      input.skips[piece_.stashes[s]] = results[piece_.outputs + s];
    }
    return input;
  }

  std::vector<at::Tensor> parameters() const override {
    std::vector<at::Tensor> all;
    for (const auto& p : piece_.module.parameters()) all.push_back(p);
    return all;
  }

  std::vector<at::Tensor> buffers() const override {
    std::vector<at::Tensor> all;
    for (const auto& b : piece_.module.buffers()) all.push_back(b);
    return all;
  }

  void to(const c10::Device& device) override { piece_.module.to(device); }
  void to(c10::ScalarType dtype) override { piece_.module.to(dtype); }
  void train(bool on) override { piece_.module.train(on); }
  bool is_training() const override { return piece_.module.is_training(); }

  bool is_stochastic() const override {
    if (!piece_.module.is_training()) return false;
    if (aten_random_ || functional_dropout_) return true;
    for (const auto& m : piece_.module.modules()) {
      if (short_type_name(m).find("Dropout") == std::string::npos) continue;
      // Dropout with p = 0 draws nothing; a dropout without a readable `p` counts as random.
      if (!m.hasattr("p") || !m.attr("p").isDouble() || m.attr("p").toDouble() > 0) return true;
    }
    return false;
  }

  bool has_other_batch_norm() const override {
    for (const auto& m : piece_.module.modules()) {
      if (short_type_name(m).find("BatchNorm") != std::string::npos) return true;
    }
    return false;
  }

  // Its dropout draws from the stage's generator (script_dropout.h); other random ATen
  // operators from the process-wide one.
  bool draws_from_shared_generator() const override {
    return piece_.module.is_training() && aten_random_;
  }

  std::unique_ptr<Layer> clone() const override {
    ScriptPiece copy = piece_;
    copy.module =
        trainable_copy(piece_.module, [](const torch::jit::Module& m) { return m.deepcopy(); });
    return std::make_unique<ScriptLayer>(std::move(copy));
  }

 private:
  // A module the piece calls, other than a Dropout module, calls dropout (F.dropout in its
  // forward). The piece's own forward, which inlines them all, is not one of them.
  static bool calls_functional_dropout(const torch::jit::Module& piece) {
    for (const auto& m : piece.modules()) {
      if (m._ivalue() != piece._ivalue() &&
          short_type_name(m).find("Dropout") == std::string::npos &&
          calls_stage_dropout(m, /*submodules=*/false)) {
        return true;
      }
    }
    return false;
  }

  // `mutable` because torch::jit::Module's accessors are not const-qualified.
  mutable ScriptPiece piece_;
  bool aten_random_ = false;         // calls a random ATen operator (alpha dropout, rand, ...)
  bool functional_dropout_ = false;  // calls dropout outside a Dropout module
};

// Copies parameters and buffers from `from` into `to`, a module of the same structure.
void copy_state(const torch::jit::Module& from, torch::jit::Module& to) {
  const auto copy = [](auto sources, auto targets) {
    auto target = targets.begin();
    for (const auto& source : sources) (*target++).value.copy_(source.value);
  };
  copy(from.named_parameters(), to.named_parameters());
  copy(from.named_buffers(), to.named_buffers());
}

// Whether `path` is an archive torch.save wrote (a pickle and its tensors' records) rather than
// torch.jit.save (which adds the model's code and constants): a user's likeliest mistake.
bool written_by_torch_save(const std::string& path) {
  std::vector<ZipEntry> entries;
  try {
    entries = zip_directory(path);
  } catch (const std::exception&) {
    return false;  // not an archive at all
  }
  const auto has = [&entries](const std::string& file) {
    return std::any_of(entries.begin(), entries.end(), [&file](const ZipEntry& entry) {
      const size_t slash = entry.name.find('/');
      return slash != std::string::npos &&
             entry.name.compare(slash + 1, std::string::npos, file) == 0;
    });
  };
  return has("data.pkl") && !has("constants.pkl");
}

}  // namespace

ScriptModel load_script_model(const std::string& path) {
  check_regular_file(path, "load TorchScript model");  // torch::jit::load would block on a FIFO
  torch::jit::Module model;
  try {
    model = torch::jit::load(path, torch::kCPU);
  } catch (const std::exception& error) {
    if (written_by_torch_save(path)) {
      throw std::invalid_argument(fmt::format(
          "cannot load TorchScript model '{}': torch.save wrote it (a pickled module, state_dict "
          "or data), not torch.jit.save: save the model with torch.jit.script(model).save(path) "
          "(or torch.jit.trace)",
          path));
    }
    throw std::invalid_argument(
        fmt::format("cannot load TorchScript model '{}': {}", path, error_summary(error)));
  }
  check_stored_tensors(model, path, fmt::format("cannot load TorchScript model '{}'", path));
  // Children keep the mode they were saved in; a loaded model trains like a fresh one.
  model.train(true);
  // pipebal runs a copy whose dropout draws from the stage's generator; the module as loaded
  // is what --save writes back (with the trained parameters), for Python to load.
  torch::jit::Module work =
      trainable_copy(model, [](const torch::jit::Module& m) { return m.clone(); });
  std::vector<ScriptPiece> pieces;
  try {
    pieces = split_forward(work);  // before use_stage_dropout inlines the calls it cuts at
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(fmt::format(
        "TorchScript model '{}' cannot be cut into layers: {}; pipebal runs the model's own "
        "forward or nothing",
        path, error.what()));
  }
  use_stage_dropout(work);
  ScriptModel result;
  result.layers = LayerSeq(path);
  for (ScriptPiece& piece : pieces) {
    use_stage_dropout(piece.module);
    result.layers.add(std::make_unique<ScriptLayer>(std::move(piece)));
  }
  result.layers.check_skips();
  result.reference = [work, first = result.layers.at(0)](const Batch& input) mutable {
    // The model's own operators (dropout between its children) follow the layers' mode.
    work.setattr("training", first->is_training());
    std::vector<c10::IValue> arguments(input.tensors.begin(), input.tensors.end());
    return tensors_of(work.forward(std::move(arguments)), "the model's forward");
  };
  result.save = [model, work](std::ostream& out) mutable {
    torch::NoGradGuard no_grad;
    copy_state(work, model);
    model.save(out);
  };
  return result;
}

LayerSeq load_torchscript(const std::string& path) {
  return load_script_model(path).layers;
}

void check_matches_reference(const LayerSeq& layers, const ReferenceForward& reference,
                             const Batch& sample, const std::string& model) {
  if (layers.empty()) return;
  const bool training = layers[0].is_training();
  at::NoGradGuard no_grad;
  layers.train(false);
  std::vector<at::Tensor> expected, staged;
  // Both runs start from the same buffers and random state (a forward may draw, or count its
  // calls, in evaluation mode too), and leave the model and the generator as they were.
  const RunState before(layers);
  try {
    expected = reference(sample);
    before.restore();
    staged = layers.forward(sample).tensors;
  } catch (const std::exception& error) {
    layers.train(training);
    throw std::invalid_argument(fmt::format("model '{}': running it on the sample failed: {}",
                                            model, error_summary(error)));
  }
  layers.train(training);
  if (expected.size() != staged.size()) {
    throw std::invalid_argument(
        fmt::format("model '{}': its layers return {} tensors, its forward {}; pipebal would run "
                    "a different model",
                    model, staged.size(), expected.size()));
  }
  for (size_t t = 0; t < expected.size(); ++t) {
    const at::Tensor& want = expected[t];
    const at::Tensor& got = staged[t];
    bool same = want.sizes() == got.sizes() && want.scalar_type() == got.scalar_type();
    double difference = 0;
    if (same && want.is_floating_point()) {
      const auto [rtol, atol] = tolerance(want.scalar_type());
      same = at::allclose(got, want, rtol, atol, /*equal_nan=*/true);
      difference = (got - want).abs().max().item<double>();
    } else if (same) {
      same = at::equal(got, want);
    }
    if (!same) {
      throw std::invalid_argument(fmt::format(
          "model '{}': its layers run one after another give a different output {} than its "
          "forward on the sample (shape {} vs {}, largest difference {:.3g}); pipebal would run "
          "a different model",
          model, t, c10::str(got.sizes()), c10::str(want.sizes()), difference));
    }
  }
}

}  // namespace pipebal::pipeline
