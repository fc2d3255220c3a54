// The message format of the c10d transport: a batch packed and unpacked comes back equal, tensor
// by tensor and skip by skip, whatever its dtypes, shapes and strides; its size is the analytic
// sum of its parts; the unused tail of a larger buffer is zero; a malformed buffer is refused
// with an error, never read out of bounds; a writer writes the same bytes into memory of its own;
// a description alone is the message less its tensors' bytes and comes back as new tensors of
// the same dtypes and shapes.
#include <cstring>
#include <limits>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pipebal/distributed/wire_message.h"

namespace {

using pipebal::distributed::message_size;
using pipebal::distributed::MessageWriter;
using pipebal::distributed::pack_description;
using pipebal::distributed::pack_message;
using pipebal::distributed::unpack_description;
using pipebal::distributed::unpack_message;
using pipebal::pipeline::Batch;

int64_t aligned(int64_t bytes) {
  return (bytes + 63) / 64 * 64;
}

void expect_same(const at::Tensor& got, const at::Tensor& want) {
  ASSERT_EQ(got.defined(), want.defined());
  if (!want.defined()) return;
  EXPECT_EQ(got.scalar_type(), want.scalar_type());
  EXPECT_EQ(got.sizes(), want.sizes());
  EXPECT_TRUE(torch::equal(got, want));
}

Batch mixed_batch() {
  torch::manual_seed(3);
  Batch batch;
  batch.tensors.push_back(torch::randn({5, 3}, torch::kDouble));
  batch.tensors.push_back(at::Tensor());  // undefined
  batch.tensors.push_back(torch::randint(0, 100, {5, 2, 2}, torch::kLong).transpose(1, 2));
  batch.tensors.push_back(torch::empty({5, 0}, torch::kFloat));  // no data
  batch.skips["skip/a"] = torch::randn({5, 7}, torch::kFloat);
  batch.skips["b"] = torch::tensor({1, 0, 1, 1, 0}, torch::kBool);
  return batch;
}

TEST(WireMessage, BatchComesBackEqualTensorByTensorAndSkipBySkip) {
  const Batch batch = mixed_batch();
  const Batch back = unpack_message(pack_message(batch));
  ASSERT_EQ(back.tensors.size(), batch.tensors.size());
  for (size_t t = 0; t < batch.tensors.size(); ++t) expect_same(back.tensors[t], batch.tensors[t]);
  ASSERT_EQ(back.skips.size(), batch.skips.size());
  for (const auto& [name, tensor] : batch.skips) {
    ASSERT_EQ(back.skips.count(name), 1u) << name;
    expect_same(back.skips.at(name), tensor);
  }
}

void expect_same_layout(const at::Tensor& got, const at::Tensor& want) {
  ASSERT_EQ(got.defined(), want.defined());
  if (!want.defined()) return;
  EXPECT_EQ(got.scalar_type(), want.scalar_type());
  EXPECT_EQ(got.sizes(), want.sizes());
  EXPECT_TRUE(got.is_contiguous());
  EXPECT_TRUE(got.is_cpu());
}

TEST(WireMessage, ADescriptionAloneComesBackAsNewTensorsOfTheSameLayouts) {
  const Batch batch = mixed_batch();
  const at::Tensor description = pack_description(batch);
  const at::Tensor whole = pack_message(batch);
  // The whole message less its tensors' bytes: 5x3 doubles, 5x2x2 longs, then the skips in
  // name order, 5 bools and 5x7 floats, each at a 64-byte aligned offset.
  EXPECT_EQ(message_size(description), description.numel());
  EXPECT_TRUE(torch::equal(description.narrow(0, 8, description.numel() - 8),
                           whole.narrow(0, 8, description.numel() - 8)))
      << "the same description words";
  int64_t expected_whole = description.numel();
  for (int64_t bytes : {5 * 3 * 8, 5 * 2 * 2 * 8, 5, 5 * 7 * 4}) {
    expected_whole = aligned(expected_whole) + bytes;
  }
  EXPECT_EQ(message_size(whole), expected_whole);

  const Batch back = unpack_description(description, c10::Device("cpu"));
  ASSERT_EQ(back.tensors.size(), batch.tensors.size());
  for (size_t t = 0; t < batch.tensors.size(); ++t)
    expect_same_layout(back.tensors[t], batch.tensors[t]);
  ASSERT_EQ(back.skips.size(), batch.skips.size());
  for (const auto& [name, tensor] : batch.skips) {
    ASSERT_EQ(back.skips.count(name), 1u) << name;
    expect_same_layout(back.skips.at(name), tensor);
  }
  // Cut short, it is refused like any message.
  EXPECT_THROW(
      unpack_description(description.narrow(0, 0, description.numel() - 8), c10::Device("cpu")),
      std::runtime_error);
}

TEST(WireMessage, SizeIsTheDescriptionPlusEachTensorAtAlignedOffsets) {
  Batch batch;
  batch.tensors.push_back(torch::ones({3, 5}, torch::kFloat));  // 60 bytes
  batch.skips["x"] = torch::ones({3}, torch::kDouble);          // 24 bytes
  // size, count; tensor count, skip count; layout 1, dtype, 2 dims, 3, 5; name length 1, 'x';
  // layout 1, dtype, 1 dim, 3.
  const int64_t description = (2 + 2 + 5 + 2 + 4) * 8;
  const int64_t first = aligned(description);
  const int64_t second = aligned(first + 60);
  const at::Tensor bytes = pack_message(batch);
  EXPECT_EQ(message_size(bytes), second + 24);
  EXPECT_EQ(bytes.numel(), second + 24);
  // The tensors are views of the buffer, at those offsets.
  const Batch back = unpack_message(bytes);
  const auto* base = bytes.data_ptr<uint8_t>();
  EXPECT_EQ(static_cast<const uint8_t*>(back.tensors[0].data_ptr()), base + first);
  EXPECT_EQ(static_cast<const uint8_t*>(back.skips.at("x").data_ptr()), base + second);
}

TEST(WireMessage, ALargerBufferKeepsTheMessagesSizeAndAZeroTail) {
  const Batch batch = mixed_batch();
  const int64_t size = message_size(pack_message(batch));
  const at::Tensor bytes = pack_message(batch, size + 1000);
  EXPECT_EQ(bytes.numel(), size + 1000);
  EXPECT_EQ(message_size(bytes), size);
  EXPECT_TRUE(torch::all(bytes.narrow(0, size, 1000) == 0).item<bool>());
  expect_same(unpack_message(bytes).skips.at("skip/a"), batch.skips.at("skip/a"));
  // A smaller minimum than the message changes nothing.
  EXPECT_EQ(pack_message(batch, 16).numel(), size);
}

TEST(WireMessage, ViewsKeepTheBufferAlive) {
  at::Tensor value;
  {
    Batch batch(torch::arange(10, torch::kDouble));
    value = unpack_message(pack_message(batch)).value();
  }
  EXPECT_TRUE(torch::equal(value, torch::arange(10, torch::kDouble)));
}

TEST(WireMessage, MalformedBuffersAreRefused) {
  const at::Tensor good = pack_message(mixed_batch());
  const int64_t size = message_size(good);
  auto with_word = [&](int64_t index, int64_t value) {
    at::Tensor bytes = good.clone();
    std::memcpy(bytes.data_ptr<uint8_t>() + index * 8, &value, 8);
    return bytes;
  };
  EXPECT_THROW(message_size(torch::zeros({4}, torch::kByte)), std::runtime_error);
  EXPECT_THROW(message_size(with_word(0, 3)), std::runtime_error);  // below the minimum
  EXPECT_THROW(message_size(with_word(0, int64_t{1} << 50)), std::runtime_error);
  EXPECT_THROW(unpack_message(good.narrow(0, 0, size - 1)), std::runtime_error);  // truncated
  EXPECT_THROW(unpack_message(with_word(1, 1)), std::runtime_error);     // description short
  EXPECT_THROW(unpack_message(with_word(1, size)), std::runtime_error);  // past the end
  // So many words that counting their bytes would overflow: (2 + 2^61) * 8 wraps to 16.
  EXPECT_THROW(unpack_message(with_word(1, int64_t{1} << 61)), std::runtime_error);
  EXPECT_THROW(unpack_message(with_word(2, 1000)), std::runtime_error);  // tensor count
  EXPECT_THROW(unpack_message(with_word(3, std::numeric_limits<int64_t>::max())),
               std::runtime_error);                                     // skips overflow
  EXPECT_THROW(unpack_message(with_word(5, 999)), std::runtime_error);  // dtype
  EXPECT_THROW(unpack_message(with_word(6, 99)), std::runtime_error);   // dims
  EXPECT_THROW(unpack_message(with_word(7, int64_t{1} << 40)), std::runtime_error);  // a size
  EXPECT_NO_THROW(unpack_message(good));
}

// Into memory of one's own (a shared slot): the same bytes as a packed message, exactly size().
TEST(WireMessage, AWriterWritesThePackedMessageIntoMemoryOfOnesOwn) {
  const Batch batch = mixed_batch();
  const at::Tensor packed = pack_message(batch);
  const MessageWriter writer(batch);
  ASSERT_EQ(writer.size(), packed.numel());
  std::vector<uint8_t> memory(static_cast<size_t>(writer.size()) + 64, 0xAB);
  writer.write(memory.data());
  EXPECT_EQ(std::memcmp(memory.data(), packed.data_ptr<uint8_t>(), memory.size() - 64), 0);
  EXPECT_EQ(memory.back(), 0xAB) << "nothing written past size()";
}

}  // namespace
