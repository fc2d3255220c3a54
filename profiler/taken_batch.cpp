// See taken_batch.h.
#include "pipebal/profiler/taken_batch.h"

#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include <ATen/Functions.h>

#include "pipebal/profiler/cpu_memory.h"
#include "pipebal/profiler/tensor_references.h"

namespace pipebal::profiler {
namespace {

// The taker's share of a block: holds the block, and uncounts the share when the last of the
// taker's views is gone.
class TakersShare {
 public:
  TakersShare(c10::Storage block, int64_t bytes)
      : block_(std::move(block)), uncount_(CpuMemoryScope::count_held(bytes)) {}
  ~TakersShare() { uncount_(); }
  TakersShare(const TakersShare&) = delete;
  TakersShare& operator=(const TakersShare&) = delete;

 private:
  c10::Storage block_;
  std::function<void()> uncount_;
};

}  // namespace

void count_as_taken(pipeline::Batch& batch) {
  // Runs at every take: once the counted steps are over, it costs nothing.
  if (!CpuMemoryScope::counting()) return;
  std::map<const c10::StorageImpl*, std::vector<at::Tensor*>> blocks;
  const auto note = [&blocks](at::Tensor& t) {
    if (t.defined() && t.device().is_cpu() && t.has_storage() && t.storage().data() != nullptr) {
      blocks[t.storage().unsafeGetStorageImpl()].push_back(&t);
    }
  };
  for (at::Tensor& t : batch.tensors) note(t);
  for (auto& [name, t] : batch.skips) note(t);

  for (auto& [impl, uses] : blocks) {
    const std::vector<const at::Tensor*> views(uses.begin(), uses.end());
    const int64_t bytes = viewed_bytes(views);
    if (only_these_refer_to_their_block(views)) {
      if (bytes == static_cast<int64_t>(uses.front()->storage().nbytes())) {
        CpuMemoryScope::hand_over(uses.front()->storage().data());
        continue;
      }
      // Part of a block the sender is done with (a skip's gradient sliced from a concatenation's):
      // a device would hold a copy of that part, not the block. Copies, by the taker's thread (a
      // tensor the batch holds twice stays one), and the block goes with its last view.
      std::map<const c10::TensorImpl*, at::Tensor> copies;
      for (at::Tensor* t : uses) {
        auto [copy, made] = copies.try_emplace(t->unsafeGetTensorImpl());
        if (made) copy->second = t->detach().clone();
        *t = copy->second;
      }
      continue;
    }
    // Views of the taker's own, the last of which uncounts its share.
    auto share = std::make_shared<TakersShare>(uses.front()->storage(), bytes);
    for (at::Tensor* t : uses) {
      *t = at::from_blob(
          t->data_ptr(), t->sizes(), t->strides(), [share](void*) {}, t->options());
    }
  }
}

}  // namespace pipebal::profiler
