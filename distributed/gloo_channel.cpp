// See gloo_channel.h.
#include "pipebal/distributed/gloo_channel.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>

#include <fmt/format.h>
#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "pipebal/distributed/buffer_pool.h"
#include "pipebal/distributed/sends_in_flight.h"
#include "pipebal/distributed/tags.h"
#include "pipebal/distributed/wire_message.h"

namespace pipebal::distributed {
namespace {

// Capacity of a micro-batch's first message on a channel: later ones get the size of the last.
constexpr int64_t kFirstCapacityBytes = 4096;
// Receives a channel keeps posted ahead of the ones taken: enough that the sender's next message
// finds its receive waiting, few enough that a 1F1B stage holds no more buffers than it uses.
constexpr size_t kReceivesAhead = 2;

// One micro-batch's message per step, as a pipeline::Channel. Gloo sends a message only once its
// receive is posted, and answering a receive that comes later falls to the sender's I/O thread,
// which the kernel may leave waiting for milliseconds behind the sender's own computation. So the
// receiver keeps the receives of its next messages posted (expect(): kReceivesAhead of them, in
// the order it will take them), each a buffer of the micro-batch's capacity, and a message that
// fits travels as one send into it, leaving at once. The capacity of a message is
// the size of the previous message of the same micro-batch on the channel, which both ends know;
// a message that does not fit sends a capacity-sized notice of its size, then itself.
class GlooChannel : public pipeline::Channel {
 public:
  GlooChannel(std::shared_ptr<Group> group, const ChannelEnds& ends)
      : group_(std::move(group)),
        ends_(ends),
        sending_(*group_, fmt::format("sending to rank {}", ends_.to_rank)) {}

  void post(int micro_batch, pipeline::Parcel parcel) override {
    pipeline::synchronize(parcel.stream);  // the batch is computed before it is read
    const int tag = data_tag(micro_batch, ends_.from_stage, ends_.to_stage);
    int64_t& capacity = capacity_of(micro_batch);
    const MessageWriter writer(parcel.batch);
    const int64_t size = writer.size();
    if (size > capacity) {
      at::Tensor notice = send_buffers_.take(capacity);
      notice.zero_();
      std::memcpy(notice.data_ptr<uint8_t>(), &size, sizeof size);
      send(std::move(notice), tag);
    }
    // Room for the posted receive, which a smaller message leaves partly unused (zero).
    at::Tensor message = send_buffers_.take(std::max(size, capacity));
    writer.fill(message);
    send(std::move(message), tag);
    capacity = size;
  }

  void expect(const std::vector<int>& micro_batches) override {
    expected_.assign(micro_batches.begin(), micro_batches.end());
    post_ahead();
  }

  pipeline::Parcel take(int micro_batch) override {
    if (cancelled_) throw pipeline::ChannelCancelled();
    Receive first;
    if (auto it = posted_.find(micro_batch); it != posted_.end()) {
      first = std::move(it->second);
      posted_.erase(it);
    } else {
      first = post_receive(micro_batch);
    }
    if (auto it = std::find(expected_.begin(), expected_.end(), micro_batch);
        it != expected_.end()) {
      expected_.erase(it);
    }
    group_->wait(*first.work, what(micro_batch));
    at::Tensor message = first.buffer;
    const int64_t size = checked(micro_batch, [&] { return message_size(message); });
    if (size > message.numel()) {  // a notice: the message follows
      message = receive_buffers_.take(size);
      std::vector<at::Tensor> into{message};
      const int tag = data_tag(micro_batch, ends_.from_stage, ends_.to_stage);
      group_->wait(*group_->process_group().recv(into, ends_.from_rank, tag), what(micro_batch));
    }
    capacity_of(micro_batch) = size;
    post_ahead();
    return pipeline::Parcel(checked(micro_batch, [&] { return unpack_message(message); }));
  }

  void cancel() override { cancelled_ = true; }

  void reset() override {
    cancelled_ = false;
    // Sends of a failed step may still be pending; they are kept, not waited for.
  }

  void flush() override { sending_.wait_all(); }

 private:
  struct Receive {
    c10::intrusive_ptr<c10d::Work> work;
    at::Tensor buffer;
  };

  int64_t& capacity_of(int micro_batch) {
    if (static_cast<size_t>(micro_batch) >= capacity_.size()) {
      capacity_.resize(static_cast<size_t>(micro_batch) + 1, kFirstCapacityBytes);
    }
    return capacity_[static_cast<size_t>(micro_batch)];
  }

  // Posts the receives of the next expected messages, up to kReceivesAhead.
  void post_ahead() {
    for (size_t k = 0; k < expected_.size() && posted_.size() < kReceivesAhead; ++k) {
      if (posted_.count(expected_[k]) == 0) {
        posted_.emplace(expected_[k], post_receive(expected_[k]));
      }
    }
  }

  Receive post_receive(int micro_batch) {
    Receive receive;
    receive.buffer = receive_buffers_.take(capacity_of(micro_batch));
    std::vector<at::Tensor> into{receive.buffer};
    receive.work = group_->process_group().recv(
        into, ends_.from_rank, data_tag(micro_batch, ends_.from_stage, ends_.to_stage));
    return receive;
  }

  void send(at::Tensor tensor, int tag) {
    std::vector<at::Tensor> message{tensor};
    sending_.add(group_->process_group().send(message, ends_.to_rank, tag), std::move(tensor));
  }

  // `read()`, with a malformed message's error naming the channel.
  template <typename Read>
  auto checked(int micro_batch, Read read) const -> decltype(read()) {
    try {
      return read();
    } catch (const std::runtime_error& error) {
      throw std::runtime_error(fmt::format("{}: {}", what(micro_batch), error.what()));
    }
  }

  std::string what(int micro_batch) const { return ends_.waiting_for(micro_batch); }

  std::shared_ptr<Group> group_;
  ChannelEnds ends_;
  std::atomic<bool> cancelled_{false};
  std::vector<int64_t> capacity_;  // by micro-batch: the size of its next message
  std::deque<int> expected_;       // micro-batches still to take, in order
  std::map<int, Receive> posted_;  // receives posted ahead, by micro-batch
  SendsInFlight sending_;          // each buffer alive until its send is done
  BufferPool send_buffers_;        // messages packed, free again once sent
  BufferPool receive_buffers_;     // messages received, free again once the engine lets go
};

}  // namespace

std::unique_ptr<pipeline::Channel> gloo_channel(std::shared_ptr<Group> group,
                                                const ChannelEnds& ends) {
  return std::make_unique<GlooChannel>(std::move(group), ends);
}

}  // namespace pipebal::distributed
