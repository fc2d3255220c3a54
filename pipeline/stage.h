// One pipeline stage: a contiguous run of layers on one device, and the per-micro-batch state
// between its forward and its backward. Only the stage's worker thread calls it during a step.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>

#include <c10/core/Stream.h>

#include "pipebal/pipeline/in_place.h"
#include "pipebal/pipeline/layer_seq.h"
#include "pipebal/pipeline/split_backward.h"

namespace pipebal::pipeline {

// Loss of one micro-batch's output against its target slice (mean over the micro-batch).
using LossFn = std::function<at::Tensor(const at::Tensor& output, const at::Tensor& target)>;
// How many terms a LossFn's mean over `target` takes: its class ids that are not ignored (-100),
// say. Null: one per sample.
using LossTerms = std::function<int64_t(const at::Tensor& target)>;

class Stage {
 public:
  Stage(int index, size_t first_layer, LayerSeq layers, c10::Device device);

  int index() const { return index_; }
  size_t first_layer() const { return first_layer_; }
  const LayerSeq& layers() const { return layers_; }
  const c10::Device& device() const { return device_; }
  // The stage's own stream on an accelerator (transfer.h); none on the CPU. The stage's
  // worker makes it current while it runs the stage's actions.
  const std::optional<c10::Stream>& stream() const { return stream_; }

  // How one micro-batch's forward runs.
  struct ForwardMode {
    bool checkpointed = false;  // without autograd, keeping only the input (recompute later)
    bool track_input_grad =
        false;              // the input's gradient goes upstream (every stage but the first)
    uint64_t rng_seed = 0;  // seeds stochastic layers: recompute() draws the same
  };

  // Forward of one micro-batch. `input` becomes a detached leaf on this stage's device (with
  // requires_grad on floating tensors when `mode.track_input_grad`). Returns the output to send
  // downstream.
  Batch forward(int micro_batch, Batch input, const ForwardMode& mode);

  // Runs a checkpointed micro-batch's forward again, this time recording autograd.
  void recompute(int micro_batch);

  // Backward of one micro-batch from the gradient of its output (one gradient per output
  // tensor and skip tensor; undefined where none flows). Returns the input's gradients. With
  // `defer_weights` it is B alone: the parameters' gradients wait for weight() (W). Move the
  // gradients in: each goes as soon as the backward is done with it.
  Batch backward(int micro_batch, Batch output_grad, bool defer_weights = false);

  // Backward on the last stage: weights the micro-batch's loss so that the accumulated
  // gradients equal the whole batch's. Returns the input's gradients; `loss` gets the weighted
  // loss. `defer_weights` as for backward().
  Batch backward_from_loss(int micro_batch, const at::Tensor& target, const LossFn& loss_fn,
                           double weight, double* loss, bool defer_weights = false);

  // W of a micro-batch whose backward deferred its weights: accumulates the parameters'
  // gradients from what B kept (split_backward.h), then drops the micro-batch's state.
  void weight(int micro_batch);

  // Inference forward of micro-batch `micro_batch` (named by errors) without keeping state.
  Batch infer(int micro_batch, Batch input);

  // Reads again whether the stage's layers draw random numbers, which they do in training mode
  // only: before every run, since the model may have changed mode since the last.
  void note_randomness();

  // Whether the stage's random draws come from ATen's process-wide generator, so that it runs
  // its forwards under a lock shared by all such stages (dropout.h).
  bool takes_generator_lock() const { return shared_generator_; }

  // Drops all per-micro-batch state (after a step, or after a failure).
  void clear() { states_.clear(); }

 private:
  struct MicroBatch {
    Batch input;
    Batch output;
    uint64_t rng_seed = 0;
    std::optional<SplitBackward> split;  // B has run; W has not
  };

  Batch run_layers(Batch input, int micro_batch);
  Batch run_seeded(const Batch& input, int micro_batch, uint64_t rng_seed);
  Batch run_seeded_once(const Batch& input, int micro_batch, uint64_t rng_seed);
  Batch run_probing_generator(const Batch& input, int micro_batch, uint64_t rng_seed);
  Batch input_gradients(const Batch& input) const;
  // Back-propagates `grads` from `roots` (the micro-batch's outputs or its loss): the whole
  // backward, or B keeping what W needs; neither the roots, the gradients nor the micro-batch's
  // outputs are held beyond autograd's use of them. Returns the input's gradients.
  Batch run_backward(int micro_batch, std::vector<at::Tensor> roots, std::vector<at::Tensor> grads,
                     bool defer_weights);
  MicroBatch& state(int micro_batch, const char* action);

  int index_;
  size_t first_layer_;
  LayerSeq layers_;
  c10::Device device_;
  std::optional<c10::Stream> stream_;
  bool stochastic_ = false;
  bool has_buffers_ = false;  // a layer holds buffers (a batch norm's running statistics)
  InputWrites input_writes_;  // whether a layer writes the stage's input in place (in_place.h)
  bool shared_generator_ = false;
  // Whether a run in training mode found the layers drawing from ATen's generator though no
  // layer says so (nullopt: not yet run in this mode); a CPU stage only.
  std::optional<bool> draws_unrecognised_;
  bool probed_training_ = false;  // the mode draws_unrecognised_ holds for
  std::map<int, MicroBatch> states_;
  const char* action_ = "forward";  // what run_layers runs, for its error message
};

}  // namespace pipebal::pipeline
