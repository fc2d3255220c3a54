// See tensor_references.h.
#include "pipebal/profiler/tensor_references.h"

#include <algorithm>
#include <map>
#include <set>

namespace pipebal::profiler {

bool only_these_refer_to_their_block(const std::vector<const at::Tensor*>& uses) {
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

int64_t viewed_bytes(const std::vector<const at::Tensor*>& uses) {
  std::set<const c10::TensorImpl*> seen;
  int64_t bytes = 0;
  for (const at::Tensor* t : uses) {
    if (seen.insert(t->unsafeGetTensorImpl()).second) bytes += static_cast<int64_t>(t->nbytes());
  }
  return std::min(bytes, static_cast<int64_t>(uses.front()->storage().nbytes()));
}

}  // namespace pipebal::profiler
