// Background threads that keep the other cores as busy while profiling as the other pipeline
// stages keep them while training. On a CPU, stages running side by side share caches and
// memory bandwidth and each runs slower than alone; profiling layers next to co-runners
// measures that slowdown instead of assuming it away.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "pipebal/pipeline/batch.h"
#include "pipebal/pipeline/layer_seq.h"

namespace pipebal::profiler {

// Each co-runner trains its own clone of the model on the sample (forward, backward, drop the
// gradients) in a loop, with `threads` intra-op threads, until destroyed; runner i pinned to
// `cpus[i]` where given (where the stage it stands in for will run; a pin the kernel refuses
// throws), else on its creator's CPUs. Created and controlled by one thread.
class CoRunners {
 public:
  CoRunners(const pipeline::LayerSeq& model, const pipeline::Batch& sample, int count, int threads,
            const std::vector<std::vector<int>>& cpus = {});
  // Stops and joins every runner.
  ~CoRunners();
  CoRunners(const CoRunners&) = delete;
  CoRunners& operator=(const CoRunners&) = delete;

  // Waits until every runner is between iterations and holds it there (nothing allocated or
  // freed), e.g. while memory is measured; resume() lets them go on.
  void pause();
  void resume();

 private:
  void run(pipeline::LayerSeq model, pipeline::Batch sample, int threads);
  void stop();

  std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false;
  bool paused_ = false;
  int idle_ = 0;      // runners waiting while paused
  int finished_ = 0;  // runners that ended on an error
  std::vector<std::thread> threads_;
};

}  // namespace pipebal::profiler
