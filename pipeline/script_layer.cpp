// See script_layer.h.
#include "pipeline/script_layer.h"

#include <functional>
#include <stdexcept>

#include <fmt/format.h>
#include <torch/script.h>

#include "pipeline/error_text.h"
#include "pipeline/script_chain.h"
#include "pipeline/script_dropout.h"

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

class ScriptLayer : public Layer {
 public:
  ScriptLayer(std::string name, torch::jit::Module module)
      : Layer(std::move(name), short_type_name(module)),
        module_(std::move(module)),
        aten_random_(calls_aten_random_ops(module_)),
        functional_dropout_(calls_functional_dropout(module_)) {}

  Batch forward(Batch input) override {
    std::vector<c10::IValue> arguments(input.tensors.begin(), input.tensors.end());
    input.tensors = tensors_of(module_.forward(std::move(arguments)),
                               fmt::format("TorchScript layer '{}'", name()));
    return input;
  }

  std::vector<at::Tensor> parameters() const override {
    std::vector<at::Tensor> all;
    for (const auto& p : module_.parameters()) all.push_back(p);
    return all;
  }

  std::vector<at::Tensor> buffers() const override {
    std::vector<at::Tensor> all;
    for (const auto& b : module_.buffers()) all.push_back(b);
    return all;
  }

  void to(const c10::Device& device) override { module_.to(device); }
  void to(c10::ScalarType dtype) override { module_.to(dtype); }
  void train(bool on) override { module_.train(on); }
  bool is_training() const override { return module_.is_training(); }

  bool is_stochastic() const override {
    if (!module_.is_training()) return false;
    if (aten_random_ || functional_dropout_) return true;
    for (const auto& m : module_.modules()) {
      if (short_type_name(m).find("Dropout") == std::string::npos) continue;
      // Dropout with p = 0 draws nothing; a dropout without a readable `p` counts as random.
      if (!m.hasattr("p") || !m.attr("p").isDouble() || m.attr("p").toDouble() > 0) return true;
    }
    return false;
  }

  // Its dropout draws from the stage's generator (script_dropout.h); other random ATen
  // operators from the process-wide one.
  bool draws_from_shared_generator() const override {
    return module_.is_training() && aten_random_;
  }

  std::unique_ptr<Layer> clone() const override {
    return std::make_unique<ScriptLayer>(
        name(), trainable_copy(module_, [](const torch::jit::Module& m) { return m.deepcopy(); }));
  }

 private:
  // A submodule other than a Dropout module calls dropout (F.dropout in its forward).
  static bool calls_functional_dropout(const torch::jit::Module& module) {
    for (const auto& m : module.modules()) {
      if (short_type_name(m).find("Dropout") == std::string::npos &&
          calls_stage_dropout(m, /*submodules=*/false)) {
        return true;
      }
    }
    return false;
  }

  // `mutable` because torch::jit::Module's accessors are not const-qualified.
  mutable torch::jit::Module module_;
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

}  // namespace

ScriptModel load_script_model(const std::string& path) {
  torch::jit::Module model;
  try {
    model = torch::jit::load(path, torch::kCPU);
  } catch (const std::exception& error) {
    throw std::invalid_argument(
        fmt::format("cannot load TorchScript model '{}': {}", path, error_summary(error)));
  }
  const std::string why = why_not_a_chain(model);
  if (!why.empty()) {
    throw std::invalid_argument(fmt::format(
        "TorchScript model '{}' is not a chain of its children: {}; pipebal would run a different "
        "model. Export a module whose forward calls each top-level child once, in order, on the "
        "previous child's outputs (e.g. move residual adds into a child module)",
        path, why));
  }
  // Children keep the mode they were saved in; a loaded model trains like a fresh one.
  model.train(true);
  // pipebal runs a copy whose dropout draws from the stage's generator; the module as loaded
  // is what --save writes back (with the trained parameters), for Python to load.
  torch::jit::Module work =
      trainable_copy(model, [](const torch::jit::Module& m) { return m.clone(); });
  use_stage_dropout(work);
  ScriptModel result;
  result.layers = LayerSeq(path);
  for (const auto& child : work.named_children()) {
    result.layers.add(std::make_unique<ScriptLayer>(child.name, child.value));
  }
  result.reference = [work](const Batch& input) mutable {
    std::vector<c10::IValue> arguments(input.tensors.begin(), input.tensors.end());
    return tensors_of(work.forward(std::move(arguments)), "the model's forward");
  };
  result.save = [model, work](const std::string& file) mutable {
    torch::NoGradGuard no_grad;
    copy_state(work, model);
    model.save(file);
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
  try {
    expected = reference(sample);
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
