// A TorchScript module's forward cut into layers at its module calls. Each call of a child (or
// of a module inside one, such as a ModuleList's blocks), with the tensor operators around it,
// becomes a piece: a module of its own running exactly that part of the forward graph. Values
// that the next piece needs travel as its positional tensors; values needed later than that
// (residual adds, U-Net links, a traced torchgpipe skip) travel as named skip tensors, through
// the stages in between. Read from the graph, so the cut holds for every input.
//
// Calls are merged into one piece where cutting between them would change the model: a module
// (or a parameter) used at several places, a non-tensor value (an int, a list, a tuple) used
// after the next call, a tensor written in place after the call that made it.
#pragma once

#include <string>
#include <vector>

#include <torch/script.h>

namespace pipebal::pipeline {

// One piece of the forward. `module.forward` takes the `inputs` tensors the previous piece
// passes on, then the skip tensors named in `reads`, and returns a tuple: the `outputs` tensors
// for the next piece, then the skip tensors named in `stashes`. The first piece takes forward's
// arguments; the last one's outputs are forward's results.
struct ScriptPiece {
  std::string name;           // the called modules' paths: "fc", "blocks.0", "enc+dec" when merged
  std::string type;           // the called module's class, "Linear"; "Sequence" for several
  torch::jit::Module module;  // shares its submodules, parameters and buffers with the model
  size_t inputs = 0;
  size_t outputs = 0;
  std::vector<std::string> reads;
  std::vector<std::string> pops;  // the reads no later piece uses
  std::vector<std::string> stashes;
  // Its own operators (outside the modules it calls) may draw random numbers.
  bool own_code_draws = false;
};

// Cuts `model`'s forward as above. Throws std::invalid_argument with the reason when it cannot:
// control flow, no module call, a call of the model's own method, an argument or a result that
// is not a tensor.
std::vector<ScriptPiece> split_forward(const torch::jit::Module& model);

}  // namespace pipebal::pipeline
