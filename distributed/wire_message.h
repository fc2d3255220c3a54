// A pipeline message as it travels between ranks: one byte buffer that describes itself, so the
// receiver needs to know nothing in advance. Layout (int64 words, then bytes):
//   word 0       the message's size in bytes
//   word 1       D, the description's length in words
//   words 2..    the description: tensor count, skip count, each tensor's layout, then per skip
//                tensor: name length, the name's bytes (one per word), its layout;
//                layout = 0 for an undefined tensor, else 1, dtype, dims, sizes
//   then         each defined, non-empty tensor's bytes, at 64-byte aligned offsets, in the
//                description's order.
// Packing copies the tensors into the buffer (from any device); unpacking makes views of it.
// A description alone (no tensor bytes) is a message too: it tells a receiver what tensors to
// make room for when they travel by themselves (tensor_channel.h).
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "pipebal/pipeline/batch.h"

namespace pipebal::distributed {

// The smallest message: its size and an empty description's two words.
constexpr int64_t kMinMessageBytes = 4 * 8;

// The message of a batch, laid out: its size first, so that room can be found for it, then
// written into that room. Holds references to the batch's tensors.
class MessageWriter {
 public:
  enum class Contents { kTensors, kDescription };
  explicit MessageWriter(const pipeline::Batch& batch, Contents contents = Contents::kTensors);
  int64_t size() const { return size_; }
  // Writes exactly size() bytes at `out` (64-byte aligned: the tensors' offsets are relative
  // to it).
  void write(uint8_t* out) const;
  // Writes the message at the start of `buffer`, a uint8 CPU tensor of at least size() bytes,
  // and zeroes the rest of it.
  void fill(const at::Tensor& buffer) const;

 private:
  std::vector<int64_t> words_;  // the description
  std::vector<const at::Tensor*> data_;
  std::vector<int64_t> offsets_;  // of data_'s bytes
  int64_t size_ = 0;
};

// The message of `batch`, in a uint8 CPU tensor of at least `min_bytes` (its tail then zero)
// whose word 0 is the message's own size.
at::Tensor pack_message(const pipeline::Batch& batch, int64_t min_bytes = 0);

// Word 0 of a buffer that begins with a message (or only with its size: see GlooChannel in
// c10d_transport.cpp).
// Throws std::runtime_error when the buffer is too short or the size is out of range.
int64_t message_size(const at::Tensor& bytes);

// The batch a buffer holds; its tensors are views of `bytes`. Throws std::runtime_error naming
// what is malformed.
pipeline::Batch unpack_message(const at::Tensor& bytes);

// The description of `batch` alone, as a message in a uint8 CPU tensor of its exact size.
at::Tensor pack_description(const pipeline::Batch& batch);

// The batch a description describes: each defined tensor new (uninitialised) on `device`, of
// its dtype and shape. Throws std::runtime_error naming what is malformed.
pipeline::Batch unpack_description(const at::Tensor& bytes, const c10::Device& device);

}  // namespace pipebal::distributed
