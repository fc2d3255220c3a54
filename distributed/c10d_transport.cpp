// See c10d_transport.h.
#include "distributed/c10d_transport.h"

#include <atomic>

#include <fmt/format.h>
#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "distributed/tags.h"

namespace pipebal::distributed {
namespace {

// A message is three sends with the micro-batch's tag: the length of its description, the
// description (int64 words), then the data of each defined, non-empty tensor.
//   description = tensor count, skip count, each tensor's layout, then per skip tensor: name
//   length, the name's bytes (one per word), its layout;
//   layout = 0 for an undefined tensor, else 1, dtype, dims, sizes.
void describe(const at::Tensor& tensor, std::vector<int64_t>& words) {
  if (!tensor.defined()) {
    words.push_back(0);
    return;
  }
  words.push_back(1);
  words.push_back(static_cast<int64_t>(tensor.scalar_type()));
  words.push_back(tensor.dim());
  for (int64_t size : tensor.sizes()) words.push_back(size);
}

struct Reader {
  const int64_t* word;
  const int64_t* end;
  int64_t next() {
    if (word == end) throw std::runtime_error("malformed message description (too short)");
    return *word++;
  }
  at::Tensor layout() {
    if (next() == 0) return {};
    const auto dtype = static_cast<at::ScalarType>(next());
    std::vector<int64_t> sizes(static_cast<size_t>(next()));
    for (auto& size : sizes) size = next();
    return at::empty(sizes, at::TensorOptions().dtype(dtype));
  }
};

class C10dChannel : public pipeline::Channel {
 public:
  // From stage `from` on rank `from_rank` to its neighbour `to` on `to_rank`.
  C10dChannel(std::shared_ptr<Group> group, int from, int to, int from_rank, int to_rank)
      : group_(std::move(group)),
        from_stage_(from),
        to_stage_(to),
        from_(from_rank),
        to_(to_rank) {}

  void post(int micro_batch, pipeline::Parcel parcel) override {
    pipeline::synchronize(parcel.stream);  // the batch is computed before it is read
    std::vector<at::Tensor> data;
    std::vector<int64_t> words{static_cast<int64_t>(parcel.batch.tensors.size()),
                               static_cast<int64_t>(parcel.batch.skips.size())};
    auto add = [&](const at::Tensor& tensor) {
      at::Tensor host = tensor.defined() ? tensor.detach().to(at::kCPU).contiguous() : tensor;
      describe(host, words);
      if (host.defined() && host.numel() > 0) data.push_back(host);
    };
    for (const auto& tensor : parcel.batch.tensors) add(tensor);
    for (const auto& [name, tensor] : parcel.batch.skips) {
      words.push_back(static_cast<int64_t>(name.size()));
      for (unsigned char c : name) words.push_back(c);
      add(tensor);
    }
    const int tag = data_tag(micro_batch, from_stage_, to_stage_);
    send(at::tensor({static_cast<int64_t>(words.size())}, at::kLong), tag);
    send(at::tensor(words, at::kLong), tag);
    for (auto& tensor : data) send(tensor, tag);
  }

  pipeline::Parcel take(int micro_batch) override {
    if (cancelled_) throw pipeline::ChannelCancelled();
    const int tag = data_tag(micro_batch, from_stage_, to_stage_);
    at::Tensor length = at::empty({1}, at::kLong);
    receive(length, tag, micro_batch);
    const int64_t count = length.item<int64_t>();
    if (count < 2 || count > (int64_t{1} << 24)) {
      throw std::runtime_error(
          fmt::format("{}: malformed message (description of {} words)", what(micro_batch), count));
    }
    at::Tensor words = at::empty({count}, at::kLong);
    receive(words, tag, micro_batch);
    Reader reader{words.data_ptr<int64_t>(), words.data_ptr<int64_t>() + count};
    pipeline::Batch batch;
    const int64_t tensors = reader.next();
    const int64_t skips = reader.next();
    auto fill = [&](at::Tensor tensor) {
      if (tensor.defined() && tensor.numel() > 0) receive(tensor, tag, micro_batch);
      return tensor;
    };
    for (int64_t t = 0; t < tensors; ++t) batch.tensors.push_back(fill(reader.layout()));
    for (int64_t k = 0; k < skips; ++k) {
      std::string name(static_cast<size_t>(reader.next()), '\0');
      for (auto& c : name) c = static_cast<char>(reader.next());
      batch.skips[name] = fill(reader.layout());
    }
    return pipeline::Parcel(std::move(batch));
  }

  void cancel() override { cancelled_ = true; }

  void reset() override {
    cancelled_ = false;
    // Sends of a failed step may still be pending; they are kept, not waited for.
  }

  void flush() override {
    for (auto& work : sending_) {
      group_->wait(*work, fmt::format("sending to rank {}", to_));
    }
    sending_.clear();
    kept_.clear();
  }

 private:
  void send(at::Tensor tensor, int tag) {
    std::vector<at::Tensor> message{tensor};
    sending_.push_back(group_->process_group().send(message, to_, tag));
    kept_.push_back(std::move(tensor));  // alive until the send completed
  }

  void receive(at::Tensor& tensor, int tag, int micro_batch) {
    std::vector<at::Tensor> message{tensor};
    auto work = group_->process_group().recv(message, from_, tag);
    group_->wait(*work, what(micro_batch));
  }

  std::string what(int micro_batch) const {
    return fmt::format("waiting for rank {}'s {} of micro-batch {} (stage {} to {})", from_,
                       to_stage_ > from_stage_ ? "activations" : "gradients", micro_batch,
                       from_stage_, to_stage_);
  }

  std::shared_ptr<Group> group_;
  int from_stage_;
  int to_stage_;
  int from_;
  int to_;
  std::atomic<bool> cancelled_{false};
  std::vector<c10::intrusive_ptr<c10d::Work>> sending_;
  std::vector<at::Tensor> kept_;
};

class C10dTransport : public pipeline::Transport {
 public:
  C10dTransport(std::shared_ptr<Group> group, Placement placement)
      : group_(std::move(group)),
        placement_(placement),
        replica_(placement.replica_of(group_->rank())) {}

  bool runs_stage(int stage, int stages) const override {
    if (stages % placement_.devices != 0) {
      throw std::invalid_argument(
          fmt::format("a pipeline of {} stages on a run placed for {} processes per pipeline",
                      stages, placement_.devices));
    }
    return placement_.runs(stage, group_->rank());
  }

  std::unique_ptr<pipeline::Channel> connect(int from, int to) override {
    return std::make_unique<C10dChannel>(
        group_, from, to, placement_.rank_of(placement_.device_of_stage(from), replica_),
        placement_.rank_of(placement_.device_of_stage(to), replica_));
  }

  // The mean over the replicas of their last stages' losses (each replica's losses weigh its
  // share of the batch), on every rank.
  void share_losses(std::vector<double>& losses, int last_stage) override {
    at::Tensor all = at::tensor(losses, at::kDouble) / placement_.replicas;
    if (!placement_.runs(last_stage, group_->rank())) all.zero_();
    std::vector<at::Tensor> message{all};
    auto work = group_->process_group().allreduce(message);
    group_->wait(*work, "sharing the step's losses");
    for (size_t i = 0; i < losses.size(); ++i)
      losses[i] = all[static_cast<int64_t>(i)].item<double>();
  }

  void report_failure(const std::string& what) noexcept override { group_->report_failure(what); }
  bool remote() const override { return true; }
  double clock_offset_ms() const override { return group_->clock_offset_ms(); }

 private:
  std::shared_ptr<Group> group_;
  Placement placement_;
  int replica_;
};

}  // namespace

std::shared_ptr<pipeline::Transport> c10d_transport(std::shared_ptr<Group> group,
                                                    Placement placement) {
  return std::make_shared<C10dTransport>(std::move(group), placement);
}

}  // namespace pipebal::distributed
