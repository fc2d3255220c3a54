// See models_command.h.
#include "tools/models_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipebal/models/zoo.h"

namespace pipebal::tools {

void add_models_command(CLI::App& app) {
  CLI::App* cmd =
      app.add_subcommand("models", "List the built-in models, their knobs and defaults");
  cmd->footer("Example:\n  pipebal models\n  pipebal profile --model resnet:depth=18,width=32 ...");
  cmd->callback([] {
    for (const auto& info : models::model_catalog()) {
      fmt::print("{}  {}\n", info.name, info.description);
      for (const auto& knob : info.knobs) {
        fmt::print("    {:<8} {:>6}  {}\n", knob.key, knob.default_value, knob.help);
      }
      fmt::print("    input shape (default): {}\n\n", fmt::join(info.default_input_shape, ","));
    }
    fmt::print("SPEC syntax: NAME[:KEY=VALUE,...], e.g. {}, or the path of a TorchScript file.\n",
               models::default_model_spec());
  });
}

}  // namespace pipebal::tools
