// See script_layer.h.
#include "pipeline/script_layer.h"

#include <stdexcept>

#include <fmt/format.h>
#include <torch/script.h>

namespace pipebal::pipeline {
namespace {

// "__torch__.torch.nn.modules.linear.Linear" -> "Linear".
std::string short_type_name(const torch::jit::Module& module) {
  const auto& qualified = module.type()->name();
  return qualified ? qualified->name() : "ScriptModule";
}

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

class ScriptLayer : public Layer {
 public:
  ScriptLayer(std::string name, torch::jit::Module module)
      : Layer(std::move(name), short_type_name(module)), module_(std::move(module)) {}

  Batch forward(Batch input) override {
    std::vector<c10::IValue> arguments(input.tensors.begin(), input.tensors.end());
    c10::IValue output = module_.forward(std::move(arguments));
    input.tensors.clear();
    if (output.isTensor()) {
      input.tensors.push_back(output.toTensor());
    } else if (output.isTuple()) {
      for (const auto& element : output.toTupleRef().elements()) {
        input.tensors.push_back(element.toTensor());
      }
    } else {
      throw std::invalid_argument(
          fmt::format("TorchScript layer '{}' returned {}, expected a "
                      "tensor or a tuple of tensors",
                      name(), output.tagKind()));
    }
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
    for (const auto& m : module_.modules()) {
      if (short_type_name(m).find("Dropout") == std::string::npos) continue;
      // Dropout with p = 0 draws nothing; a dropout without a readable `p` counts as random.
      if (!m.hasattr("p") || !m.attr("p").isDouble() || m.attr("p").toDouble() > 0) return true;
    }
    return false;
  }

  std::unique_ptr<Layer> clone() const override {
    // deepcopy() clones tensors through autograd; under grad mode the copies would be
    // non-leaf results of the originals. Copy without grad, then mark parameters trainable.
    torch::jit::Module copy;
    {
      torch::NoGradGuard no_grad;
      copy = module_.deepcopy();
    }
    auto original = module_.parameters().begin();
    for (at::Tensor p : copy.parameters()) p.requires_grad_((*original++).requires_grad());
    return std::make_unique<ScriptLayer>(name(), std::move(copy));
  }

 private:
  // `mutable` because torch::jit::Module's accessors are not const-qualified.
  mutable torch::jit::Module module_;
};

}  // namespace

LayerSeq load_torchscript(const std::string& path) {
  torch::jit::Module model;
  try {
    model = torch::jit::load(path, torch::kCPU);
  } catch (const c10::Error& error) {
    throw std::invalid_argument(fmt::format("cannot load TorchScript model '{}': {}", path,
                                            first_line(error.what_without_backtrace())));
  }
  LayerSeq layers(path);
  for (const auto& child : model.named_children()) {
    layers.add(std::make_unique<ScriptLayer>(child.name, child.value));
  }
  if (layers.empty()) {
    throw std::invalid_argument(
        fmt::format("TorchScript model '{}' has no child modules to use as layers", path));
  }
  // Children keep the mode they were saved in; a loaded model trains like a fresh one.
  layers.train(true);
  return layers;
}

}  // namespace pipebal::pipeline
