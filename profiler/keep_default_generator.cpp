// See keep_default_generator.h.
#include "pipebal/profiler/keep_default_generator.h"

#include <mutex>

#include <ATen/CPUGeneratorImpl.h>

namespace pipebal::profiler {
namespace {

at::Generator default_generator() {
  return at::detail::getDefaultCPUGenerator();
}

}  // namespace

KeepDefaultGenerator::KeepDefaultGenerator() {
  at::Generator generator = default_generator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  state_ = generator.get_state();
}

KeepDefaultGenerator::~KeepDefaultGenerator() {
  at::Generator generator = default_generator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state_);
}

}  // namespace pipebal::profiler
