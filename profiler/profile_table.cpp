// See profile_table.h.
#include "pipebal/profiler/profile_table.h"

#include <ostream>

#include <fmt/format.h>

#include "pipebal/common/error_text.h"

namespace pipebal::profiler {

void print_profile_table(const Profile& profile, std::ostream& out) {
  out << fmt::format(
      "{}: {} layers on {} ({} backend), batch size {}, median of {} runs after {} "
      "warm-up\n\n",
      printable(profile.model), profile.layers.size(), profile.device, profile.backend,
      profile.batch_size, profile.environment.repeat, profile.environment.warmup);
  out << fmt::format("{:>3}  {:<12} {:<14} {:>10} {:>10} {:>11} {:>12} {:>11}\n", "#", "layer",
                     "type", "fwd ms", "bwd ms", "params", "activations", "output");
  double forward_ms = 0, backward_ms = 0;
  int64_t param_bytes = 0, activation_bytes = 0;
  for (const LayerProfile& layer : profile.layers) {
    out << fmt::format("{:>3}  {:<12} {:<14} {:>10.3f} {:>10.3f} {:>11} {:>12} {:>11}\n",
                       layer.index, layer.name, layer.type, layer.forward_ms, layer.backward_ms,
                       format_bytes(layer.param_bytes), format_bytes(layer.activation_bytes),
                       format_bytes(layer.output_bytes));
    forward_ms += layer.forward_ms;
    backward_ms += layer.backward_ms;
    param_bytes += layer.param_bytes;
    activation_bytes += layer.activation_bytes;
  }
  out << fmt::format("{:>3}  {:<12} {:<14} {:>10.3f} {:>10.3f} {:>11} {:>12}\n", "", "total", "",
                     forward_ms, backward_ms, format_bytes(param_bytes),
                     format_bytes(activation_bytes));
  out << fmt::format("\nforward + backward: {:.3f} ms per (micro-)batch of {}\n",
                     forward_ms + backward_ms, profile.batch_size);
  if (profile.engine) {
    out << fmt::format(
        "the engine's own costs: {:.3f} ms per step, {:.3f} ms per action, {:.3f} ms per "
        "hand-off between stages\n",
        profile.engine->step_ms, profile.engine->action_ms, profile.engine->handoff_ms);
  }
}

}  // namespace pipebal::profiler
