// Byte buffers reused from message to message. A fresh buffer costs a page fault per 4 KiB page
// at its first write, which here takes longer than the copy itself, and large buffers freed go
// back to the system to be faulted in again by the next. A buffer is free again once nothing but
// the pool refers to it: the send of it done, every tensor viewing a message in it gone.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace pipebal::distributed {

class BufferPool {
 public:
  // A contiguous uint8 CPU tensor of exactly `bytes`: a view of the smallest free buffer that
  // holds it, else of a new one (a free buffer too small for it is let go).
  at::Tensor take(int64_t bytes);
  // Buffers the pool holds, free or not.
  size_t size() const { return buffers_.size(); }

 private:
  std::vector<at::Tensor> buffers_;
};

}  // namespace pipebal::distributed
