// Messages through shared memory (shared_segment.h, shared_mailbox.h, shared_slots.h):
//  - a segment is one memory in two processes: a forked child maps the parent's segment by its
//    address, reads what the parent wrote and writes back, also after the parent grew it; the
//    mapping side keeps no file open, and many segments raise the open-file limit as needed;
//  - a mailbox carries letters between two processes, box by box in any order, a taker waiting
//    for a letter put later; a put waits for the box's last letter to be taken; a waiter's check
//    ends its wait by throwing;
//  - a batch put into a slot comes back equal from its notice;
//  - a slot is reused once the receiver's last view of its message is gone, and only then;
//    a free slot too small is grown rather than another made, and the reader maps it anew;
//  - a message held counts as the taking thread's memory until its last view is gone;
//  - malformed notices and slots that cannot be opened are refused with an error.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pipebal/distributed/shared_mailbox.h"
#include "pipebal/distributed/shared_segment.h"
#include "pipebal/distributed/shared_slots.h"
#include "pipebal/distributed/wire_message.h"
#include "pipebal/profiler/cpu_memory.h"

namespace {

using pipebal::distributed::Letter;
using pipebal::distributed::SharedMailbox;
using pipebal::distributed::SharedSegment;
using pipebal::distributed::SlotReader;
using pipebal::distributed::SlotWriter;
using pipebal::distributed::unpack_message;
using pipebal::pipeline::Batch;

// Runs `child` in a forked process (POSIX calls only) and returns its exit status.
template <typename Child>
int in_child(Child child) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(child());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(SharedSegment, AnotherProcessMapsTheSameMemoryAlsoAfterItGrew) {
  auto segment = SharedSegment::create(4096);
  std::memcpy(segment->data(), "parent", 7);
  const auto address = segment->address();
  EXPECT_EQ(in_child([&] {
              auto theirs = SharedSegment::open(address, 4096);
              if (std::memcmp(theirs->data(), "parent", 7) != 0) return 1;
              std::memcpy(theirs->data() + 100, "child", 6);
              return 0;
            }),
            0);
  EXPECT_EQ(std::memcmp(segment->data() + 100, "child", 6), 0);

  segment->grow(3 * 4096);
  EXPECT_EQ(segment->size(), 3u * 4096);
  EXPECT_EQ(std::memcmp(segment->data(), "parent", 7), 0) << "growing keeps the contents";
  std::memcpy(segment->data() + 2 * 4096, "grown", 6);
  EXPECT_EQ(in_child([&] {
              auto theirs = SharedSegment::open(address, 3 * 4096);
              return std::memcmp(theirs->data() + 2 * 4096, "grown", 6) == 0 ? 0 : 1;
            }),
            0);
}

TEST(SharedSegment, OpeningWhatIsNotThereOrIsSmallerThanAnnouncedThrows) {
  auto segment = SharedSegment::create(4096);
  EXPECT_THROW(SharedSegment::open({segment->address().pid, 100000}, 4096), std::system_error);
  EXPECT_THROW(SharedSegment::open(segment->address(), 8192), std::system_error);
}

int open_files() {
  int count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
    ++count;
  return count;
}

// A receiver maps a sender's segments without keeping a file open for each; a sender with more
// segments than the soft limit on open files allows raises it (to the hard limit) and goes on.
TEST(SharedSegment, TheReceiverKeepsNoFileOpenAndMakingManyRaisesTheLimit) {
  auto segment = SharedSegment::create(4096);
  const int before = open_files();
  auto theirs = SharedSegment::open(segment->address(), 4096);
  EXPECT_EQ(open_files(), before);
  EXPECT_THROW(theirs->grow(8192), std::logic_error);

  EXPECT_EQ(in_child([] {
              rlimit limit{};
              ::getrlimit(RLIMIT_NOFILE, &limit);
              if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < 256) return 0;  // no room
              limit.rlim_cur = 64;
              if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) return 2;
              std::vector<std::unique_ptr<SharedSegment>> many;
              try {
                for (int i = 0; i < 128; ++i) many.push_back(SharedSegment::create(4096));
              } catch (const std::system_error&) {
                return 1;
              }
              return 0;
            }),
            0);
}

Letter letter_of(int64_t n) {
  return {n, n + 1, n + 2, n + 3, n + 4, n + 5};
}

void never_stop() {}

// The child takes boxes 3, 0, 3, 1 (box 3 twice: two letters in turn) while the parent puts
// them in its own order, some after the child has begun to wait.
TEST(SharedMailbox, CarriesLettersBetweenProcessesBoxByBox) {
  auto mailbox = SharedMailbox::create(4);
  const auto address = mailbox->address();
  const pid_t child = ::fork();
  if (child == 0) {
    auto theirs = SharedMailbox::open(address, 4);
    const int boxes[] = {3, 0, 3, 1};
    const int64_t expected[] = {30, 0, 31, 10};
    for (int k = 0; k < 4; ++k) {
      if (theirs->take(boxes[k], never_stop) != letter_of(expected[k])) ::_exit(1 + k);
    }
    ::_exit(0);
  }
  mailbox->put(0, letter_of(0), never_stop);
  mailbox->put(3, letter_of(30), never_stop);
  mailbox->put(1, letter_of(10), never_stop);
  mailbox->put(3, letter_of(31), never_stop);  // waits for the child to take the first
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's take that failed, from 1";
}

TEST(SharedMailbox, AWaitEndsWhenItsCheckThrowsAndOnlyAfterwards) {
  auto mailbox = SharedMailbox::create(2);
  int checks = 0;
  auto stop_at_third = [&] {
    if (++checks == 3) throw std::runtime_error("stop");
  };
  EXPECT_THROW(mailbox->take(1, stop_at_third), std::runtime_error) << "nothing was put";
  EXPECT_EQ(checks, 3);
  mailbox->put(1, letter_of(7), never_stop);
  checks = 0;
  EXPECT_THROW(mailbox->put(1, letter_of(8), stop_at_third), std::runtime_error)
      << "the box's last letter is not taken";
  EXPECT_EQ(mailbox->take(1, never_stop), letter_of(7));
  mailbox->put(1, letter_of(9), never_stop);
  EXPECT_EQ(mailbox->take(1, never_stop), letter_of(9));
  EXPECT_THROW(mailbox->take(2, never_stop), std::out_of_range);
  EXPECT_THROW(mailbox->put(-1, letter_of(0), never_stop), std::out_of_range);
}

Batch batch_of(int64_t rows) {
  Batch batch;
  batch.tensors.push_back(torch::randn({rows, 8}, torch::kDouble));
  batch.tensors.push_back(torch::randint(0, 9, {rows}, torch::kLong));
  batch.skips["skip"] = torch::randn({rows, 3}, torch::kFloat);
  return batch;
}

void expect_equal(const Batch& got, const Batch& want) {
  ASSERT_EQ(got.tensors.size(), want.tensors.size());
  for (size_t t = 0; t < want.tensors.size(); ++t)
    EXPECT_TRUE(torch::equal(got.tensors[t], want.tensors[t])) << "tensor " << t;
  ASSERT_EQ(got.skips.count("skip"), 1u);
  EXPECT_TRUE(torch::equal(got.skips.at("skip"), want.skips.at("skip")));
}

TEST(SharedSlots, ABatchComesBackEqualFromItsNotice) {
  SlotWriter writer;
  SlotReader reader;
  const Batch batch = batch_of(5);
  const Letter notice = writer.put(batch);
  expect_equal(unpack_message(reader.open(notice)), batch);
}

TEST(SharedSlots, ASlotIsReusedOnceTheLastViewOfItsMessageIsGoneAndNotBefore) {
  SlotWriter writer;
  SlotReader reader;
  const Batch first = batch_of(5);
  Batch held = unpack_message(reader.open(writer.put(first)));
  const Batch second = batch_of(5);
  const Batch got = unpack_message(reader.open(writer.put(second)));
  EXPECT_EQ(writer.slots(), 2u) << "the first message's slot is still viewed";
  expect_equal(held, first);  // not overwritten by the second
  expect_equal(got, second);

  held = Batch();  // the first slot's views are gone
  const Batch third = batch_of(5);
  expect_equal(unpack_message(reader.open(writer.put(third))), third);
  EXPECT_EQ(writer.slots(), 2u) << "the free slot is reused";
}

// A message held in the sender's slot counts as memory of the stage that took it, as a buffer
// of its own would, until its last view is gone.
TEST(SharedSlots, AMessageCountsAsTheTakingThreadsMemoryWhileHeld) {
  pipebal::profiler::CpuMemoryScope scope;
  SlotWriter writer;
  SlotReader reader;
  const Batch batch = batch_of(1000);  // the sender's, untagged
  const Letter notice = writer.put(batch);
  pipebal::profiler::CpuMemoryScope::set_thread_tag(9);
  const int64_t before = scope.current_bytes(9);
  at::Tensor message = reader.open(notice);
  EXPECT_EQ(scope.current_bytes(9) - before, message.numel());
  Batch held = unpack_message(message);
  message.reset();
  EXPECT_EQ(scope.current_bytes(9) - before, pipebal::distributed::MessageWriter(batch).size());
  held = Batch();
  EXPECT_EQ(scope.current_bytes(9), before);
  pipebal::profiler::CpuMemoryScope::set_thread_tag(-1);
}

TEST(SharedSlots, AFreeSlotTooSmallIsGrownAndTheReaderMapsItAnew) {
  SlotWriter writer;
  SlotReader reader;
  const Batch small = batch_of(4);
  expect_equal(unpack_message(reader.open(writer.put(small))), small);
  const Batch large = batch_of(20000);  // ~2 MiB: beyond the first slot's 64 KiB
  expect_equal(unpack_message(reader.open(writer.put(large))), large);
  EXPECT_EQ(writer.slots(), 1u);
  const Batch small_again = batch_of(3);
  expect_equal(unpack_message(reader.open(writer.put(small_again))), small_again);
  EXPECT_EQ(writer.slots(), 1u);
}

TEST(SharedSlots, MalformedNoticesAndSlotsThatCannotBeOpenedAreRefused) {
  SlotWriter writer;
  const Letter notice = writer.put(batch_of(2));
  auto with_word = [&](size_t word, int64_t value) {
    Letter bad = notice;
    bad[word] = value;
    return bad;
  };
  auto refused = [](const Letter& bad, const std::string& says) {
    SlotReader reader;
    try {
      reader.open(bad);
      ADD_FAILURE() << "accepted a notice that should say " << says;
    } catch (const std::runtime_error& error) {
      EXPECT_NE(std::string(error.what()).find(says), std::string::npos) << error.what();
    }
  };
  refused(with_word(0, 42), "malformed notice");  // magic
  refused(with_word(3, -1), "malformed notice");  // slot index
  refused(with_word(4, 16), "malformed notice");  // slot smaller than message
  refused(with_word(2, 100000), "cannot open the sender's shared memory");  // no such fd
  refused(with_word(4, int64_t{1} << 40), "cannot open the sender's shared memory");
}

}  // namespace
