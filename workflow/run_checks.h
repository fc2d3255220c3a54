// What a training run checks before it builds anything heavy: its limits, that a plan was made
// for this model, that --data's floating tensors are of the model's dtype. Each throws
// std::invalid_argument with one line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipebal/models/dataset.h"
#include "pipebal/models/synthetic.h"
#include "pipebal/pipeline/layer_seq.h"

namespace pipebal::workflow {

// At most this many steps, measured or warm-up, in a run.
constexpr int kMaxSteps = 10'000'000;

// Throws for steps outside 1 to kMaxSteps, warm-up steps outside 0 to kMaxSteps or a step timeout
// outside 0 to kMaxTimeLimitS (common/time_limit.h): what a run checks first, and what validate
// checks before it profiles.
void check_run_limits(int steps, int warmup_steps, double step_timeout_s);

// Throws when `layers` (the model `model` names) are not the `planned` layer names, in count or
// by name: a plan made for another model (the file replaced since, or one with as many layers)
// would train it on the other's balance without a word. No names planned: nothing to check.
void check_layer_names(const pipeline::LayerSeq& layers, const std::vector<std::string>& planned,
                       const std::string& model);

// Throws when floating data (from the file `path`) is of another dtype than the layers it meets,
// which would fail inside the first step ("Found dtype Double but expected Float", from a
// stage's backward). The inputs meet the first layer's parameters, the targets the last layer's
// output; a layer without floating parameters (one that casts its input itself, say) is not
// judged. Floating inputs of a first layer that is an embedding are refused: it wants integer ids.
void check_data_dtype(const models::Dataset& data, const pipeline::LayerSeq& layers,
                      const std::string& path);

// What a run may leave out of `samples` in mini-batches of `batch_size`: the last mini-batch of
// each epoch when it is too small for `chunks` micro-batches on each of `replicas` (said as a
// warning); nullopt when none is.
std::optional<std::string> left_out_batch(int64_t samples, int64_t batch_size, int chunks,
                                          int replicas);

// A warning when mini-batches of `batch_size` are more than the data's `samples` (each step then
// trains on all of them, a smaller mini-batch than asked or planned); nullopt else.
std::optional<std::string> batch_beyond_data(int64_t samples, int64_t batch_size);

// A warning when `layers` hold no parameter to train (the loss cannot change); nullopt else.
std::optional<std::string> nothing_to_train(const pipeline::LayerSeq& layers);

// Throws when --deferred-batch-norm would do nothing: no layer holds a batch norm at all (one
// other than pipebal's BatchNorm the pipeline refuses itself, naming it).
void check_batch_norm_to_defer(const pipeline::LayerSeq& layers);

// Throws naming the tensor and the first sample when --data's inputs, or its targets when the
// loss reads them (`targets_read`), hold a NaN: every loss it reaches would be NaN, and the
// weights with it, silently unless --check-finite. Infinities pass: an additive attention mask
// holds -inf by design.
void check_data_has_no_nan(const models::Dataset& data, bool targets_read, const std::string& path);

// Throws when --data's targets (from the file `path`) cannot meet `loss` on the model's output,
// `sample_output` being its output for a few samples: an output that is not floating point (an
// argmax, not scores); class ids that are not integers, of another shape than the output's rows
// less the class dimension, or outside 0 to classes - 1 (-100, the ignored id, passes), naming
// the first such sample; regression targets that are not floating or not the output's shape.
// Each would fail inside a step, after some had trained.
void check_targets(const models::Dataset& data, models::LossKind loss,
                   const at::Tensor& sample_output, const std::string& path);

// Throws when `layers` have trainable parameters and none has a gradient after a step: the loss
// does not depend on them (a model whose output is detached), and training would change nothing
// while reporting steps.
void check_something_trains(const pipeline::LayerSeq& layers);

}  // namespace pipebal::workflow
