// TorchScript models' dropout on the stage's own generator (dropout.h). A loaded model's
// `aten::dropout` and `aten::feature_dropout` nodes (nn.Dropout, nn.Dropout2d/3d, F.dropout) draw
// from ATen's process-wide generator, so CPU stages running them would take turns under a lock.
// use_stage_dropout() rewrites them, in every method graph of the module and its submodules, to
// `pipebal::dropout` and `pipebal::feature_dropout`: operators registered here that draw from the
// calling stage's generator (and fall back to ATen's dropout outside a stage or off the CPU), so a
// recomputation replays the forward's masks without a lock. In-place and alpha dropout are left
// as they are (and keep the lock).
#pragma once

#include <torch/script.h>

namespace torch::jit {
struct Node;
}  // namespace torch::jit

namespace pipebal::pipeline {

// Rewrites `module`'s dropout nodes as above, with the functions its methods call inlined into
// them first (so that shared functions stay as they were). Only for a module of its own whose
// methods have not run (a method's compiled plan is not updated afterwards): a clone of the
// loaded model, since Python cannot load a module calling pipebal's operators. Returns how many
// nodes were rewritten.
int use_stage_dropout(torch::jit::Module& module);

// True when a method graph of `module` (and, with `submodules`, of its submodules) calls
// pipebal's dropout.
bool calls_stage_dropout(const torch::jit::Module& module, bool submodules);

// True when a method graph of `module` (or of its submodules) calls an ATen operator that draws
// random numbers: such a layer draws from ATen's process-wide generator.
bool calls_aten_random_ops(const torch::jit::Module& module);

// True when `node` is such an ATen operator, or pipebal's dropout.
bool is_random_op(const torch::jit::Node& node);

}  // namespace pipebal::pipeline
