// The ordered layers of a model: what the profiler, the balancer and the engine consume.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "pipebal/pipeline/layer.h"

namespace pipebal::pipeline {

// A handle on the layers: copies and slices share the layer objects, and const methods such as
// to() and train() change those shared layers, as a const std::shared_ptr leaves its object
// mutable. clone() makes layers of its own.
class LayerSeq {
 public:
  LayerSeq() = default;
  explicit LayerSeq(std::string name) : name_(std::move(name)) {}

  // The model's name (its SPEC or file), for reports.
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  void add(std::shared_ptr<Layer> layer) { layers_.push_back(std::move(layer)); }

  size_t size() const { return layers_.size(); }
  bool empty() const { return layers_.empty(); }
  Layer& operator[](size_t index) const { return *layers_.at(index); }
  const std::shared_ptr<Layer>& at(size_t index) const { return layers_.at(index); }

  // Runs every layer in order.
  Batch forward(Batch input) const;

  // Layers [first, first + count), sharing the layer objects (a stage's view of the model).
  LayerSeq slice(size_t first, size_t count) const;

  // Deep copy of every layer.
  LayerSeq clone() const;

  std::vector<at::Tensor> parameters() const;
  std::vector<at::Tensor> buffers() const;
  int64_t parameter_count() const;
  void to(const c10::Device& device) const;
  void to(c10::ScalarType dtype) const;
  void train(bool on) const;

  // Checks that every popped skip tensor was stashed by an earlier layer and popped once;
  // throws std::invalid_argument naming the layer otherwise.
  void check_skips() const;

 private:
  std::string name_;
  std::vector<std::shared_ptr<Layer>> layers_;
};

}  // namespace pipebal::pipeline
