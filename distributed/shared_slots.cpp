// See shared_slots.h.
#include "pipebal/distributed/shared_slots.h"

#include <stdexcept>
#include <system_error>

#include <fmt/format.h>
#include <torch/torch.h>

#include "pipebal/distributed/wire_message.h"
#include "pipebal/profiler/cpu_memory.h"

namespace pipebal::distributed {
namespace {

// A slot begins with its state word (kBusy from the sender's write until the receiver's last
// view is gone), then the message at a 64-byte boundary.
constexpr size_t kHeaderBytes = 64;
constexpr uint32_t kBusy = 1;
// Slots are sized in these steps, with room to spare, so that messages a little larger than
// the last one (a skip tensor more, a larger last micro-batch) reuse it.
constexpr size_t kSizeStep = 64 * 1024;
// Ample for the messages a stage holds at once; a notice naming a larger index is malformed.
constexpr int64_t kMaxSlots = 1 << 16;
constexpr int64_t kNoticeMagic = 0x70627368'6d736c74;  // "pbshmslt"

enum NoticeWord { kMagic, kPid, kFd, kIndex, kSlotBytes, kMessageBytes, kNoticeWords };
static_assert(kNoticeWords == kLetterWords, "a notice is a letter");

uint32_t* state_of(const SharedSegment& slot) {
  return reinterpret_cast<uint32_t*>(slot.data());
}

bool is_free(const SharedSegment& slot) {
  return __atomic_load_n(state_of(slot), __ATOMIC_ACQUIRE) != kBusy;
}

size_t slot_bytes_for(int64_t message_bytes) {
  const size_t wanted = kHeaderBytes + static_cast<size_t>(message_bytes) * 9 / 8;
  return (wanted + kSizeStep - 1) / kSizeStep * kSizeStep;
}

}  // namespace

Letter SlotWriter::put(const pipeline::Batch& batch) {
  const MessageWriter message(batch);
  const size_t needed = kHeaderBytes + static_cast<size_t>(message.size());
  // A free slot large enough; else a free one grown; else a new one.
  int64_t index = -1;
  for (size_t i = 0; i < slots_.size() && index < 0; ++i) {
    if (is_free(*slots_[i]) && slots_[i]->size() >= needed) index = static_cast<int64_t>(i);
  }
  for (size_t i = 0; i < slots_.size() && index < 0; ++i) {
    if (is_free(*slots_[i])) {
      slots_[i]->grow(slot_bytes_for(message.size()));
      index = static_cast<int64_t>(i);
    }
  }
  if (index < 0) {
    if (static_cast<int64_t>(slots_.size()) >= kMaxSlots) {
      throw std::runtime_error(fmt::format(
          "{} messages in shared memory not yet released by their receiver", slots_.size()));
    }
    slots_.push_back(SharedSegment::create(slot_bytes_for(message.size())));
    index = static_cast<int64_t>(slots_.size()) - 1;
  }
  SharedSegment& slot = *slots_[static_cast<size_t>(index)];
  __atomic_store_n(state_of(slot), kBusy, __ATOMIC_RELAXED);
  message.write(slot.data() + kHeaderBytes);

  Letter words{};
  words[kMagic] = kNoticeMagic;
  words[kPid] = slot.address().pid;
  words[kFd] = slot.address().fd;
  words[kIndex] = index;
  words[kSlotBytes] = static_cast<int64_t>(slot.size());
  words[kMessageBytes] = message.size();
  return words;
}

at::Tensor SlotReader::open(const Letter& words) {
  const int64_t slot_bytes = words[kSlotBytes];
  const int64_t message_bytes = words[kMessageBytes];
  if (words[kMagic] != kNoticeMagic || words[kIndex] < 0 || words[kIndex] >= kMaxSlots ||
      message_bytes < kMinMessageBytes ||
      slot_bytes < static_cast<int64_t>(kHeaderBytes) + message_bytes) {
    throw std::runtime_error("malformed notice of a message in shared memory");
  }
  std::shared_ptr<SharedSegment>& slot = slots_[words[kIndex]];
  if (!slot || static_cast<int64_t>(slot->size()) < slot_bytes) {  // new, or grown since
    try {
      slot = SharedSegment::open({words[kPid], words[kFd]}, static_cast<size_t>(slot_bytes));
    } catch (const std::system_error& error) {
      throw std::runtime_error(
          fmt::format("cannot open the sender's shared memory: {}", error.what()));
    }
  }
  uint32_t* state = state_of(*slot);
  // Counted as the taking stage's memory, as a received buffer of its own would be.
  std::function<void()> uncount = profiler::CpuMemoryScope::count_held(message_bytes);
  return at::from_blob(
      slot->data() + kHeaderBytes, {message_bytes},
      [keep = slot, state, uncount](void*) {
        uncount();
        __atomic_store_n(state, 0u, __ATOMIC_RELEASE);
      },
      at::kByte);
}

}  // namespace pipebal::distributed
