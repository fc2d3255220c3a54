// How a pipeline's stages reach each other. A Transport says which stages this process runs and
// makes the Channel between two neighbouring stages; the engine (pipeline.h) executes the
// schedule of its own stages and talks to their neighbours only through channels. Two
// implementations: every stage a thread of this process, joined by mailboxes (in_process_
// transport() below), and one process per stage over c10d (distributed/c10d_transport.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pipebal/pipeline/mailbox.h"  // ChannelCancelled
#include "pipebal/pipeline/transfer.h"

namespace pipebal::pipeline {

// One direction between two neighbouring stages (activations forward, or gradients backward),
// keyed by micro-batch. post() never waits for the receiver; take() blocks until that
// micro-batch arrives.
class Channel {
 public:
  virtual ~Channel() = default;
  virtual void post(int micro_batch, Parcel parcel) = 0;
  // Before a run, on the receiving side: the micro-batches it will take(), in order. A remote
  // channel posts their receives ahead, so that each message can leave as soon as it is posted.
  virtual void expect(const std::vector<int>& micro_batches) { (void)micro_batches; }
  // Throws ChannelCancelled after cancel(), or an error naming the peer when it is lost.
  virtual Parcel take(int micro_batch) = 0;
  // Wakes every take() with ChannelCancelled, until reset().
  virtual void cancel() = 0;
  // Before a step: no message left over, no cancellation.
  virtual void reset() = 0;
  // After a step's last action on the sending side: returns once every posted message has left
  // (a remote channel's sends are in flight until then).
  virtual void flush() {}
};

class Transport {
 public:
  virtual ~Transport() = default;
  // Whether this process runs stage `stage` of `stages`.
  virtual bool runs_stage(int stage, int stages) const = 0;
  // The channel from stage `from` to its neighbour `to` (|from - to| = 1); at least one of the
  // two runs in this process.
  virtual std::unique_ptr<Channel> connect(int from, int to) = 0;
  // After a step: makes every process's `losses` (per micro-batch) those the last stage
  // computed. Also the point where every process has finished the step.
  virtual void share_losses(std::vector<double>& losses, int last_stage) = 0;
  // A stage of this process failed with `what`: tells the other processes, whose waits then end
  // with an error naming this process. Never throws.
  virtual void report_failure(const std::string& what) noexcept = 0;
  // Whether stages run in other processes (the engine then waits a little longer before
  // blaming a timeout on a stage that only waits for a message: see Pipeline).
  virtual bool remote() const = 0;
  // Milliseconds to add to this process's steady clock to read the clock every process's
  // timeline shares (0 in one process).
  virtual double clock_offset_ms() const { return 0; }
};

// Every stage a thread of this process; neighbours joined by in-memory mailboxes. `on_take`, if
// given, is called on the taking stage's thread with each batch it takes (memory accounting:
// profiler/taken_batch.h).
using TakeHook = std::function<void(Batch&)>;
std::shared_ptr<Transport> in_process_transport(TakeHook on_take = nullptr);

}  // namespace pipebal::pipeline
