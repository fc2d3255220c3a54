// See shared_mailbox.h.
#include "pipebal/distributed/shared_mailbox.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <stdexcept>
#include <string>
#include <thread>

namespace pipebal::distributed {

// One cache line per box: the sender counts letters put, the receiver letters taken; a letter
// is waiting while they differ. Each side sleeps on the other's count.
struct alignas(64) SharedMailbox::Box {
  uint32_t put;
  uint32_t taken;
  int64_t letter[kLetterWords];
};

namespace {

uint32_t load(const uint32_t& word) {
  return __atomic_load_n(&word, __ATOMIC_ACQUIRE);
}

// Futexes on memory other processes map: not FUTEX_PRIVATE_FLAG.
void sleep_while(uint32_t& word, uint32_t value) {
  timespec timeout{0, SharedMailbox::kSleepMilliseconds * 1000000L};
  ::syscall(SYS_futex, &word, FUTEX_WAIT, value, &timeout, nullptr, 0);
}

void wake(uint32_t& word) {
  ::syscall(SYS_futex, &word, FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

// Returns once `word` differs from `value`: polls, then sleeps, calling `check` in between.
void wait_while(uint32_t& word, uint32_t value, const std::function<void()>& check) {
  if (load(word) != value) return;
  const auto poll_until = std::chrono::steady_clock::now() +
                          std::chrono::microseconds(SharedMailbox::kPollMicroseconds);
  while (load(word) == value) {
    if (std::chrono::steady_clock::now() < poll_until) {
      std::this_thread::yield();
      continue;
    }
    check();
    sleep_while(word, value);
  }
}

}  // namespace

std::unique_ptr<SharedMailbox> SharedMailbox::create(int boxes) {
  if (boxes < 1) throw std::out_of_range("a mailbox needs at least one box");
  return std::unique_ptr<SharedMailbox>(
      new SharedMailbox(SharedSegment::create(sizeof(Box) * static_cast<size_t>(boxes)), boxes));
}

std::unique_ptr<SharedMailbox> SharedMailbox::open(const SegmentAddress& address, int boxes) {
  if (boxes < 1) throw std::out_of_range("a mailbox needs at least one box");
  return std::unique_ptr<SharedMailbox>(new SharedMailbox(
      SharedSegment::open(address, sizeof(Box) * static_cast<size_t>(boxes)), boxes));
}

SharedMailbox::Box& SharedMailbox::box(int index) {
  static_assert(sizeof(Box) == 64, "a box fills one cache line");
  if (index < 0 || index >= boxes_) {
    throw std::out_of_range("mailbox box " + std::to_string(index) + " of " +
                            std::to_string(boxes_));
  }
  return reinterpret_cast<Box*>(segment_->data())[index];
}

void SharedMailbox::put(int index, const Letter& letter, const std::function<void()>& check) {
  Box& b = box(index);
  const uint32_t put = __atomic_load_n(&b.put, __ATOMIC_RELAXED);  // only this side writes it
  wait_while(b.taken, put - 1, check);  // the last letter taken (taken == put)
  for (int w = 0; w < kLetterWords; ++w) b.letter[w] = letter[static_cast<size_t>(w)];
  __atomic_store_n(&b.put, put + 1, __ATOMIC_RELEASE);
  wake(b.put);
}

Letter SharedMailbox::take(int index, const std::function<void()>& check) {
  Box& b = box(index);
  const uint32_t taken = __atomic_load_n(&b.taken, __ATOMIC_RELAXED);  // only this side writes it
  wait_while(b.put, taken, check);
  Letter letter;
  for (int w = 0; w < kLetterWords; ++w) letter[static_cast<size_t>(w)] = b.letter[w];
  __atomic_store_n(&b.taken, taken + 1, __ATOMIC_RELEASE);
  wake(b.taken);
  return letter;
}

}  // namespace pipebal::distributed
