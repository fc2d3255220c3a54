// See transfer.h.
#include "pipebal/pipeline/transfer.h"

#include <ATen/core/Tensor.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace pipebal::pipeline {
namespace {

using c10::impl::VirtualGuardImpl;

// Moves one tensor to `device` on the current stream; see unpack().
at::Tensor receive(const at::Tensor& t, const c10::Device& device,
                   const std::optional<c10::Stream>& stream) {
  if (!t.defined()) return t;
  at::Tensor moved = t.to(device, /*non_blocking=*/stream.has_value());
  // Reads of the sender's memory on the receiver's stream outlive the sender's own uses of it.
  if (stream && !t.device().is_cpu() && t.has_storage()) {
    VirtualGuardImpl(t.device().type()).recordDataPtrOnStream(t.storage().data_ptr(), *stream);
  }
  return moved;
}

Batch receive_all(Batch batch, const c10::Device& device,
                  const std::optional<c10::Stream>& stream) {
  for (auto& t : batch.tensors) t = receive(t, device, stream);
  for (auto& [name, t] : batch.skips) t = receive(t, device, stream);
  return batch;
}

}  // namespace

c10::Device with_index(c10::Device device) {
  if (device.is_cpu() || device.has_index()) return device;
  return c10::Device(device.type(), 0);
}

std::optional<c10::Stream> stage_stream(c10::Device device) {
  if (device.is_cpu()) return std::nullopt;
  device = with_index(device);
  return VirtualGuardImpl(device.type()).getStreamFromGlobalPool(device);
}

Parcel pack(Batch batch, const std::optional<c10::Stream>& stream) {
  Parcel parcel(std::move(batch));
  if (stream) {
    parcel.stream = stream;
    parcel.ready.emplace(stream->device_type());
    parcel.ready->record(*stream);
  }
  return parcel;
}

Batch unpack(Parcel parcel, const c10::Device& device, const std::optional<c10::Stream>& stream) {
  if (stream) {
    if (parcel.ready) parcel.ready->block(*stream);
    CurrentStream on_receiver_stream(stream);
    return receive_all(std::move(parcel.batch), device, stream);
  }
  // A CPU receiver: a copy queued on the sender's stream runs after the sender's work, and a
  // blocking copy to the CPU waits for it.
  CurrentStream on_sender_stream(parcel.stream);
  return receive_all(std::move(parcel.batch), device, std::nullopt);
}

void synchronize(const std::optional<c10::Stream>& stream) {
  if (stream) VirtualGuardImpl(stream->device_type()).synchronizeStream(*stream);
}

}  // namespace pipebal::pipeline
