// See stored_tensors.h.
#include "pipebal/pipeline/stored_tensors.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <unordered_set>

#include <fmt/format.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include "pipebal/common/zip_directory.h"

namespace pipebal::pipeline {
namespace {

// Deeper than any model nests its modules: a bound, not a guess at models.
constexpr int kMaxDepth = 1000;

// The distinct storages of the tensors found, and the bytes their pickles declare; the
// containers walked (a pickle's memo makes one list the element of several: each is walked once).
struct Storages {
  std::unordered_set<const c10::StorageImpl*> seen;
  std::unordered_set<const void*> walked;
  int64_t declared_bytes = 0;
};

void add_tensor(const at::Tensor& tensor, const std::string& name, const std::string& what,
                Storages& storages) {
  if (!tensor.defined() || !tensor.has_storage()) return;
  const c10::Storage& storage = tensor.storage();
  if (!storages.seen.insert(storage.unsafeGetStorageImpl()).second) return;
  const auto bytes = static_cast<int64_t>(storage.nbytes());
  if (bytes > 0 && storage.data_ptr().get() == nullptr) {
    throw std::invalid_argument(fmt::format(
        "{}: its tensor '{}' has no data in the file (its record is empty): the file is damaged",
        what, name));
  }
  storages.declared_bytes += bytes;
}

void add_tensors(const c10::IValue& value, const std::string& name, const std::string& what,
                 Storages& storages, int depth) {
  if (depth > kMaxDepth) {
    throw std::invalid_argument(
        fmt::format("{}: '{}' nests more than {} levels deep", what, name, kMaxDepth));
  }
  const auto inner = [&](const c10::IValue& item, const std::string& item_name) {
    add_tensors(item, item_name, what, storages, depth + 1);
  };
  if (value.isTensor()) {
    add_tensor(value.toTensor(), name, what, storages);
    return;
  }
  if (!value.isPtrType() || !storages.walked.insert(value.internalToPointer()).second) return;
  if (value.isList()) {
    const c10::List<c10::IValue> list = value.toList();
    for (size_t i = 0; i < list.size(); ++i) inner(list.get(i), fmt::format("{}[{}]", name, i));
  } else if (value.isTuple()) {
    const auto& elements = value.toTupleRef().elements();
    for (size_t i = 0; i < elements.size(); ++i) {
      inner(elements[i], fmt::format("{}[{}]", name, i));
    }
  } else if (value.isGenericDict()) {
    for (const auto& entry : value.toGenericDict()) {
      const std::string key =
          entry.key().isString() ? entry.key().toStringRef() : entry.key().tagKind();
      inner(entry.value(), name.empty() ? key : fmt::format("{}[{}]", name, key));
    }
  } else if (value.isObject() && value.toObjectRef().type()->is_module()) {
    // Modules only: another class (a quantized layer's packed weights, one with __setstate__)
    // may hold tensors it made itself on loading, from records it reads its own way.
    const c10::intrusive_ptr<c10::ivalue::Object> object = value.toObject();
    const c10::ClassTypePtr type = object->type();
    const size_t attributes = std::min(object->slots().size(), type->numAttributes());
    for (size_t i = 0; i < attributes; ++i) {
      const std::string attribute = type->getAttributeName(i);
      inner(object->getSlot(i), name.empty() ? attribute : name + "." + attribute);
    }
  }
}

// The bytes of the archive's records under `folder` ("data/", "constants/"; one record per
// storage, below the archive's top folder), as the archive's directory gives their sizes.
int64_t record_bytes(const std::vector<ZipEntry>& entries, const std::string& folder) {
  constexpr uint64_t kMost = std::numeric_limits<int64_t>::max();
  uint64_t bytes = 0;
  for (const ZipEntry& entry : entries) {
    const size_t slash = entry.name.find('/');
    if (slash != std::string::npos && entry.name.compare(slash + 1, folder.size(), folder) == 0) {
      bytes = std::min(kMost, bytes + std::min(kMost, entry.size));
    }
  }
  return static_cast<int64_t>(bytes);
}

void compare(const Storages& storages, int64_t held_bytes, const std::string& what) {
  if (held_bytes < storages.declared_bytes) {
    throw std::invalid_argument(
        fmt::format("{}: its tensors need {} bytes, but the file holds {} of them: the file is "
                    "damaged",
                    what, storages.declared_bytes, held_bytes));
  }
}

// The archive's directory, read by `read`, its errors said as `what`'s.
template <typename Read>
std::vector<ZipEntry> directory_of(const std::string& what, const Read& read) {
  try {
    return read();
  } catch (const std::runtime_error& error) {
    throw std::invalid_argument(fmt::format("{}: {}", what, error.what()));
  }
}

}  // namespace

void check_stored_tensors(const torch::jit::Module& module, const std::string& path,
                          const std::string& what) {
  Storages attributes;
  add_tensors(module._ivalue(), "", what, attributes, 0);
  Storages constants;
  for (const torch::jit::Module& part : module.modules()) {
    for (const torch::jit::Method& method : part.get_methods()) {
      const std::string name = "a constant of " + method.name();
      std::vector<const torch::jit::Block*> blocks = {method.graph()->block()};
      while (!blocks.empty()) {  // an if's or a loop's nodes too
        const torch::jit::Block* block = blocks.back();
        blocks.pop_back();
        for (const torch::jit::Node* node : block->nodes()) {
          for (const torch::jit::Block* inner : node->blocks()) blocks.push_back(inner);
          if (node->kind() != c10::prim::Constant || node->outputs().size() != 1) continue;
          const c10::optional<c10::IValue> constant = torch::jit::toIValue(node->output());
          if (constant) add_tensors(*constant, name, what, constants, 0);
        }
      }
    }
  }
  // A zip archive, as torch.jit.save writes; LibTorch 2.x also loads a flatbuffer (mobile) file,
  // which has no such records to compare with.
  char magic[2] = {};
  std::ifstream(path, std::ios::binary).read(magic, sizeof magic);
  if (magic[0] != 'P' || magic[1] != 'K') return;
  const std::vector<ZipEntry> entries = directory_of(what, [&] { return zip_directory(path); });
  compare(attributes, record_bytes(entries, "data/"), what);
  compare(constants, record_bytes(entries, "constants/"), what);
}

void check_stored_tensors(const c10::IValue& value, const std::vector<char>& archive,
                          const std::string& what) {
  Storages storages;
  add_tensors(value, "", what, storages, 0);
  const std::vector<ZipEntry> entries =
      directory_of(what, [&] { return zip_directory(archive.data(), archive.size()); });
  compare(storages, record_bytes(entries, "data/"), what);
}

}  // namespace pipebal::pipeline
