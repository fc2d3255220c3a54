// Scatter into micro-batches and gather back.
#include "pipebal/pipeline/batch.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace pipebal::pipeline {
namespace {

TEST(Batch, ScatterSplitsUnevenBatchIntoExactlyChunksDifferingByAtMostOne) {
  Batch batch(torch::arange(10).view({10, 1}));
  const auto parts = scatter(batch, 4);
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts[0].size(), 3);
  EXPECT_EQ(parts[1].size(), 3);
  EXPECT_EQ(parts[2].size(), 2);
  EXPECT_EQ(parts[3].size(), 2);
  EXPECT_EQ(parts[2].value()[0].item<int64_t>(), 6);  // order is preserved
}

TEST(Batch, GatherInvertsScatterForSeveralTensorsAndSkips) {
  Batch batch({torch::randn({7, 3}), torch::randint(5, {7}, torch::kLong)});
  batch.skips["enc0"] = torch::randn({7, 2, 2});
  for (int chunks : {1, 2, 3, 7}) {
    const Batch back = gather(scatter(batch, chunks));
    ASSERT_EQ(back.tensors.size(), 2u);
    EXPECT_TRUE(torch::equal(back.tensors[0], batch.tensors[0]));
    EXPECT_TRUE(torch::equal(back.tensors[1], batch.tensors[1]));
    ASSERT_EQ(back.skips.count("enc0"), 1u);
    EXPECT_TRUE(torch::equal(back.skips.at("enc0"), batch.skips.at("enc0")));
  }
}

TEST(Batch, ScatterRejectsMoreChunksThanSamples) {
  Batch batch(torch::zeros({3, 2}));
  try {
    scatter(batch, 4);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("more chunks than samples"), std::string::npos);
  }
  EXPECT_THROW(scatter(batch, 0), std::invalid_argument);
}

TEST(Batch, ScatterRejectsTensorsThatDisagreeOnDimZero) {
  Batch batch({torch::zeros({4, 2}), torch::zeros({3, 2})});
  EXPECT_THROW(scatter(batch, 2), std::invalid_argument);
  Batch skip(torch::zeros({4, 2}));
  skip.skips["s"] = torch::zeros({5});
  EXPECT_THROW(scatter(skip, 2), std::invalid_argument);
}

TEST(Batch, GatherRejectsMismatchedStructures) {
  std::vector<Batch> parts{Batch(torch::zeros({2})), Batch({torch::zeros({2}), torch::zeros({2})})};
  EXPECT_THROW(gather(parts), std::invalid_argument);
  EXPECT_THROW(gather({}), std::invalid_argument);
}

TEST(Batch, MicroBatchSizesSumToTheSamples) {
  for (int64_t samples = 1; samples < 40; ++samples) {
    for (int chunks = 1; chunks <= samples; ++chunks) {
      const auto sizes = micro_batch_sizes(samples, chunks);
      int64_t total = 0;
      for (auto s : sizes) total += s;
      EXPECT_EQ(total, samples);
      EXPECT_LE(sizes.front() - sizes.back(), 1);
    }
  }
}

}  // namespace
}  // namespace pipebal::pipeline
