// See tensor_channel.h.
#include "pipebal/distributed/tensor_channel.h"

#include <algorithm>
#include <atomic>

#include <fmt/format.h>
#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "pipebal/distributed/gloo_channel.h"
#include "pipebal/distributed/sends_in_flight.h"
#include "pipebal/distributed/wire_message.h"

namespace pipebal::distributed {
namespace {

// The tensors of a batch that hold data, in the order its description lists them.
std::vector<at::Tensor*> tensors_with_data(pipeline::Batch& batch) {
  std::vector<at::Tensor*> all;
  auto add = [&](at::Tensor& tensor) {
    if (tensor.defined() && tensor.numel() > 0) all.push_back(&tensor);
  };
  for (at::Tensor& tensor : batch.tensors) add(tensor);
  for (auto& [name, tensor] : batch.skips) add(tensor);
  return all;
}

class GlooLink : public TensorLink {
 public:
  GlooLink(Group& group, const ChannelEnds& ends) {
    const int low = std::min(ends.from_rank, ends.to_rank);
    const int high = std::max(ends.from_rank, ends.to_rank);
    const std::string name = fmt::format("link/{}-{}/{}-{}", ends.from_rank, ends.to_rank,
                                         ends.from_stage, ends.to_stage);
    gloo_ = group.subgroup(fmt::format("{}/{}", name, group.next_serial(name)), {low, high});
    peer_ = group.rank() == low ? 1 : 0;
  }

  c10::Device device() const override { return c10::kCPU; }

  c10::intrusive_ptr<c10d::Work> send(at::Tensor& tensor) override {
    std::vector<at::Tensor> message{tensor};
    return gloo_->send(message, peer_, 0);  // one tag: matched in order, as NCCL does
  }

  c10::intrusive_ptr<c10d::Work> receive(at::Tensor& into) override {
    std::vector<at::Tensor> message{into};
    return gloo_->recv(message, peer_, 0);
  }

  std::optional<c10::Stream> ready_on() const override { return std::nullopt; }

 private:
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo_;
  int peer_ = 0;  // the other rank, in the link's group of two
};

class TensorChannel : public pipeline::Channel {
 public:
  TensorChannel(std::shared_ptr<Group> group, const ChannelEnds& ends,
                std::unique_ptr<TensorLink> link)
      : group_(group),
        ends_(ends),
        link_(std::move(link)),
        descriptions_(gloo_channel(group, ends)),
        sending_(*group_, fmt::format("sending to rank {}", ends_.to_rank)) {}

  void post(int micro_batch, pipeline::Parcel parcel) override {
    pipeline::Batch description(
        {pack_description(parcel.batch), at::tensor({sent_}, at::TensorOptions(at::kLong))});
    descriptions_->post(micro_batch, pipeline::Parcel(std::move(description)));
    // A device link's sends (and a copy to its device) follow the batch's computation.
    pipeline::CurrentStream on(parcel.stream);
    for (at::Tensor* tensor : tensors_with_data(parcel.batch)) {
      at::Tensor data = tensor->detach().to(link_->device()).contiguous();
      sending_.add(link_->send(data), data);
    }
    ++sent_;
  }

  void expect(const std::vector<int>& micro_batches) override {
    descriptions_->expect(micro_batches);
  }

  pipeline::Parcel take(int micro_batch) override {
    if (cancelled_) throw pipeline::ChannelCancelled();
    pipeline::Batch description = descriptions_->take(micro_batch).batch;
    if (description.tensors.size() != 2 || description.tensors[1].numel() != 1) {
      throw std::runtime_error(fmt::format("{}: malformed description", what(micro_batch)));
    }
    const int64_t number = description.tensors[1].item<int64_t>();
    if (number != received_) {
      throw std::runtime_error(fmt::format(
          "{}: it was sent as message {} of the channel, taken as message {}: the two stages "
          "take the channel's messages in different orders, which a link that matches them in "
          "order cannot carry",
          what(micro_batch), number, received_));
    }
    pipeline::Batch batch;
    try {
      batch = unpack_description(description.tensors[0], link_->device());
    } catch (const std::runtime_error& error) {
      throw std::runtime_error(fmt::format("{}: {}", what(micro_batch), error.what()));
    }
    for (at::Tensor* tensor : tensors_with_data(batch)) {
      group_->wait(*link_->receive(*tensor), what(micro_batch));
    }
    ++received_;
    return pipeline::pack(std::move(batch), link_->ready_on());
  }

  void cancel() override {
    cancelled_ = true;
    descriptions_->cancel();
  }

  void reset() override {
    cancelled_ = false;
    descriptions_->reset();
  }

  void flush() override {
    descriptions_->flush();
    sending_.wait_all();
  }

 private:
  std::string what(int micro_batch) const { return ends_.waiting_for(micro_batch); }

  std::shared_ptr<Group> group_;
  ChannelEnds ends_;
  std::unique_ptr<TensorLink> link_;
  std::unique_ptr<pipeline::Channel> descriptions_;
  std::atomic<bool> cancelled_{false};
  int64_t sent_ = 0;      // messages posted, ever
  int64_t received_ = 0;  // messages taken, ever
  SendsInFlight sending_;
};

}  // namespace

std::unique_ptr<TensorLink> gloo_link(Group& group, const ChannelEnds& ends) {
  return std::make_unique<GlooLink>(group, ends);
}

std::unique_ptr<pipeline::Channel> tensor_channel(std::shared_ptr<Group> group,
                                                  const ChannelEnds& ends,
                                                  std::unique_ptr<TensorLink> link) {
  return std::make_unique<TensorChannel>(std::move(group), ends, std::move(link));
}

}  // namespace pipebal::distributed
