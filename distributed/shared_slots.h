// A channel's messages through memory shared with a receiving process on the same host. The
// sender writes each message (wire_message.h) into a free slot of its own, a SharedSegment, and
// sends only a notice of where it is (through the channel's SharedMailbox); the receiver's
// tensors are views of the slot, which is free for the sender's next message once the last of
// them is gone. A message so costs one copy, where through Gloo its bytes are copied three
// times (packed, written to the socket, read from it) on the cores the stages compute on. Slots
// are made as needed: as many as the receiver holds messages at once, each grown to the largest
// it held.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "pipebal/distributed/shared_mailbox.h"
#include "pipebal/distributed/shared_segment.h"
#include "pipebal/pipeline/batch.h"

namespace pipebal::distributed {

class SlotWriter {
 public:
  // Writes `batch`'s message into a free slot and returns its notice for the receiver's
  // SlotReader.
  Letter put(const pipeline::Batch& batch);
  // Slots made so far.
  size_t slots() const { return slots_.size(); }

 private:
  std::vector<std::unique_ptr<SharedSegment>> slots_;
};

class SlotReader {
 public:
  // The message a notice announces: a uint8 tensor viewing the sender's slot (unpack_message
  // reads it); the slot is the sender's again once this tensor and every view of it are gone.
  // Until then its bytes count as the calling thread's memory (profiler::CpuMemoryScope).
  // Throws std::runtime_error for a malformed notice or a slot that cannot be opened.
  at::Tensor open(const Letter& notice);

 private:
  std::map<int64_t, std::shared_ptr<SharedSegment>> slots_;  // the sender's, by index
};

}  // namespace pipebal::distributed
