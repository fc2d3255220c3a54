// Whether the tensors read from a file (a TorchScript model's attributes and constants, a
// torch.save'd dataset) have the bytes their shapes say. An archive cut short or edited can
// leave a tensor's record shorter than the tensor: LibTorch loads it all the same, with the size
// its pickle declares, and its clone() or a layer then reads past the end of the record (a
// crash, or garbage trained on). The records' own sizes are in the archive's directory, read
// without reading the records (common/zip_directory.h).
#pragma once

#include <string>
#include <vector>

#include <ATen/core/ivalue.h>

namespace torch::jit {
struct Module;
}

namespace pipebal::pipeline {

// `module`, loaded from the archive at `path`: its attributes' tensors (its parameters and
// buffers among them, at every depth) against the archive's data records, its methods' tensor
// constants against its constant records. Throws std::invalid_argument "<what>: its tensors need
// N bytes, but the file holds M of them: the file is damaged" (or naming a tensor with no data
// at all).
void check_stored_tensors(const torch::jit::Module& module, const std::string& path,
                          const std::string& what);

// The same for `value` (tensors in lists, tuples, dicts and objects' attributes), unpickled from
// the torch.save archive `archive`.
void check_stored_tensors(const c10::IValue& value, const std::vector<char>& archive,
                          const std::string& what);

}  // namespace pipebal::pipeline
