// Runs code at one fixed stack alignment, whatever the caller's stack depth.
//
// Some of LibTorch's CPU kernels cost a few percent more or less with where the stack pointer
// they start from falls modulo 32 bytes: the B of the GPT's blocks' split backward took 3% longer
// at one of the two positions (reports/stack-alignment.md). A process's main thread starts its
// stack wherever the environment's size and address randomisation leave it, so each profile
// (taken there) fell into one cost or the other: the split backward's B + W over the whole was
// 1.014 or 1.059 from one process to the next, while the engine's stage threads, whose stacks
// start aligned, always saw one (1.088). Autograd runs at one alignment everywhere instead
// (pipeline::handed_execute): the profile measures what the stages run, in every process.
//
//   int result = 0;
//   on_aligned_stack([&] { result = compute(); });
//
// PIPEBAL_STACK_OFFSET (bytes below a 64-byte boundary: 0, 16, 32 or 48) chooses the alignment,
// `off` runs in place; the default is the cheaper one measured here. Torch-free.
#pragma once

#include <optional>
#include <type_traits>

namespace pipebal {

// The offset in force (PIPEBAL_STACK_OFFSET, read once), or none when it is `off`. A value
// that is not `off` nor 0, 16, 32 or 48 is refused by std::invalid_argument on first use.
std::optional<int> stack_offset();

// Calls body(context) with the stack pointer `offset` bytes (0, 16, 32 or 48) further below a
// 64-byte boundary than at offset 0, whatever the caller's depth.
void run_at_stack_offset(int offset, void (*body)(void*), void* context);

// run_at_stack_offset(*stack_offset(), ...), or body(context) in place when the offset is off.
void run_on_aligned_stack(void (*body)(void*), void* context);

template <class Fn>
void on_aligned_stack(Fn&& fn) {
  run_on_aligned_stack([](void* f) { (*static_cast<std::remove_reference_t<Fn>*>(f))(); }, &fn);
}

}  // namespace pipebal
