// How activations and gradients travel between stages in one process. A stage on an
// accelerator runs on its own stream (one from the device's pool), so stages overlap on the
// device and a message must be ordered after the work that produced it: the sender records an
// event on its stream, and the receiver's stream waits for that event — the host never waits.
// Uses the device-generic c10 stream and event API only, so the same code serves CUDA and any
// other backend with streams; CPU stages need none of it.
#pragma once

#include <optional>

#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <c10/core/StreamGuard.h>

#include "pipebal/pipeline/batch.h"

namespace pipebal::pipeline {

// A batch on its way from one stage to the next.
struct Parcel {
  Batch batch;
  std::optional<c10::Stream> stream;  // where the batch was computed, on an accelerator
  std::optional<c10::Event> ready;    // recorded on `stream` once the batch was computed

  Parcel() = default;
  explicit Parcel(Batch b) : batch(std::move(b)) {}
};

// A stream of its own for a stage on `device` (none on the CPU). A device without an index
// means index 0.
std::optional<c10::Stream> stage_stream(c10::Device device);

// The device with an explicit index (cuda → cuda:0); CPU stays as it is.
c10::Device with_index(c10::Device device);

// Sender side: wraps a batch computed on `stream` (if any) with the event that marks it ready.
Parcel pack(Batch batch, const std::optional<c10::Stream>& stream);

// Receiver side, on the receiver's thread: the parcel's tensors on `device`, ordered after the
// sender's work. An accelerator receiver's `stream` waits for the sender's event and copies on
// that stream; tensors it shares with the sender are recorded on it, so that the caching
// allocator cannot hand their memory to the sender while the receiver still reads it. A CPU
// receiver copies on the sender's stream and waits for the copy on the host.
Batch unpack(Parcel parcel, const c10::Device& device, const std::optional<c10::Stream>& stream);

// Makes `stream` the current one of its device on this thread while the guard lives; does
// nothing for none.
class CurrentStream {
 public:
  explicit CurrentStream(const std::optional<c10::Stream>& stream) {
    if (stream) guard_.reset_stream(*stream);
  }

 private:
  c10::OptionalStreamGuard guard_;
};

// Blocks the host until everything queued on `stream` has run (nothing on the CPU).
void synchronize(const std::optional<c10::Stream>& stream);

}  // namespace pipebal::pipeline
