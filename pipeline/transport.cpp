// See transport.h: the in-process transport.
#include "pipeline/transport.h"

namespace pipebal::pipeline {
namespace {

class MailboxChannel : public Channel {
 public:
  void post(int micro_batch, Parcel parcel) override {
    mailbox_.post(micro_batch, std::move(parcel));
  }
  Parcel take(int micro_batch) override { return mailbox_.take(micro_batch); }
  void cancel() override { mailbox_.cancel(); }
  void reset() override { mailbox_.reset(); }

 private:
  Mailbox<Parcel> mailbox_;
};

class InProcessTransport : public Transport {
 public:
  bool runs_stage(int, int) const override { return true; }
  std::unique_ptr<Channel> connect(int, int) override { return std::make_unique<MailboxChannel>(); }
  void share_losses(std::vector<double>&, int) override {}
  void report_failure(const std::string&) noexcept override {}
  bool remote() const override { return false; }
};

}  // namespace

std::shared_ptr<Transport> in_process_transport() {
  return std::make_shared<InProcessTransport>();
}

}  // namespace pipebal::pipeline
