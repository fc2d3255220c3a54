// Outputs that would overwrite an input. `pipebal profile --model m.pt -o m.pt` replaced the
// user's model with a profile, `train --save m.pt -o m.pt` lost the trained model to run.json:
// every write is atomic, so nothing stops it but a look at the paths before the work. Torch-free.
#pragma once

#include <string>
#include <vector>

namespace pipebal {

// A file a command reads or writes, and the option that names it ("--model", "-o").
struct NamedPath {
  std::string option;
  std::string path;  // empty: not given, left out
};

// Whether `a` and `b` name one file: the same inode when both exist (through symbolic and hard
// links), else the same place once their links are followed (a dangling one's target too).
bool same_file(const std::string& a, const std::string& b);

// Throws std::invalid_argument, one line naming both options, when an output is the same file
// as an input that exists (the write would replace what the command reads; a model named by a
// zoo spec is no file) or as another output.
void check_outputs_apart(const std::vector<NamedPath>& inputs,
                         const std::vector<NamedPath>& outputs);

}  // namespace pipebal
