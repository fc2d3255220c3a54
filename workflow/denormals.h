// Flushes subnormal floats to zero, so that a layer's time does not depend on how small its
// numbers happen to be.
//
// x86 and Arm CPUs compute with subnormal operands or results (|x| below 1.2e-38 in float32)
// many times slower than with normal ones. Deep networks produce them where activations or
// gradients fade layer after layer: on a 150-layer MLP 64 wide, the backward of 27 layers in
// the middle, where the gradients pass through the subnormal range on their way to zero, took
// 10x the others', and the steps ran 2x slower than with subnormals flushed; which layers are
// hit moves as training changes the weights, so a profile cannot predict it
// (reports/layer-sum.md). Flushing them (MXCSR's FTZ and DAZ bits on x86, FPCR.FZ on Arm) is
// what torch.set_flush_denormal(True) does; it changes results only below 1.2e-38 (float32) or
// 2.2e-308 (float64).
#pragma once

#include "pipebal/common/env_flag.h"

namespace pipebal::workflow {

// The environment variable that keeps subnormals: 1 (common/env_flag.h).
using pipebal::kKeepDenormalsVariable;

// Call once at start-up, before any thread starts: threads inherit the floating-point
// environment of the thread that creates them (POSIX), so the stage workers, the intra-op
// thread pool and the ranks a launch starts flush as well. Does nothing when
// PIPEBAL_KEEP_DENORMALS asks to keep them. Returns whether subnormals are flushed now; throws
// std::invalid_argument when the variable is neither on nor off.
bool flush_denormals_unless_kept();

}  // namespace pipebal::workflow
