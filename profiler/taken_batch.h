// Whose memory a message between two stages of one process is. Each stage's memory is what its
// device would hold; a stage on a device of its own would hold a copy of every message it took,
// as a stage in another process holds its view of a message in shared memory
// (distributed/shared_slots.h). Between threads the taker gets the sender's tensors themselves,
// which the counting allocator (cpu_memory.h) would charge to the sender until their last user
// freed them: the sender would carry what the taker keeps, such as the inputs of GPipe's
// checkpointed micro-batches, and the taker nothing.
#pragma once

#include "pipebal/pipeline/batch.h"

namespace pipebal::profiler {

// On the taking stage's thread, for a batch it took from another thread's stage: each block of
// CPU memory the batch views becomes the taker's (CpuMemoryScope::hand_over) when nothing but the
// batch refers to it, and when the batch views only part of such a block, the taker copies that
// part and the block goes (a device would receive the part alone); a block the sender still uses (a
// saved output it back-propagates from, a gradient kept for W) is charged to both, as separate
// devices would hold it twice, the taker's share until the last of its views is gone. Tensors on
// other devices are left as they are, and so is everything while no CpuMemoryScope counts.
void count_as_taken(pipeline::Batch& batch);

}  // namespace pipebal::profiler
