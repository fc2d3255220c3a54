// Pinning threads to CPUs, for runs that must not depend on where the scheduler puts them: the
// cores of a cloud VM can differ in speed for long spells (a neighbour on the same physical
// core or cache), and a stage thread that the scheduler moves between them changes speed with
// it. Cores are logical CPUs, as in cores.h. Torch-free.
#pragma once

#include <vector>

namespace pipebal {

// Restricts the calling thread to `cpus` (threads it starts from then on inherit them). Throws
// std::invalid_argument for an empty list or a negative CPU, and std::system_error where the
// kernel refuses (none of the CPUs is in the process's cpuset or online).
void pin_this_thread(const std::vector<int>& cpus);

// Pins the calling thread to `cpus` for its lifetime, then gives the thread its CPUs back.
class ThreadPin {
 public:
  explicit ThreadPin(const std::vector<int>& cpus);
  ~ThreadPin();
  ThreadPin(const ThreadPin&) = delete;
  ThreadPin& operator=(const ThreadPin&) = delete;

 private:
  std::vector<int> before_;
};

// Cores of their own for `groups` devices of `per_group` threads each (a pipeline's devices and
// their intra-op threads): consecutive blocks of the CPUs this process may run on
// (allowed_cpus(), cores.h). Throws std::invalid_argument, naming the counts, when there are
// fewer CPUs than groups x per_group.
std::vector<std::vector<int>> cores_for_groups(int groups, int per_group);

}  // namespace pipebal
