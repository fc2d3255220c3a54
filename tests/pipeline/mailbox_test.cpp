// The mailbox between stages and the condition it waits on, which polls before it sleeps:
// messages arrive whether they come while the receiver polls or after it has gone to sleep, in
// any order, and cancelling wakes a waiter in either state.
#include "pipebal/pipeline/mailbox.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

namespace pipebal::pipeline {
namespace {

using std::chrono::milliseconds;

TEST(Mailbox, DeliversWhatArrivesWhileTheReceiverPollsAndAfterItSlept) {
  Mailbox<int> box;
  // 20 ms is long past the poll (1 ms): the receiver is asleep on the condition variable.
  for (const milliseconds delay : {milliseconds(0), milliseconds(20)}) {
    std::thread sender([&] {
      std::this_thread::sleep_for(delay);
      box.post(3, 30);
      box.post(1, 10);
    });
    EXPECT_EQ(box.take(1), 10) << "after " << delay.count() << " ms";
    EXPECT_EQ(box.take(3), 30);
    sender.join();
  }
}

TEST(Mailbox, TwoThreadsPassThousandsOfMessagesBackAndForth) {
  // A ping-pong: every message is due right after the other thread's, the case polling is for.
  Mailbox<int> forward, backward;
  constexpr int kRounds = 5000;
  std::thread echo([&] {
    for (int i = 0; i < kRounds; ++i) backward.post(i, forward.take(i) + 1);
  });
  int64_t sum = 0;
  for (int i = 0; i < kRounds; ++i) {
    forward.post(i, i);
    sum += backward.take(i);
  }
  echo.join();
  EXPECT_EQ(sum, int64_t{kRounds} * (kRounds - 1) / 2 + kRounds);
}

TEST(Mailbox, CancelWakesAPollingAndASleepingReceiver) {
  for (const milliseconds delay : {milliseconds(0), milliseconds(50)}) {
    Mailbox<int> box;
    std::future<void> waiting = std::async(std::launch::async, [&] { box.take(0); });
    std::this_thread::sleep_for(delay);
    box.cancel();
    EXPECT_THROW(waiting.get(), ChannelCancelled) << "after " << delay.count() << " ms";
    box.reset();
    box.post(0, 7);
    EXPECT_EQ(box.take(0), 7) << "usable after a reset";
  }
}

}  // namespace
}  // namespace pipebal::pipeline
