// A batch one stage's thread takes from another's is charged to the taker: wholly when only the
// batch refers to its memory (a copy when it views a part of it), to both while the sender still
// uses it.
#include "pipebal/profiler/taken_batch.h"

#include <thread>
#include <utility>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pipebal/profiler/cpu_memory.h"

namespace pipebal::profiler {
namespace {

constexpr int kSender = 21;
constexpr int kTaker = 22;
constexpr int64_t kBytes = 1000 * 4;

// Runs `f` on a thread whose allocations count under `tag`.
template <typename F>
void on_thread_tagged(int tag, F f) {
  std::thread worker([tag, &f] {
    CpuMemoryScope::set_thread_tag(tag);
    f();
  });
  worker.join();
}

struct Counts {
  const CpuMemoryScope& scope;
  int64_t sender_base, taker_base, total_base;
  explicit Counts(const CpuMemoryScope& s)
      : scope(s),
        sender_base(s.current_bytes(kSender)),
        taker_base(s.current_bytes(kTaker)),
        total_base(s.current_bytes()) {}
  int64_t sender() const { return scope.current_bytes(kSender) - sender_base; }
  int64_t taker() const { return scope.current_bytes(kTaker) - taker_base; }
  int64_t total() const { return scope.current_bytes() - total_base; }
};

TEST(TakenBatch, HandsOverMemoryOnlyTheBatchRefersTo) {
  CpuMemoryScope scope;
  const Counts counts(scope);
  pipeline::Batch batch;
  on_thread_tagged(kSender, [&] {
    const at::Tensor output = torch::ones({1000});
    batch.tensors.push_back(output);
    batch.skips.emplace("same", output);                   // the same tensor twice
    batch.skips.emplace("view", output.narrow(0, 0, 10));  // a view of its memory
  });
  const void* data = batch.value().data_ptr();
  ASSERT_EQ(counts.sender(), kBytes);
  scope.reset_peak();

  on_thread_tagged(kTaker, [&] { count_as_taken(batch); });
  EXPECT_EQ(counts.sender(), 0);
  EXPECT_EQ(counts.taker(), kBytes);
  EXPECT_EQ(counts.total(), kBytes);
  EXPECT_EQ(scope.peak_bytes() - counts.total_base, kBytes) << "moved, not counted twice";
  EXPECT_EQ(batch.value().data_ptr(), data) << "the same memory, not a copy";
  EXPECT_EQ(batch.skips.at("view").data_ptr(), data);

  batch = pipeline::Batch();
  EXPECT_EQ(counts.taker(), 0);
  EXPECT_EQ(counts.total(), 0);
}

// A part of a block (a skip's gradient sliced from a concatenation's) is what a device would
// receive: the taker holds a copy of that part, and the block goes.
TEST(TakenBatch, CopiesThePartOfABlockOnlyTheBatchRefersTo) {
  CpuMemoryScope scope;
  const Counts counts(scope);
  pipeline::Batch batch;
  on_thread_tagged(kSender, [&] {
    const at::Tensor block = torch::arange(1000, torch::kFloat);
    const at::Tensor part = block.narrow(0, 100, 250);
    batch.tensors.push_back(part);
    batch.skips.emplace("same", part);  // the same view twice stays one
  });
  ASSERT_EQ(counts.sender(), kBytes);

  on_thread_tagged(kTaker, [&] { count_as_taken(batch); });
  EXPECT_EQ(counts.sender(), 0) << "the block went with its last view";
  EXPECT_EQ(counts.taker(), kBytes / 4);
  EXPECT_EQ(counts.total(), kBytes / 4);
  EXPECT_EQ(batch.value()[0].item<float>(), 100.0f);
  EXPECT_FLOAT_EQ(batch.value().sum().item<float>(), (100.0f + 349.0f) * 250.0f / 2.0f);
  EXPECT_TRUE(batch.skips.at("same").is_same(batch.value()));

  batch = pipeline::Batch();
  EXPECT_EQ(counts.taker(), 0);
  EXPECT_EQ(counts.total(), 0);
}

TEST(TakenBatch, ChargesBothWhileTheSenderStillUsesIt) {
  CpuMemoryScope scope;
  const Counts counts(scope);
  pipeline::Batch batch;
  at::Tensor kept;  // the sender's own reference, as a stage keeps the output it will
                    // back-propagate from
  on_thread_tagged(kSender, [&] {
    kept = torch::arange(1000, torch::kFloat);
    batch.tensors.push_back(kept);
    batch.skips.emplace("view", kept.narrow(0, 500, 10));
  });

  on_thread_tagged(kTaker, [&] { count_as_taken(batch); });
  EXPECT_EQ(counts.sender(), kBytes);
  EXPECT_EQ(counts.taker(), kBytes) << "each view's bytes once, at most the block's";
  EXPECT_EQ(batch.value().data_ptr(), kept.data_ptr()) << "the same memory, not a copy";
  EXPECT_EQ(batch.skips.at("view")[0].item<float>(), 500.0f);

  kept = at::Tensor();  // the sender is done; the taker's views keep the memory alive
  EXPECT_EQ(counts.sender(), kBytes);
  EXPECT_FLOAT_EQ(batch.value().sum().item<float>(), 999.0f * 1000.0f / 2.0f);
  pipeline::Batch last_view;
  last_view.skips = batch.skips;
  batch = pipeline::Batch();
  EXPECT_EQ(counts.taker(), kBytes) << "until the taker's last view is gone";
  last_view = pipeline::Batch();
  EXPECT_EQ(counts.sender(), 0);
  EXPECT_EQ(counts.taker(), 0);
  EXPECT_EQ(counts.total(), 0);
}

TEST(TakenBatch, LeavesMemoryAllocatedOutsideAScopeUncounted) {
  pipeline::Batch batch(torch::ones({1000}));  // before any scope
  CpuMemoryScope scope;
  const Counts counts(scope);
  on_thread_tagged(kTaker, [&] { count_as_taken(batch); });
  EXPECT_EQ(counts.taker(), 0);
  EXPECT_EQ(counts.total(), 0);
  EXPECT_FLOAT_EQ(batch.value().sum().item<float>(), 1000.0f);
}

// Once the counted steps are over, a take changes nothing: not even a tensor the sender keeps
// is rewrapped.
TEST(TakenBatch, DoesNothingWhileNoScopeCounts) {
  ASSERT_FALSE(CpuMemoryScope::counting());
  const at::Tensor kept = torch::ones({1000});
  pipeline::Batch batch(kept);
  on_thread_tagged(kTaker, [&] { count_as_taken(batch); });
  EXPECT_EQ(batch.value().unsafeGetTensorImpl(), kept.unsafeGetTensorImpl());
}

}  // namespace
}  // namespace pipebal::profiler
