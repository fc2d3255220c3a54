// See layer_seq.h.
#include "pipebal/pipeline/layer_seq.h"

#include <set>
#include <stdexcept>

#include <fmt/format.h>

namespace pipebal::pipeline {

Batch LayerSeq::forward(Batch input) const {
  for (const auto& layer : layers_) input = layer->forward(std::move(input));
  return input;
}

LayerSeq LayerSeq::slice(size_t first, size_t count) const {
  if (first + count > layers_.size()) {
    throw std::invalid_argument(fmt::format("layers [{}, {}) out of range: the model has {} layers",
                                            first, first + count, layers_.size()));
  }
  LayerSeq part(name_);
  for (size_t i = first; i < first + count; ++i) part.add(layers_[i]);
  return part;
}

LayerSeq LayerSeq::clone() const {
  LayerSeq copy(name_);
  for (const auto& layer : layers_) copy.add(layer->clone());
  return copy;
}

std::vector<at::Tensor> LayerSeq::parameters() const {
  std::vector<at::Tensor> all;
  for (const auto& layer : layers_) {
    auto p = layer->parameters();
    all.insert(all.end(), p.begin(), p.end());
  }
  return all;
}

std::vector<at::Tensor> LayerSeq::buffers() const {
  std::vector<at::Tensor> all;
  for (const auto& layer : layers_) {
    auto b = layer->buffers();
    all.insert(all.end(), b.begin(), b.end());
  }
  return all;
}

int64_t LayerSeq::parameter_count() const {
  int64_t count = 0;
  for (const auto& layer : layers_) count += layer->parameter_count();
  return count;
}

void LayerSeq::to(const c10::Device& device) const {
  for (const auto& layer : layers_) layer->to(device);
}

void LayerSeq::to(c10::ScalarType dtype) const {
  for (const auto& layer : layers_) layer->to(dtype);
}

void LayerSeq::train(bool on) const {
  for (const auto& layer : layers_) layer->train(on);
}

void LayerSeq::check_skips() const {
  std::set<std::string> live;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& layer = *layers_[i];
    for (const auto& name : layer.pops()) {
      if (live.erase(name) == 0) {
        throw std::invalid_argument(
            fmt::format("layer {} ('{}') pops skip tensor '{}' that no earlier layer stashed", i,
                        layer.name(), name));
      }
    }
    for (const auto& name : layer.stashes()) {
      if (!live.insert(name).second) {
        throw std::invalid_argument(
            fmt::format("layer {} ('{}') stashes skip tensor '{}' that is already live", i,
                        layer.name(), name));
      }
    }
  }
}

}  // namespace pipebal::pipeline
