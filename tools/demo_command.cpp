// See demo_command.h. The demo is `pipebal validate` on the default model with settings that
// finish in about a minute here, preceded by the model's layer table.
#include "tools/demo_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "pipebal/common/error_text.h"
#include "pipebal/models/synthetic.h"
#include "pipebal/models/zoo.h"
#include "tools/command_line.h"
#include "tools/common_options.h"
#include "tools/validate_command.h"

namespace pipebal::tools {
namespace {

void print_layer_table(const ValidateParams& params) {
  const models::Model model = models::build_model(params.model, params.seed);
  const std::vector<int64_t> shape =
      params.input_shape.empty() ? model.info.default_input_shape : params.input_shape;
  const models::SyntheticData data = models::make_synthetic_data(model, shape, params.seed);
  fmt::print("model {} ({} layers, {} parameters), input [{}]\n\n", printable(model.layers.name()),
             model.layers.size(), model.layers.parameter_count(), fmt::join(shape, ", "));
  fmt::print("{:>3}  {:<10} {:<14} {:>12}  {}\n", "#", "layer", "type", "parameters",
             "output shape");
  torch::NoGradGuard no_grad;
  pipeline::Batch batch = data.input;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    batch = model.layers[i].forward(std::move(batch));
    fmt::print("{:>3}  {:<10} {:<14} {:>12}  [{}]\n", i, model.layers[i].name(),
               model.layers[i].type(), model.layers[i].parameter_count(),
               fmt::join(batch.value().sizes(), ", "));
  }
  fmt::print("\n");
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto params = std::make_shared<ValidateParams>();
  params->output = "pipebal-demo";
  CLI::App* cmd = app.add_subcommand(
      "demo", "Profile, balance, train and validate the default model; write an HTML report");
  add_model_option(*cmd, params->model)->capture_default_str();
  const auto input_shape = std::make_shared<std::string>();
  add_input_shape_option(*cmd, *input_shape);
  cmd->add_option("--stages", params->stages, "pipeline stages")->capture_default_str();
  add_chunks_option(*cmd, params->chunks);
  cmd->add_option("--steps", params->steps, "measured steps per run")->capture_default_str();
  cmd->add_option("-o,--output", params->output, "output directory")->capture_default_str();
  cmd->footer(
      "Example:\n"
      "  pipebal demo                      # writes pipebal-demo/report.html\n"
      "  pipebal demo --model mlp:layers=8,width=256 --stages 4 -o mlp-demo");
  cmd->callback([params, input_shape] {
    check_not_a_rank("demo");
    if (!input_shape->empty()) params->input_shape = models::parse_shape(*input_shape);
    print_layer_table(*params);
    run_validate(*params);
  });
}

}  // namespace pipebal::tools
