// See demo_command.h. For now the demo builds the default zoo model, runs one forward and
// backward pass on synthetic data and prints the layer table.
#include "tools/demo_command.h"

#include <chrono>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "models/synthetic.h"
#include "models/zoo.h"

namespace pipebal::tools {
namespace {

struct DemoParams {
  std::string model = models::default_model_spec();
  std::string input_shape;  // empty: the model's default
  uint64_t seed = 0;
};

void run_demo(const DemoParams& params) {
  const auto start = std::chrono::steady_clock::now();
  models::Model model = models::build_model(params.model, params.seed);
  const std::vector<int64_t> shape = params.input_shape.empty()
                                         ? model.info.default_input_shape
                                         : models::parse_shape(params.input_shape);
  models::SyntheticData data = models::make_synthetic_data(model, shape, params.seed);

  fmt::print("model {} ({} layers, {} parameters), input [{}]\n\n", model.layers.name(),
             model.layers.size(), model.layers.parameter_count(), fmt::join(shape, ", "));
  fmt::print("{:>3}  {:<10} {:<14} {:>12}  {}\n", "#", "layer", "type", "parameters",
             "output shape");
  pipeline::Batch batch = data.input;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const pipeline::Layer& layer = model.layers[i];
    batch = model.layers[i].forward(std::move(batch));
    fmt::print("{:>3}  {:<10} {:<14} {:>12}  [{}]\n", i, layer.name(), layer.type(),
               layer.parameter_count(), fmt::join(batch.value().sizes(), ", "));
  }
  const at::Tensor loss = models::compute_loss(model.info.loss, batch.value(), data.target);
  loss.backward();
  double grad_norm = 0;
  for (const auto& p : model.layers.parameters()) {
    if (p.grad().defined()) grad_norm += p.grad().pow(2).sum().item<double>();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("\nforward + backward: loss {:.4f}, gradient norm {:.4f}, {:.2f} s\n",
             loss.item<double>(), std::sqrt(grad_norm), seconds);
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto params = std::make_shared<DemoParams>();
  CLI::App* cmd = app.add_subcommand("demo", "Run pipebal on the default model");
  cmd->add_option("--model", params->model, "model SPEC or TorchScript file")->capture_default_str();
  cmd->add_option("--input-shape", params->input_shape, "input shape, batch first (default: the model's)");
  cmd->add_option("--seed", params->seed, "seed for weights and data")->capture_default_str();
  cmd->footer("Example:\n  pipebal demo\n  pipebal demo --model mlp:layers=4,width=64");
  cmd->callback([params] { run_demo(*params); });
}

}  // namespace pipebal::tools
