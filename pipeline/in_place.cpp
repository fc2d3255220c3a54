// See in_place.h.
#include "pipebal/pipeline/in_place.h"

#include <string>

namespace pipebal::pipeline {

bool is_in_place_on_leaf(const std::exception& error) {
  const std::string what = error.what();
  return what.find("leaf Variable that requires grad") != std::string::npos &&
         what.find("in-place operation") != std::string::npos;
}

Batch copied_inputs(const Batch& batch) {
  Batch copy = batch;
  for (auto& t : copy.tensors) {
    if (t.defined()) t = t.clone();
  }
  for (auto& [name, t] : copy.skips) {
    if (t.defined()) t = t.clone();
  }
  return copy;
}

std::vector<int64_t> tensor_versions(const Batch& batch) {
  std::vector<int64_t> versions;
  for (const auto& t : batch.tensors) versions.push_back(t.defined() ? t._version() : -1);
  for (const auto& [name, t] : batch.skips) versions.push_back(t.defined() ? t._version() : -1);
  return versions;
}

Batch forward_keeping_input(Layer& layer, const Batch& input, InputWrites& writes) {
  if (writes.known) return layer.forward(writes.writes ? copied_inputs(input) : input);
  const Batch copies = copied_inputs(input);
  const std::vector<int64_t> before = tensor_versions(copies);
  Batch output = layer.forward(copies);
  writes.writes = tensor_versions(copies) != before;
  writes.known = true;
  return output;
}

}  // namespace pipebal::pipeline
