// See buffer_pool.h.
#include "pipebal/distributed/buffer_pool.h"

#include <torch/torch.h>

namespace pipebal::distributed {
namespace {

// Only the pool's own handle refers to the buffer: no copy of it, no view of its memory.
bool is_free(const at::Tensor& buffer) {
  return buffer.use_count() == 1 && buffer.storage().use_count() == 1;
}

}  // namespace

at::Tensor BufferPool::take(int64_t bytes) {
  at::Tensor* best = nullptr;
  at::Tensor* too_small = nullptr;
  for (at::Tensor& buffer : buffers_) {
    if (!is_free(buffer)) continue;
    if (buffer.numel() < bytes) {
      too_small = &buffer;
    } else if (best == nullptr || buffer.numel() < best->numel()) {
      best = &buffer;
    }
  }
  if (best == nullptr) {
    at::Tensor fresh = at::empty({bytes}, at::kByte);
    if (too_small != nullptr) {
      *too_small = fresh;
    } else {
      buffers_.push_back(fresh);
    }
    return fresh.narrow(0, 0, bytes);
  }
  return best->narrow(0, 0, bytes);
}

}  // namespace pipebal::distributed
