// See dataset.h.
#include "pipebal/models/dataset.h"

#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <utility>

#include <caffe2/serialize/in_memory_adapter.h>
#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/storage_context.h>
#include <torch/torch.h>

#include "pipebal/common/atomic_file.h"
#include "pipebal/pipeline/error_text.h"
#include "pipebal/pipeline/stored_tensors.h"

namespace pipebal::models {
namespace {

at::Tensor tensor_of(const c10::IValue& value, const std::string& what, const std::string& path) {
  if (!value.isTensor()) {
    throw std::invalid_argument(
        fmt::format("data '{}': {} is a {}, not a tensor", path, what, value.tagKind()));
  }
  at::Tensor tensor = value.toTensor();
  if (tensor.dim() < 1 || tensor.size(0) < 1) {
    throw std::invalid_argument(fmt::format("data '{}': {} has no samples (shape {})", path, what,
                                            c10::str(tensor.sizes())));
  }
  return tensor.contiguous();
}

// What torch.save wrote into the zip archive `bytes`. As torch::pickle_load, but with a storage
// per record, as torch.load has: tensors saved as views of one tensor (inputs ids[:, :-1] and
// targets ids[:, 1:]) share their record's storage instead of each reading a copy of it, which
// also lets check_stored_tensors count the record once.
c10::IValue unpickle_archive(const std::vector<char>& bytes) {
  caffe2::serialize::PyTorchStreamReader reader(
      std::make_unique<caffe2::serialize::MemoryReadAdapter>(bytes.data(), bytes.size()));
  return torch::jit::readArchiveAndTensors(
      "data", /*pickle_prefix=*/"", /*tensor_prefix=*/"", /*type_resolver=*/c10::nullopt,
      /*obj_loader=*/c10::nullopt, /*device=*/c10::nullopt, reader,
      torch::jit::Unpickler::defaultTypeParser,
      std::make_shared<torch::jit::DeserializationStorageContext>());
}

}  // namespace

pipeline::Batch Dataset::inputs_at(const at::Tensor& indices) const {
  pipeline::Batch batch;
  for (const auto& input : inputs) batch.tensors.push_back(input.index_select(0, indices));
  return batch;
}

void Dataset::convert_floats(c10::ScalarType dtype) {
  for (at::Tensor& t : inputs) {
    if (t.is_floating_point()) t = t.to(dtype);
  }
  if (targets.is_floating_point()) targets = targets.to(dtype);
}

std::vector<InputSpec> Dataset::input_specs(int64_t batch) const {
  std::vector<InputSpec> specs;
  for (const at::Tensor& input : inputs) {
    InputSpec spec;
    spec.dtype = input.scalar_type();
    spec.shape = input.sizes().vec();
    spec.shape[0] = batch;
    specs.push_back(std::move(spec));
  }
  return specs;
}

at::Tensor Dataset::targets_at(const at::Tensor& indices) const {
  return targets.index_select(0, indices);
}

Dataset load_dataset(const std::string& path) {
  check_regular_file(path, "read data");  // a FIFO would block the read, /dev/zero never end it
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(fmt::format("cannot read data '{}'", path));
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  // torch.save has written zip archives since PyTorch 1.6; its legacy format is a bare pickle,
  // which LibTorch does not read.
  const bool zip = bytes.size() >= 4 && bytes[0] == 'P' && bytes[1] == 'K';
  if (!zip && !bytes.empty() && static_cast<unsigned char>(bytes[0]) == 0x80) {
    throw std::invalid_argument(fmt::format(
        "data '{}' was written by torch.save in its legacy format "
        "(_use_new_zipfile_serialization=False), which LibTorch cannot read: save it again with "
        "torch.save's default",
        path));
  }
  c10::IValue doc;
  try {
    doc = unpickle_archive(bytes);
  } catch (const std::exception& error) {
    const std::string what = pipeline::error_summary(error);
    // LibTorch's unpickler lacks the opcodes pickle writes for a list of one item (APPEND) and a
    // dict of one key (SETITEM).
    if (what.find("Unknown opcode for unpickling at 0x61") != std::string::npos ||
        what.find("Unknown opcode for unpickling at 0x73") != std::string::npos) {
      throw std::invalid_argument(fmt::format(
          "data '{}' holds a list of one tensor or a dict of one key, which LibTorch cannot read: "
          "save one input as the tensor itself (not [x]), and both 'inputs' and 'targets'",
          path));
    }
    // It reads tensors, numbers, strings, lists, tuples and plain dicts. An OrderedDict comes out
    // as None (the class is known only as a tensor's empty hooks), which it then asserts on.
    constexpr const char* kReadable = "tensors, numbers, strings, lists, tuples and plain dicts";
    if (what.find("Expected GenericDict but got None") != std::string::npos) {
      throw std::invalid_argument(fmt::format(
          "data '{}' holds a collections.OrderedDict, which LibTorch cannot read: save {}", path,
          kReadable));
    }
    const std::string unknown = "Unpickler found unknown type ";
    if (const size_t at = what.find(unknown); at != std::string::npos) {
      const std::string type = what.substr(at + unknown.size());
      if (type.rfind("numpy.", 0) == 0) {
        throw std::invalid_argument(fmt::format(
            "data '{}' holds a NumPy array ({}), which LibTorch cannot read: save it as a tensor "
            "(torch.from_numpy)",
            path, type));
      }
      throw std::invalid_argument(fmt::format(
          "data '{}' holds a {}, which LibTorch cannot read: save {}", path, type, kReadable));
    }
    throw std::invalid_argument(
        fmt::format("data '{}' is not a file written by torch.save: {}", path, what));
  }
  pipeline::check_stored_tensors(doc, bytes, fmt::format("data '{}'", path));
  if (!doc.isGenericDict()) {
    throw std::invalid_argument(
        fmt::format("data '{}': expected torch.save({{'inputs': x, 'targets': y}}), found a {}",
                    path, doc.tagKind()));
  }
  const c10::Dict<c10::IValue, c10::IValue> dict = doc.toGenericDict();
  auto field = [&](const char* key) {
    const auto it = dict.find(c10::IValue(std::string(key)));
    if (it == dict.end()) {
      throw std::invalid_argument(
          fmt::format("data '{}' has no '{}' (expected keys 'inputs' and 'targets')", path, key));
    }
    return it->value();
  };
  Dataset data;
  const c10::IValue inputs = field("inputs");
  if (inputs.isTensor()) {
    data.inputs.push_back(tensor_of(inputs, "inputs", path));
  } else if (inputs.isList() || inputs.isTuple()) {
    const std::vector<c10::IValue> items =
        inputs.isList() ? inputs.toListRef().vec() : inputs.toTupleRef().elements().vec();
    for (size_t i = 0; i < items.size(); ++i) {
      data.inputs.push_back(tensor_of(items[i], fmt::format("inputs[{}]", i), path));
    }
    if (data.inputs.empty())
      throw std::invalid_argument(fmt::format("data '{}': inputs is empty", path));
  } else {
    throw std::invalid_argument(
        fmt::format("data '{}': inputs is a {}, expected a tensor or a list of tensors", path,
                    inputs.tagKind()));
  }
  data.targets = tensor_of(field("targets"), "targets", path);
  for (size_t i = 0; i < data.inputs.size(); ++i) {
    if (data.inputs[i].size(0) != data.size()) {
      throw std::invalid_argument(fmt::format("data '{}': inputs[{}] has {} samples, targets {}",
                                              path, i, data.inputs[i].size(0), data.size()));
    }
  }
  return data;
}

std::vector<at::Tensor> batch_order(int64_t samples, int64_t batch_size, int epochs, bool shuffle,
                                    uint64_t seed, int64_t min_batch) {
  if (batch_size < 1) {
    throw std::invalid_argument(fmt::format("--batch-size must be at least 1, got {}", batch_size));
  }
  if (epochs < 1)
    throw std::invalid_argument(fmt::format("--epochs must be at least 1, got {}", epochs));
  // Each mini-batch is a step: their count is bounded before a list of them is made.
  const int64_t per_epoch = samples / batch_size + (samples % batch_size != 0 ? 1 : 0);
  if (per_epoch > kMaxBatches / epochs) {
    throw std::invalid_argument(
        fmt::format("--epochs {} over {} samples in mini-batches of {} make more than {} steps",
                    epochs, samples, batch_size, kMaxBatches));
  }
  std::vector<at::Tensor> batches;
  torch::Generator generator = at::detail::createCPUGenerator(seed);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    const at::Tensor order = shuffle ? torch::randperm(samples, generator, torch::kLong)
                                     : torch::arange(samples, torch::kLong);
    for (int64_t first = 0; first < samples; first += batch_size) {
      const int64_t count = std::min(batch_size, samples - first);
      if (count < min_batch) continue;
      batches.push_back(order.narrow(0, first, count));
    }
  }
  if (batches.empty()) {
    throw std::invalid_argument(fmt::format(
        "{} samples in mini-batches of {} leave none with the {} samples the micro-batches need",
        samples, batch_size, min_batch));
  }
  return batches;
}

}  // namespace pipebal::models
