// See shared_settings.h.
#include "pipebal/workflow/shared_settings.h"

#include <cstring>

#include <fmt/format.h>

#include "pipebal/common/git_commit.h"
#include "pipebal/models/loss_kind.h"
#include "pipebal/pipeline/schedule.h"
#include "pipebal/workflow/optimizer_kind.h"

namespace pipebal::workflow {
namespace {

std::string on_off(bool on) {
  return on ? "on" : "off";
}

template <typename T>
std::string listed(const std::vector<T>& values, const char* none) {
  return values.empty() ? none : fmt::format("{}", fmt::join(values, ","));
}

std::string digest_text(const std::vector<at::Tensor>& tensors) {
  return fmt::format("{:016x}", content_digest(tensors));
}

}  // namespace

uint64_t content_digest(const std::vector<at::Tensor>& tensors) {
  uint64_t hash = 14695981039346656037ull;
  auto mix = [&hash](uint64_t word) {
    hash ^= word;
    hash *= 1099511628211ull;
  };
  for (const at::Tensor& tensor : tensors) {
    mix(tensor.defined());
    if (!tensor.defined()) continue;
    mix(static_cast<uint64_t>(tensor.scalar_type()));
    mix(static_cast<uint64_t>(tensor.dim()));
    for (const int64_t size : tensor.sizes()) mix(static_cast<uint64_t>(size));
    const at::Tensor dense = tensor.detach().to(at::kCPU).contiguous();
    const size_t bytes = dense.nbytes();
    if (bytes == 0) continue;
    const auto* data = static_cast<const uint8_t*>(dense.data_ptr());
    size_t at = 0;
    for (; at + sizeof(uint64_t) <= bytes; at += sizeof(uint64_t)) {
      uint64_t word = 0;
      std::memcpy(&word, data + at, sizeof(word));
      mix(word);
    }
    uint64_t tail = 0;
    std::memcpy(&tail, data + at, bytes - at);
    mix(tail);
  }
  return hash;
}

distributed::SharedSettings shared_settings(const TrainSettings& settings,
                                            const models::Model& model,
                                            const models::Dataset* data) {
  std::vector<at::Tensor> state = model.layers.parameters();
  for (const at::Tensor& buffer : model.layers.buffers()) state.push_back(buffer);
  std::string data_digest = "none";
  if (data) {
    std::vector<at::Tensor> tensors = data->inputs;
    tensors.push_back(data->targets);
    data_digest = digest_text(tensors);
  }
  return {
      {"pipebal build", git_commit()},
      {"--model", model.save ? "a TorchScript file" : models::describe(model)},
      {"--input-shape",
       listed(settings.input_shape, settings.inputs.empty() ? "the model's" : "none (--input)")},
      {"--input", listed(settings.inputs, "none")},
      {"--dtype", settings.dtype.empty() ? "as loaded" : settings.dtype},
      {"--balance", listed(settings.balance, "none")},
      {"--chunks", std::to_string(settings.chunks)},
      {"--schedule", pipeline::to_string(settings.schedule)},
      {"--virtual", std::to_string(settings.virtual_stages)},
      {"--weight-delays", listed(settings.weight_delays, "H1's")},
      {"--checkpoint", pipeline::to_string(settings.checkpoint)},
      {"--replicas", std::to_string(settings.replicas)},
      {"--steps", std::to_string(settings.steps)},
      {"--warmup-steps", std::to_string(settings.warmup_steps)},
      {"--optimizer", to_string(settings.optimizer)},
      {"--lr", fmt::format("{}", settings.lr)},
      {"--seed", std::to_string(settings.seed)},
      {"--deferred-batch-norm", on_off(settings.deferred_batch_norm)},
      {"--check-finite", on_off(settings.check_finite)},
      {"--epochs", std::to_string(settings.epochs)},
      {"--batch-size", std::to_string(settings.batch_size)},
      {"--shuffle", on_off(settings.shuffle)},
      {"--loss", settings.loss ? models::to_string(*settings.loss) : "the default"},
      {"--save", settings.save.empty() ? "none" : "given"},
      {"rehearsal", on_off(settings.rehearse)},
      {"model weights", digest_text(state), true},
      {"training data", data_digest, true},
  };
}

}  // namespace pipebal::workflow
