// See nccl_link.h.
#include "pipebal/distributed/nccl_link.h"

#include <algorithm>
#include <stdexcept>

#include <c10/core/impl/VirtualGuardImpl.h>
#include <fmt/format.h>

#ifdef PIPEBAL_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace pipebal::distributed {

#ifdef PIPEBAL_WITH_NCCL

namespace {

class NcclLink : public TensorLink {
 public:
  NcclLink(Group& group, const ChannelEnds& ends, const c10::Device& device) : device_(device) {
    const int low = std::min(ends.from_rank, ends.to_rank);
    const std::string name = fmt::format("nccl/{}-{}/{}-{}", ends.from_rank, ends.to_rank,
                                         ends.from_stage, ends.to_stage);
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = group.timeout();
    const int me = group.rank() == low ? 0 : 1;
    nccl_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(
        group.store(fmt::format("{}/{}", name, group.next_serial(name))), me, 2, options);
    peer_ = 1 - me;
  }

  c10::Device device() const override { return device_; }

  c10::intrusive_ptr<c10d::Work> send(at::Tensor& tensor) override {
    std::vector<at::Tensor> message{tensor};
    return nccl_->send(message, peer_, 0);
  }

  c10::intrusive_ptr<c10d::Work> receive(at::Tensor& into) override {
    std::vector<at::Tensor> message{into};
    return nccl_->recv(message, peer_, 0);
  }

  std::optional<c10::Stream> ready_on() const override {
    return c10::impl::VirtualGuardImpl(device_.type()).getStream(device_);
  }

 private:
  c10::Device device_;
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl_;
  int peer_ = 0;
};

}  // namespace

bool nccl_available() {
  return true;
}

std::unique_ptr<TensorLink> nccl_link(Group& group, const ChannelEnds& ends,
                                      const c10::Device& device) {
  return std::make_unique<NcclLink>(group, ends, device);
}

#else

bool nccl_available() {
  return false;
}

std::unique_ptr<TensorLink> nccl_link(Group&, const ChannelEnds&, const c10::Device&) {
  throw std::logic_error("pipebal was built without NCCL");
}

#endif

}  // namespace pipebal::distributed
