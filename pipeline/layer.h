// One element of a model's layer sequence: the unit the profiler times, the balancer assigns
// to a stage and the engine runs. Implemented over a torch::nn module (module_layer.h) or a
// piece of a TorchScript module's forward (script_layer.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "pipebal/pipeline/batch.h"

namespace pipebal::pipeline {

class Layer {
 public:
  Layer(std::string name, std::string type) : name_(std::move(name)), type_(std::move(type)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  const std::string& type() const { return type_; }

  // Runs the layer. May read `input.skips` (pop) and add to them (stash).
  virtual Batch forward(Batch input) = 0;

  virtual std::vector<at::Tensor> parameters() const = 0;
  virtual std::vector<at::Tensor> buffers() const = 0;

  // Moves parameters and buffers to `device`, in place.
  virtual void to(const c10::Device& device) = 0;
  // Converts floating-point parameters and buffers to `dtype`, in place.
  virtual void to(c10::ScalarType dtype) = 0;
  // Training or evaluation mode (dropout, batch norm).
  virtual void train(bool on) = 0;
  virtual bool is_training() const = 0;

  // True when forward draws random numbers (dropout in training mode): the engine then
  // seeds it per micro-batch so that a recomputation reproduces the same masks.
  virtual bool is_stochastic() const = 0;
  // True when, on a CPU, those draws come from ATen's process-wide generator rather than the
  // stage's own (pipebal's Dropout, dropout.h): a stage with such a layer holds a lock while it
  // runs, so stages with one take turns.
  virtual bool draws_from_shared_generator() const { return is_stochastic(); }

  // True when it holds a batch norm other than pipebal's BatchNorm (batch_norm.h): one whose
  // running statistics the engine cannot defer to the end of a mini-batch.
  virtual bool has_other_batch_norm() const { return false; }

  // An independent deep copy: parameters, buffers and their values, nothing shared.
  virtual std::unique_ptr<Layer> clone() const = 0;

  // The skip tensors this layer stashes and pops: declared so that LayerSeq::check_skips can
  // refuse a pop without a stash before anything runs. The tensors themselves travel inside
  // the Batch, through every stage in between.
  const std::vector<std::string>& stashes() const { return stashes_; }
  const std::vector<std::string>& pops() const { return pops_; }
  void set_skips(std::vector<std::string> stashes, std::vector<std::string> pops) {
    stashes_ = std::move(stashes);
    pops_ = std::move(pops);
  }

  // Total number of parameter elements.
  int64_t parameter_count() const;

 private:
  std::string name_;
  std::string type_;
  std::vector<std::string> stashes_;
  std::vector<std::string> pops_;
};

}  // namespace pipebal::pipeline
