// workflow::profile_at_sizes: which micro-batch sizes it measures, and which it leaves to the cost
// model's interpolation because the cost per sample is already linear around them.
#include "pipebal/workflow/profiling.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "pipebal/models/synthetic.h"
#include "pipebal/models/zoo.h"

namespace pipebal::workflow {
namespace {

TEST(LinearBetween, ComparesTheCostPerSampleAtBothEnds) {
  // 1 ms for 4 samples and 4 ms for 16: 0.25 ms per sample at both ends.
  EXPECT_TRUE(linear_between(4, 1.0, 16, 4.0, 0.0));
  // 4.1 ms for 16 samples is 2.5% more per sample: within 3%, not within 2%.
  EXPECT_TRUE(linear_between(4, 1.0, 16, 4.1, 0.03));
  EXPECT_FALSE(linear_between(4, 1.0, 16, 4.1, 0.02));
  // Cheaper per sample at the large size (small GEMMs are inefficient) counts just the same.
  EXPECT_TRUE(linear_between(4, 1.0, 16, 3.9, 0.03));
  EXPECT_FALSE(linear_between(4, 1.0, 16, 3.0, 0.03));
}

std::vector<int64_t> measured(const profiler::Profile& profile) {
  std::vector<int64_t> sizes;
  for (const profiler::Profile::Size& size : profile.sizes) sizes.push_back(size.micro_batch_size);
  return sizes;
}

class ProfileAtSizes : public ::testing::Test {
 protected:
  models::Model model = models::build_model("mlp:layers=2,width=16", /*seed=*/0);
  std::vector<models::InputSpec> inputs = models::model_inputs(model, {}, {32, 16});
  profiler::ProfileOptions options = [] {
    profiler::ProfileOptions o;
    o.warmup = 1;
    o.repeat = 2;
    return o;
  }();
  // Micro-batches of 32 (the profile's own), 16, 8, 4, 2 and 1 samples.
  std::vector<int> chunks = {1, 2, 4, 8, 16, 32};
};

TEST_F(ProfileAtSizes, NoToleranceMeasuresEverySize) {
  const profiler::Profile profile = profile_at_sizes(model, inputs, chunks, 0, options, {}, {}, 0);
  EXPECT_EQ(measured(profile), (std::vector<int64_t>{1, 2, 4, 8, 16, 32}));
  EXPECT_TRUE(profile.skipped_sizes.empty());
  EXPECT_EQ(profile.chunks, 1);
}

TEST_F(ProfileAtSizes, AnyCostWithinAHugeToleranceKeepsOnlyTheEndsAndTheProfilesOwnSize) {
  // The profile's own size first (8 samples), then the smallest and the largest; with every cost
  // "linear", nothing between them is measured.
  const std::vector<int> own_first = {4, 1, 2, 8, 16, 32};
  const profiler::Profile profile =
      profile_at_sizes(model, inputs, own_first, 0, options, {}, {}, 1000);
  EXPECT_EQ(measured(profile), (std::vector<int64_t>{1, 8, 32}));
  EXPECT_EQ(profile.skipped_sizes, (std::vector<int64_t>{2, 4, 16}));
  EXPECT_EQ(profile.chunks, 4);
  EXPECT_EQ(profile.batch_size, 8);
}

TEST_F(ProfileAtSizes, EveryAskedSizeIsEitherMeasuredOrSkipped) {
  // A real tolerance: whichever sizes the machine finds linear, none is lost or measured twice.
  const profiler::Profile profile =
      profile_at_sizes(model, inputs, chunks, 0, options, {}, {}, 0.03);
  std::vector<int64_t> all = measured(profile);
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end()));
  EXPECT_EQ(all.front(), 1);
  EXPECT_EQ(all.back(), 32);
  all.insert(all.end(), profile.skipped_sizes.begin(), profile.skipped_sizes.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<int64_t>{1, 2, 4, 8, 16, 32}));
}

}  // namespace
}  // namespace pipebal::workflow
