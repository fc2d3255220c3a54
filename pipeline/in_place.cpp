// See in_place.h.
#include "pipeline/in_place.h"

#include <string>

namespace pipebal::pipeline {
namespace {

at::Tensor non_leaf(const at::Tensor& t) {
  return t.defined() && t.is_leaf() && t.requires_grad() ? t.clone() : t;
}

}  // namespace

bool is_in_place_on_leaf(const std::exception& error) {
  const std::string what = error.what();
  return what.find("leaf Variable that requires grad") != std::string::npos &&
         what.find("in-place operation") != std::string::npos;
}

Batch non_leaf_inputs(const Batch& batch) {
  Batch copy = batch;
  for (auto& t : copy.tensors) t = non_leaf(t);
  for (auto& [name, t] : copy.skips) t = non_leaf(t);
  return copy;
}

Batch forward_tolerating_in_place(Layer& layer, const Batch& input, bool& writes_input) {
  if (!writes_input) {
    try {
      return layer.forward(input);
    } catch (const std::exception& error) {
      if (!is_in_place_on_leaf(error)) throw;
      writes_input = true;
    }
  }
  return layer.forward(non_leaf_inputs(input));
}

}  // namespace pipebal::pipeline
