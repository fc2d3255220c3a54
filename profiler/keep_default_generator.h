// Leaves ATen's default CPU generator where it found it.
//
// Profiling draws random numbers (dropout in the model, the calibrations' weights and data):
// a caller who seeded the default generator before profiling draws the same stream after it.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

namespace pipebal::profiler {

// Saves the default CPU generator's state; the destructor puts it back.
class KeepDefaultGenerator {
 public:
  KeepDefaultGenerator();
  ~KeepDefaultGenerator();
  KeepDefaultGenerator(const KeepDefaultGenerator&) = delete;
  KeepDefaultGenerator& operator=(const KeepDefaultGenerator&) = delete;

 private:
  at::Tensor state_;
};

}  // namespace pipebal::profiler
