// Switches read from the environment (PIPEBAL_SHM_DISABLE, PIPEBAL_TENSOR_CHANNEL,
// PIPEBAL_KEEP_DENORMALS): "1" turns one on; unset, empty or "0" leaves it off. Anything else
// ("true", "yes", "false") is refused rather than guessed at: "false" used to turn one on.
// Torch-free.
#pragma once

namespace pipebal {

// Every message through Gloo, none through shared memory (distributed/group.h).
constexpr const char* kShmDisableVariable = "PIPEBAL_SHM_DISABLE";
// Gloo messages tensor by tensor (distributed/tensor_channel.h).
constexpr const char* kTensorChannelVariable = "PIPEBAL_TENSOR_CHANNEL";
// Subnormal floats kept, not flushed to zero (workflow/denormals.h).
constexpr const char* kKeepDenormalsVariable = "PIPEBAL_KEEP_DENORMALS";

// Whether the switch `name` is on; throws std::invalid_argument naming the variable and its
// value when it is neither.
bool env_flag(const char* name);

}  // namespace pipebal
