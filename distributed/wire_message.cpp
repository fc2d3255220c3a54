// See wire_message.h.
#include "pipebal/distributed/wire_message.h"

#include <cstring>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>
#include <torch/torch.h>

namespace pipebal::distributed {
namespace {

constexpr int64_t kWord = sizeof(int64_t);
constexpr int64_t kAlignment = 64;
constexpr int64_t kMaxMessageBytes = int64_t{1} << 40;
constexpr int64_t kMaxDims = 64;

int64_t aligned(int64_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

bool has_data(const at::Tensor& tensor) {
  return tensor.defined() && tensor.numel() > 0;
}

void describe(const at::Tensor& tensor, std::vector<int64_t>& words) {
  if (!tensor.defined()) {
    words.push_back(0);
    return;
  }
  words.push_back(1);
  words.push_back(static_cast<int64_t>(tensor.scalar_type()));
  words.push_back(tensor.dim());
  for (int64_t size : tensor.sizes()) words.push_back(size);
}

// Reads a description and places the tensors' bytes after it, as pack_message laid them out;
// or, for a description alone, makes each tensor new on `allocate_on`.
class Reader {
 public:
  Reader(const at::Tensor& bytes, int64_t size, const int64_t* word, const int64_t* end,
         std::optional<c10::Device> allocate_on)
      : bytes_(bytes),
        size_(size),
        word_(word),
        end_(end),
        data_end_((end - word + 2) * kWord),
        allocate_on_(allocate_on) {}

  int64_t next() {
    if (word_ == end_) throw std::runtime_error("malformed message: description too short");
    return *word_++;
  }

  at::Tensor tensor() {
    if (next() == 0) return {};
    const int64_t type = next();
    if (type < 0 || type >= static_cast<int64_t>(at::ScalarType::NumOptions) ||
        type == static_cast<int64_t>(at::ScalarType::Undefined)) {
      throw std::runtime_error(fmt::format("malformed message: dtype {}", type));
    }
    const auto dtype = static_cast<at::ScalarType>(type);
    const int64_t dims = next();
    if (dims < 0 || dims > kMaxDims) {
      throw std::runtime_error(fmt::format("malformed message: {} dimensions", dims));
    }
    std::vector<int64_t> sizes(static_cast<size_t>(dims));
    int64_t numel = 1;
    for (auto& size : sizes) {
      size = next();
      if (size < 0 || (size > 0 && numel > kMaxMessageBytes / size)) {
        throw std::runtime_error(fmt::format("malformed message: size {}", size));
      }
      numel *= size;
    }
    const auto options = at::TensorOptions().dtype(dtype);
    if (allocate_on_) return at::empty(sizes, options.device(*allocate_on_));
    if (numel == 0) return at::empty(sizes, options);
    const int64_t offset = aligned(data_end_);
    const int64_t nbytes = numel * static_cast<int64_t>(c10::elementSize(dtype));
    if (offset + nbytes > size_) {
      throw std::runtime_error(
          fmt::format("malformed message: a tensor of {} bytes at {} in a message of {}", nbytes,
                      offset, size_));
    }
    data_end_ = offset + nbytes;
    at::Tensor keep = bytes_;  // the views own the buffer
    return at::from_blob(
        bytes_.data_ptr<uint8_t>() + offset, sizes, [keep](void*) {}, options);
  }

  void expect_end() const {
    if (word_ != end_) throw std::runtime_error("malformed message: description too long");
  }

 private:
  at::Tensor bytes_;
  int64_t size_;
  const int64_t* word_;
  const int64_t* end_;
  int64_t data_end_;  // where the last tensor's bytes end
  std::optional<c10::Device> allocate_on_;
};

// A message's batch: views of its bytes, or (a description alone) new tensors on `allocate_on`.
pipeline::Batch read_message(const at::Tensor& bytes, std::optional<c10::Device> allocate_on) {
  const int64_t size = message_size(bytes);
  if (size > bytes.numel()) {
    throw std::runtime_error(
        fmt::format("malformed message: {} bytes announced, {} received", size, bytes.numel()));
  }
  const auto* head = reinterpret_cast<const int64_t*>(bytes.data_ptr<uint8_t>());
  const int64_t count = head[1];
  if (count < 2 || count > size / kWord - 2) {
    throw std::runtime_error(fmt::format(
        "malformed message: a description of {} words in a message of {} bytes", count, size));
  }
  Reader reader(bytes, size, head + 2, head + 2 + count, allocate_on);
  pipeline::Batch batch;
  const int64_t tensors = reader.next();
  const int64_t skips = reader.next();
  if (tensors < 0 || skips < 0 || tensors > count || skips > count - tensors) {
    throw std::runtime_error(
        fmt::format("malformed message: {} tensors and {} skips", tensors, skips));
  }
  for (int64_t t = 0; t < tensors; ++t) batch.tensors.push_back(reader.tensor());
  for (int64_t k = 0; k < skips; ++k) {
    const int64_t length = reader.next();
    if (length < 0 || length > count) {
      throw std::runtime_error(fmt::format("malformed message: a name of {} bytes", length));
    }
    std::string name(static_cast<size_t>(length), '\0');
    for (auto& c : name) c = static_cast<char>(reader.next());
    batch.skips[name] = reader.tensor();
  }
  reader.expect_end();
  return batch;
}

}  // namespace

MessageWriter::MessageWriter(const pipeline::Batch& batch, Contents contents)
    : words_{static_cast<int64_t>(batch.tensors.size()), static_cast<int64_t>(batch.skips.size())} {
  auto add = [&](const at::Tensor& tensor) {
    describe(tensor, words_);
    if (contents == Contents::kTensors && has_data(tensor)) data_.push_back(&tensor);
  };
  for (const auto& tensor : batch.tensors) add(tensor);
  for (const auto& [name, tensor] : batch.skips) {
    words_.push_back(static_cast<int64_t>(name.size()));
    for (unsigned char c : name) words_.push_back(c);
    add(tensor);
  }
  size_ = (2 + static_cast<int64_t>(words_.size())) * kWord;
  for (const at::Tensor* tensor : data_) {
    offsets_.push_back(aligned(size_));
    size_ = offsets_.back() + static_cast<int64_t>(tensor->nbytes());
  }
}

void MessageWriter::write(uint8_t* out) const {
  auto* head = reinterpret_cast<int64_t*>(out);
  head[0] = size_;
  head[1] = static_cast<int64_t>(words_.size());
  std::memcpy(head + 2, words_.data(), words_.size() * kWord);
  int64_t filled = (2 + static_cast<int64_t>(words_.size())) * kWord;
  for (size_t t = 0; t < data_.size(); ++t) {
    const at::Tensor& tensor = *data_[t];
    std::memset(out + filled, 0, static_cast<size_t>(offsets_[t] - filled));  // no stray bytes
    at::from_blob(out + offsets_[t], tensor.sizes(), at::TensorOptions().dtype(tensor.dtype()))
        .copy_(tensor.detach());
    filled = offsets_[t] + static_cast<int64_t>(tensor.nbytes());
  }
}

void MessageWriter::fill(const at::Tensor& buffer) const {
  if (buffer.numel() < size_) {
    throw std::logic_error(
        fmt::format("a message of {} bytes in a buffer of {}", size_, buffer.numel()));
  }
  uint8_t* base = buffer.data_ptr<uint8_t>();
  write(base);
  std::memset(base + size_, 0, static_cast<size_t>(buffer.numel() - size_));
}

at::Tensor pack_message(const pipeline::Batch& batch, int64_t min_bytes) {
  const MessageWriter writer(batch);
  at::Tensor bytes = at::empty({std::max(writer.size(), min_bytes)}, at::kByte);
  writer.fill(bytes);
  return bytes;
}

int64_t message_size(const at::Tensor& bytes) {
  if (bytes.numel() < kWord) {
    throw std::runtime_error(fmt::format("malformed message: {} bytes", bytes.numel()));
  }
  int64_t size = 0;
  std::memcpy(&size, bytes.data_ptr<uint8_t>(), kWord);
  if (size < kMinMessageBytes || size > kMaxMessageBytes) {
    throw std::runtime_error(fmt::format("malformed message: announces {} bytes", size));
  }
  return size;
}

pipeline::Batch unpack_message(const at::Tensor& bytes) {
  return read_message(bytes, std::nullopt);
}

at::Tensor pack_description(const pipeline::Batch& batch) {
  const MessageWriter writer(batch, MessageWriter::Contents::kDescription);
  at::Tensor bytes = at::empty({writer.size()}, at::kByte);
  writer.fill(bytes);
  return bytes;
}

pipeline::Batch unpack_description(const at::Tensor& bytes, const c10::Device& device) {
  return read_message(bytes, device);
}

}  // namespace pipebal::distributed
