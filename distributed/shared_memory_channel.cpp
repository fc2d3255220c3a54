// See shared_memory_channel.h.
#include "pipebal/distributed/shared_memory_channel.h"

#include <atomic>
#include <chrono>
#include <sstream>

#include <fmt/format.h>
#include <torch/torch.h>

#include "pipebal/distributed/remote_failure.h"
#include "pipebal/distributed/shared_mailbox.h"
#include "pipebal/distributed/shared_slots.h"
#include "pipebal/distributed/wire_message.h"
#include "pipebal/pipeline/schedule.h"

namespace pipebal::distributed {
namespace {

class SharedMemoryChannel : public pipeline::Channel {
 public:
  SharedMemoryChannel(std::shared_ptr<Group> group, const ChannelEnds& ends)
      : group_(std::move(group)), ends_(ends), receiving_(group_->rank() == ends.to_rank) {
    // Both ends make their channels in the same order, so they number them alike.
    const std::string name = fmt::format("shared_memory/mailbox/{}-{}/{}-{}", ends.from_rank,
                                         ends.to_rank, ends.from_stage, ends.to_stage);
    mailbox_key_ = fmt::format("{}/{}", name, group_->next_serial(name));
    if (receiving_) {
      mailbox_ = SharedMailbox::create(pipeline::kMaxChunks);
      group_->publish(mailbox_key_,
                      fmt::format("{} {}", mailbox_->address().pid, mailbox_->address().fd));
    }
  }

  void post(int micro_batch, pipeline::Parcel parcel) override {
    pipeline::synchronize(parcel.stream);  // the batch is computed before it is read
    if (!mailbox_) {
      std::istringstream published(group_->await(mailbox_key_));
      SegmentAddress address;
      if (!(published >> address.pid >> address.fd)) {
        throw std::runtime_error(
            fmt::format("rank {}'s mailbox address is malformed", ends_.to_rank));
      }
      mailbox_ = SharedMailbox::open(address, pipeline::kMaxChunks);
    }
    const Letter notice = writer_.put(parcel.batch);
    const auto deadline = Clock::now() + group_->timeout() + group_->report_grace();
    mailbox_->put(micro_batch, notice, [&] { check(micro_batch, deadline); });
  }

  pipeline::Parcel take(int micro_batch) override {
    if (cancelled_) throw pipeline::ChannelCancelled();
    const auto deadline = Clock::now() + group_->timeout() + group_->report_grace();
    const Letter notice = mailbox_->take(micro_batch, [&] { check(micro_batch, deadline); });
    try {
      return pipeline::Parcel(unpack_message(reader_.open(notice)));
    } catch (const std::runtime_error& error) {
      throw std::runtime_error(fmt::format("{}: {}", what(micro_batch), error.what()));
    }
  }

  void cancel() override { cancelled_ = true; }
  void reset() override { cancelled_ = false; }

 private:
  using Clock = std::chrono::steady_clock;

  // While waiting: ends the wait when the channel is cancelled, a failure is posted, the other
  // end's process has ended or the run's timeout has passed, and the moment given a failure's
  // report to come (Group::report_grace).
  void check(int micro_batch, Clock::time_point deadline) {
    if (cancelled_) throw pipeline::ChannelCancelled();
    group_->check_peer(receiving_ ? ends_.from_rank : ends_.to_rank, what(micro_batch));
    if (Clock::now() > deadline) {
      throw RemoteFailure(fmt::format("{}: nothing within {:g} s (--timeout)", what(micro_batch),
                                      group_->timeout().count() / 1000.0));
    }
  }

  std::string what(int micro_batch) const {
    return receiving_ ? ends_.waiting_for(micro_batch) : ends_.sending(micro_batch);
  }

  std::shared_ptr<Group> group_;
  ChannelEnds ends_;
  bool receiving_;
  std::string mailbox_key_;
  std::unique_ptr<SharedMailbox> mailbox_;  // the receiver's; the sender's once it first sends
  SlotWriter writer_;                       // the sender's slots
  SlotReader reader_;                       // the sender's slots, as the receiver maps them
  std::atomic<bool> cancelled_{false};
};

}  // namespace

std::unique_ptr<pipeline::Channel> shared_memory_channel(std::shared_ptr<Group> group,
                                                         const ChannelEnds& ends) {
  return std::make_unique<SharedMemoryChannel>(std::move(group), ends);
}

}  // namespace pipebal::distributed
