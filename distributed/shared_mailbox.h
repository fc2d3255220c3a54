// The letters of one channel between two processes on one host, in memory both map: a box per
// micro-batch, where the sender puts a few words (a slot's notice, shared_slots.h) and the
// receiver takes them, sleeping on a futex meanwhile. No socket and no other thread takes part,
// so a letter reaches a waiting receiver within microseconds even when every core is busy (a
// Gloo message's arrival waits for its I/O thread to be scheduled). Torch-free.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>

#include "pipebal/distributed/shared_segment.h"

namespace pipebal::distributed {

constexpr int kLetterWords = 6;
using Letter = std::array<int64_t, kLetterWords>;

class SharedMailbox {
 public:
  // How long a waiter polls before it sleeps, and how long each sleep lasts at most before it
  // calls its `check` again.
  static constexpr int kPollMicroseconds = 1000;
  static constexpr int kSleepMilliseconds = 10;

  // The receiver's: `boxes` boxes (untouched boxes take no memory). Throws std::system_error.
  static std::unique_ptr<SharedMailbox> create(int boxes);
  // The sender's view of a receiver's mailbox. Throws std::system_error.
  static std::unique_ptr<SharedMailbox> open(const SegmentAddress& address, int boxes);

  SegmentAddress address() const { return segment_->address(); }
  int boxes() const { return boxes_; }

  // Puts `letter` into `box`; should the box's last letter not be taken yet, waits for it first.
  // Throws std::out_of_range for a box that does not exist.
  void put(int box, const Letter& letter, const std::function<void()>& check);
  // Waits for `box`'s next letter and takes it. `check` is called at least every
  // kSleepMilliseconds while waiting: it throws to end the wait.
  Letter take(int box, const std::function<void()>& check);

 private:
  SharedMailbox(std::unique_ptr<SharedSegment> segment, int boxes)
      : segment_(std::move(segment)), boxes_(boxes) {}
  struct Box;
  Box& box(int index);

  std::unique_ptr<SharedSegment> segment_;
  int boxes_;
};

}  // namespace pipebal::distributed
