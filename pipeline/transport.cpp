// See transport.h: the in-process transport.
#include "pipebal/pipeline/transport.h"

#include <utility>

namespace pipebal::pipeline {
namespace {

class MailboxChannel : public Channel {
 public:
  explicit MailboxChannel(TakeHook on_take) : on_take_(std::move(on_take)) {}
  void post(int micro_batch, Parcel parcel) override {
    mailbox_.post(micro_batch, std::move(parcel));
  }
  Parcel take(int micro_batch) override {
    Parcel parcel = mailbox_.take(micro_batch);
    if (on_take_) on_take_(parcel.batch);
    return parcel;
  }
  void cancel() override { mailbox_.cancel(); }
  void reset() override { mailbox_.reset(); }

 private:
  TakeHook on_take_;
  Mailbox<Parcel> mailbox_;
};

class InProcessTransport : public Transport {
 public:
  explicit InProcessTransport(TakeHook on_take) : on_take_(std::move(on_take)) {}
  bool runs_stage(int, int) const override { return true; }
  std::unique_ptr<Channel> connect(int, int) override {
    return std::make_unique<MailboxChannel>(on_take_);
  }
  void share_losses(std::vector<double>&, int) override {}
  void report_failure(const std::string&) noexcept override {}
  bool remote() const override { return false; }

 private:
  TakeHook on_take_;
};

}  // namespace

std::shared_ptr<Transport> in_process_transport(TakeHook on_take) {
  return std::make_shared<InProcessTransport>(std::move(on_take));
}

}  // namespace pipebal::pipeline
