// Refuses a CPU tensor that cannot fit in memory, at once and in one line, instead of letting the
// process grow until the kernel's out-of-memory killer ends it (or another process).
//
// With jemalloc (malloc_tuning.h) a request of any size succeeds: it maps memory with
// MAP_NORESERVE wherever the kernel overcommits, so the check that makes glibc's malloc, and
// plain PyTorch, refuse a 4 TiB tensor never runs, and filling the tensor grows the process page
// by page. This guard stands in for that check: a tensor larger than the memory this process may
// use plus swap is refused, and so is a large one (256 MiB or more) that, with the tensors the
// process holds already, would pass that (a 70 GB model built layer by layer on a 24 GB machine).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace pipebal::workflow {

// Why `bytes` more cannot be allocated when `held_bytes` are allocated already (nullopt: unknown)
// and the process may use `usable_bytes`, described as `usable_text`, plus `swap_bytes`; nullopt
// when it may be.
std::optional<std::string> allocation_refusal(size_t bytes, std::optional<size_t> held_bytes,
                                              double usable_bytes, const std::string& usable_text,
                                              double swap_bytes);

// Puts the guard in front of LibTorch's CPU allocator. Call once at start-up, before the first
// tensor is allocated. A refused allocation throws c10::Error with allocation_refusal's text.
void guard_cpu_allocations();

}  // namespace pipebal::workflow
