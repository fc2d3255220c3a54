// See taken_batch.h.
#include "profiler/taken_batch.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include <ATen/Functions.h>

#include "profiler/cpu_memory.h"

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

// What a copy of the views would take: each tensor object's bytes once, at most the block's.
int64_t viewed_bytes(const std::vector<at::Tensor*>& uses) {
  std::set<const c10::TensorImpl*> seen;
  int64_t bytes = 0;
  for (const at::Tensor* t : uses) {
    if (seen.insert(t->unsafeGetTensorImpl()).second) bytes += static_cast<int64_t>(t->nbytes());
  }
  return std::min(bytes, static_cast<int64_t>(uses.front()->storage().nbytes()));
}

// Whether nothing but `uses` (tensors of one batch viewing one block) refers to their block:
// each tensor object is referred to only by the batch and by the views made of it (a view keeps
// its base, which may be a tensor outside the batch that only views keep), and every reference
// to the block is one of those tensor objects.
bool only_the_batch_uses(const std::vector<at::Tensor*>& uses) {
  struct Object {
    const at::TensorBase* tensor;
    size_t references;  // that it should have
  };
  std::map<const c10::TensorImpl*, Object> objects;
  std::set<const c10::TensorImpl*> viewed;  // views whose base is counted already
  const auto refer = [&objects](const at::TensorBase& t) {
    ++objects.try_emplace(t.unsafeGetTensorImpl(), Object{&t, 0}).first->second.references;
  };
  for (const at::Tensor* t : uses) {
    refer(*t);
    for (const at::TensorBase* view = t; view->is_view();) {
      if (!viewed.insert(view->unsafeGetTensorImpl()).second) break;
      refer(view->_base());
      view = &view->_base();
    }
  }
  for (const auto& [impl, object] : objects) {
    if (object.tensor->use_count() != object.references) return false;
  }
  return uses.front()->storage().use_count() == objects.size();
}

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
    if (only_the_batch_uses(uses)) {
      const int64_t bytes = viewed_bytes(uses);
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
    auto share = std::make_shared<TakersShare>(uses.front()->storage(), viewed_bytes(uses));
    for (at::Tensor* t : uses) {
      *t = at::from_blob(
          t->data_ptr(), t->sizes(), t->strides(), [share](void*) {}, t->options());
    }
  }
}

}  // namespace pipebal::profiler
