// The planner against an exhaustive enumeration of configurations, and on profiles whose best
// answer is known: pipeline, do not pipeline, or replicate.
#include "pipebal/balance/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "pipebal/balance/dp_partition.h"
#include "pipebal/balance/micro_batch_costs.h"
#include "pipebal/balance/plan.h"
#include "planner_support.h"

namespace pipebal::balance {
namespace {

using pipeline::CheckpointMode;
using pipeline::ScheduleKind;
using testing::on_devices;
using testing::profile_of;

// The profile's engine costs count in every configuration: once per step, once per action.
TEST(Planner, ChargesTheProfilesEngineCosts) {
  const CostProfile bare = profile_of({1, 2, 3, 4}, 0.5, 8);
  CostProfile measured = bare;
  measured.engine = EngineCost{0.4, 0.05};
  const PlanSearch search = on_devices(2);
  // The plain model: one stage, one micro-batch, F and B.
  EXPECT_NEAR(plain_model(measured, search.costs).step_ms,
              plain_model(bare, search.costs).step_ms + 0.4 + 2 * 0.05, 1e-9);
  // One stage at 4 micro-batches without recomputation: 8 actions.
  Configuration shape;
  shape.stages = 1;
  shape.chunks = 4;
  shape.checkpoint = pipeline::CheckpointMode::kNever;
  const Configuration plain = plain_model(bare, search.costs);
  EXPECT_NEAR(configure(measured, search.costs, shape, plain)->step_ms,
              configure(bare, search.costs, shape, plain)->step_ms + 0.4 + 8 * 0.05, 1e-9);
}

TEST(Planner, MatchesAnExhaustiveEnumerationOfConfigurations) {
  std::mt19937 random(7);
  std::uniform_real_distribution<double> cost(0.1, 2.0);
  for (int trial = 0; trial < 20; ++trial) {
    const int layers = 3 + trial % 4;
    std::vector<double> per_sample;
    for (int i = 0; i < layers; ++i) per_sample.push_back(cost(random));
    const CostProfile profile = profile_of(per_sample, cost(random), 8);
    PlanSearch search;
    search.devices = 3;
    search.costs.bandwidth_bytes_per_ms = 200 * (1 + trial % 3);
    search.costs.latency_ms = 0.05 * (trial % 2);
    if (trial % 5 == 0) search.costs.memory_caps_bytes = {20000};
    const PlanSearchResult result = search_plans(profile, search);

    // The reference: every configuration, dp's balance, the simulator's step.
    double best = std::numeric_limits<double>::infinity();
    int feasible = 0, searched = 0;
    for (const int chunks : {1, 2, 4, 8}) {
      for (int stages = 1; stages <= std::min(3, layers); ++stages) {
        for (const ScheduleKind schedule : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB}) {
          for (const CheckpointMode checkpoint :
               {CheckpointMode::kNever, CheckpointMode::kExceptLast, CheckpointMode::kAlways}) {
            ++searched;
            CostOptions options = search.costs;
            options.chunks = chunks;
            options.schedule = schedule;
            options.checkpoint = checkpoint;
            const CostModel model(layers_for_chunks(profile, chunks), stages, options);
            std::vector<int> balance;
            try {
              balance = dp_partition(model);
            } catch (const std::invalid_argument&) {
              continue;
            }
            // dp's balance within the caps, and its predicted peak too.
            const Plan plan = make_plan(model, balance, "dp");
            if (!plan.fits_memory()) continue;
            ++feasible;
            best = std::min(best, plan.prediction.step_ms);
          }
        }
      }
    }
    EXPECT_EQ(result.searched, searched) << trial;
    EXPECT_EQ(result.searched - result.over_memory, feasible) << trial;
    ASSERT_FALSE(result.ranked.empty());
    EXPECT_DOUBLE_EQ(result.ranked.front().step_ms, best) << trial;
    for (size_t k = 1; k < result.ranked.size(); ++k) {
      // Ranked by step time to the nanosecond (ties: fewer devices, less memory).
      EXPECT_LE(std::llround(result.ranked[k - 1].step_ms * 1e6),
                std::llround(result.ranked[k].step_ms * 1e6));
    }
    for (const Configuration& config : result.ranked) {
      EXPECT_TRUE(config.plan.fits_memory());
      EXPECT_EQ(config.plan.chunks, config.chunks);
      EXPECT_EQ(static_cast<int>(config.plan.balance.size()), config.stages);
      EXPECT_EQ(config.micro_batch_size, 8 / config.chunks);
      EXPECT_EQ(config.costs, CostSource::kMeasured);
      EXPECT_DOUBLE_EQ(config.speedup, result.plain.step_ms / config.step_ms);
    }
  }
}

// A link of bytes per second and outputs of gigabytes make steps of ~1e13 ms, past what int64
// nanoseconds hold: they are still ranked fastest first.
TEST(Planner, RanksStepsPastInt64Nanoseconds) {
  CostProfile profile = profile_of({1, 1, 1, 1}, 0, 8);
  for (SizedCosts& sized : profile.sizes) {
    for (LayerCost& layer : sized.layers) layer.output_bytes = int64_t{1'000'000'000} * 10;
  }
  profile.layers = profile.sizes.back().layers;
  PlanSearch search = on_devices(2);
  search.costs.bandwidth_bytes_per_ms = 1e-3;  // 1 byte per second
  const PlanSearchResult result = search_plans(profile, search);
  ASSERT_GE(result.ranked.size(), 2u);
  bool past = false;
  for (size_t k = 0; k < result.ranked.size(); ++k) {
    past = past || result.ranked[k].step_ms * 1e6 > 9.3e18;
    if (k > 0) {
      EXPECT_LE(result.ranked[k - 1].step_ms, result.ranked[k].step_ms) << k;
    }
  }
  EXPECT_TRUE(past) << "no step past int64 nanoseconds: the case tests nothing";
}

TEST(Planner, ReportsItsProgressOverEveryConfigurationCosted) {
  PlanSearch search = on_devices(3);
  std::vector<std::pair<size_t, size_t>> calls;
  search.on_progress = [&calls](size_t done, size_t total) { calls.emplace_back(done, total); };
  const PlanSearchResult result = search_plans(profile_of({1, 2, 3, 4}, 0.5, 8), search);
  ASSERT_EQ(calls.size(), static_cast<size_t>(result.searched) + 1);
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i], std::make_pair(i, static_cast<size_t>(result.searched)));
  }
}

TEST(Planner, PipelinesWhenCostsScaleWithTheMicroBatch) {
  // No fixed cost per call and free transfers: small micro-batches lose nothing, and two
  // stages of eight micro-batches overlap almost fully.
  const CostProfile profile = profile_of({1, 1, 1, 1}, 0, 8);
  PlanSearch search;
  search.devices = 2;
  const PlanSearchResult result = search_plans(profile, search);
  const Configuration& best = result.ranked.front();
  EXPECT_EQ(best.stages, 2);
  EXPECT_EQ(best.chunks, 8);
  EXPECT_EQ(best.checkpoint, CheckpointMode::kNever);
  EXPECT_EQ(best.plan.balance, (std::vector<int>{2, 2}));
  // 2 stages, 8 micro-batches: (8 + 1) steps of half the work instead of 8 of the whole.
  EXPECT_NEAR(best.speedup, 16.0 / 9.0, 1e-12);
  EXPECT_NEAR(result.plain.step_ms, 4 * 3 * 8.0, 1e-12);
  EXPECT_EQ(result.plain.stages, 1);
  EXPECT_EQ(result.plain.chunks, 1);
}

// Interleaving is searched when asked for: with costs that scale with the micro-batch and free
// links, two devices of two stages each beat 1F1B's two stages (the bubble halves), the plan
// lists all four stages and says so, and a count of micro-batches that is not whole rounds of
// the devices is not searched for it.
TEST(Planner, SearchesTheInterleavedScheduleWhenListed) {
  const CostProfile profile = profile_of({1, 1, 1, 1, 1, 1, 1, 1}, 0, 8);
  PlanSearch search;
  search.devices = 2;
  search.schedules = {ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved};
  search.checkpoints = {CheckpointMode::kNever};
  const PlanSearchResult result = search_plans(profile, search);
  const Configuration& best = result.ranked.front();
  EXPECT_EQ(best.schedule, ScheduleKind::kInterleaved);
  EXPECT_EQ(best.stages, 2);
  EXPECT_GE(best.virtual_stages, 2);
  EXPECT_EQ(best.plan.virtual_stages, best.virtual_stages);
  EXPECT_EQ(static_cast<int>(best.plan.balance.size()), 2 * best.virtual_stages);
  EXPECT_TRUE(best.plan.search_exhaustive);
  EXPECT_NE(describe(best).find("2 devices of"), std::string::npos) << describe(best);
  // 8 micro-batches of equal layers: (8 V + 1) slots of 1/(2V) of the work against 1F1B's 9 of 1/2.
  const double plain = result.plain.step_ms;
  EXPECT_NEAR(best.step_ms, plain * (8.0 * best.virtual_stages + 1) / (16.0 * best.virtual_stages),
              1e-9 * plain);
  for (const Configuration& config : result.ranked) {
    if (config.schedule == ScheduleKind::kInterleaved) {
      EXPECT_EQ(config.chunks % 2, 0);
    }
  }
  search.schedules = {ScheduleKind::kOneFOneB};
  EXPECT_GT(search_plans(profile, search).ranked.front().step_ms, best.step_ms);
}

TEST(Planner, SaysNotToPipelineWhenSmallMicroBatchesCostTooMuch) {
  // A fixed 10 ms per layer call dwarfs the per-sample work: one call of the whole batch wins.
  const CostProfile profile = profile_of({0.01, 0.01, 0.01, 0.01}, 10, 8);
  PlanSearch search;
  search.devices = 4;
  const PlanSearchResult result = search_plans(profile, search);
  const Configuration& best = result.ranked.front();
  EXPECT_EQ(best.chunks, 1);
  EXPECT_EQ(best.stages, 1);
  EXPECT_DOUBLE_EQ(best.step_ms, result.plain.step_ms);
  EXPECT_DOUBLE_EQ(best.speedup, 1.0);
  for (const Configuration& config : result.ranked) EXPECT_LE(config.speedup, 1.0 + 1e-12);
}

// The plain model stays a candidate when the search's schedules, micro-batch counts or
// checkpoint modes leave it out: the recommendation is never a slower configuration for want of
// it, and a checkpointed single micro-batch is not called the plain model.
TEST(Planner, KeepsThePlainModelWhateverTheSearchLeavesOut) {
  const CostProfile profile = profile_of({0.01, 0.01, 0.01, 0.01}, 10, 8);
  for (int leave_out = 0; leave_out < 3; ++leave_out) {
    PlanSearch search = on_devices(2);
    if (leave_out == 0) search.schedules = {ScheduleKind::kInterleaved};
    if (leave_out == 1) search.chunks = {2, 4};
    if (leave_out == 2) search.checkpoints = {CheckpointMode::kAlways};
    const PlanSearchResult result = search_plans(profile, search);
    const Configuration& pick = result.ranked[result.recommended];
    EXPECT_EQ(describe(pick), "the plain model on one device") << leave_out;
    EXPECT_DOUBLE_EQ(pick.step_ms, result.plain.step_ms) << leave_out;
    for (const Configuration& c : result.ranked) {
      if (&c != &pick) {
        EXPECT_NE(describe(c), "the plain model on one device") << leave_out;
      }
    }
  }
}

TEST(Planner, ReplicatesWhenDataParallelismIsFree) {
  // Costs linear in the batch and a free all-reduce: two replicas halve the step, which no
  // two-stage pipeline can (it has a bubble).
  const CostProfile profile = profile_of({1, 1, 1, 1}, 0, 8);
  PlanSearch search;
  search.devices = 2;
  search.data_parallel = true;
  const PlanSearchResult result = search_plans(profile, search);
  const Configuration& best = result.ranked.front();
  EXPECT_EQ(best.replicas, 2);
  EXPECT_EQ(best.stages, 1);
  EXPECT_NEAR(best.speedup, 2.0, 1e-12);
  EXPECT_EQ(best.plan.replicas, 2);
  EXPECT_EQ(best.plan.input_shape, (std::vector<int64_t>{4, 4}));  // one replica's batch
  // A slow all-reduce makes replication lose to the pipeline.
  search.costs.allreduce_bytes_per_ms = 1;
  const PlanSearchResult slow = search_plans(profile, search);
  EXPECT_EQ(slow.ranked.front().replicas, 1);
  EXPECT_EQ(slow.ranked.front().stages, 2);
}

// A replica's devices are its own: their caps and speeds count, replica r's stage s on device
// r x stages + s. A second device at half speed makes two replicas wait for it (no faster than
// one device alone), and one too small for the model leaves replication out.
TEST(Planner, WeighsTheCapsAndSpeedsOfEveryReplicasDevices) {
  const CostProfile profile = profile_of({1, 1, 1, 1}, 0, 8);
  PlanSearch search;
  search.devices = 2;
  search.data_parallel = true;
  search.costs.device_speeds = {1, 0.5};
  const PlanSearchResult slowed = search_plans(profile, search);
  for (const Configuration& c : slowed.ranked) {
    if (c.replicas == 2) {
      EXPECT_NEAR(c.step_ms, slowed.plain.step_ms, 1e-9)
          << describe(c);  // half the batch at half speed
    }
  }
  search.costs.device_speeds = {};
  const PlanSearchResult free_model = search_plans(profile, search);
  int64_t replicated_peak = std::numeric_limits<int64_t>::max();  // the leanest replicated
  for (const Configuration& c : free_model.ranked) {
    if (c.replicas == 2) replicated_peak = std::min(replicated_peak, c.peak_bytes);
  }
  ASSERT_LT(replicated_peak, std::numeric_limits<int64_t>::max());
  search.costs.memory_caps_bytes = {int64_t{1} << 40, replicated_peak - 1};
  for (const Configuration& c : search_plans(profile, search).ranked) {
    EXPECT_EQ(c.replicas, 1) << describe(c);
  }
}

// Dominance against the grid kept whole: a configuration is left out exactly when a ranked one
// of the same stages, replicas, micro-batches and threads is no slower and holds no more; the
// result counts them and names the schedules that lost every configuration so. zb-h1 whose B
// alone costs the whole backward never pays (its fastest delays make it 1F1B at best), and
// with B = backward - W it fills 1F1B's bubble and is ranked.
TEST(Planner, LeavesOutOnlyDominatedConfigurationsAndNamesTheSchedulesThatLostThemAll) {
  for (const bool split_pays : {false, true}) {
    CostProfile profile = profile_of({1, 2, 1, 3, 1, 2}, 0.2, 8);
    const auto split = [split_pays](std::vector<LayerCost>& layers) {
      for (LayerCost& l : layers) {
        l.weight_ms = l.backward_ms / 2;
        l.input_grad_ms = split_pays ? -1 : l.backward_ms;
      }
    };
    split(profile.layers);
    for (SizedCosts& size : profile.sizes) split(size.layers);
    PlanSearch search = on_devices(2);
    search.schedules = {ScheduleKind::kOneFOneB, ScheduleKind::kZeroBubbleH1};
    search.keep_dominated = true;
    const PlanSearchResult all = search_plans(profile, search);
    search.keep_dominated = false;
    const PlanSearchResult kept = search_plans(profile, search);

    const auto same_shape = [](const Configuration& a, const Configuration& b) {
      return a.stages == b.stages && a.replicas == b.replicas && a.chunks == b.chunks &&
             a.threads_per_stage == b.threads_per_stage;
    };
    const auto dominates = [&](const Configuration& a, const Configuration& b) {
      return same_shape(a, b) && std::llround(a.step_ms * 1e6) <= std::llround(b.step_ms * 1e6) &&
             a.peak_bytes <= b.peak_bytes;
    };
    const auto key = [](const Configuration& c) { return describe(c); };
    EXPECT_EQ(kept.dominated, static_cast<int>(all.ranked.size() - kept.ranked.size()));
    size_t next = 0;  // `kept` is `all` in the same order, less the dominated ones
    for (const Configuration& c : all.ranked) {
      const bool is_kept = next < kept.ranked.size() && key(kept.ranked[next]) == key(c);
      const bool beaten = std::any_of(kept.ranked.begin(), kept.ranked.begin() + next,
                                      [&](const Configuration& k) { return dominates(k, c); });
      EXPECT_NE(is_kept, beaten) << describe(c);
      if (is_kept) ++next;
    }
    EXPECT_EQ(next, kept.ranked.size());

    const auto ranks = [&](ScheduleKind schedule) {
      return std::any_of(kept.ranked.begin(), kept.ranked.end(),
                         [&](const Configuration& c) { return c.schedule == schedule; });
    };
    EXPECT_TRUE(ranks(ScheduleKind::kOneFOneB));
    EXPECT_EQ(ranks(ScheduleKind::kZeroBubbleH1), split_pays);
    EXPECT_EQ(kept.dominated_schedules,
              split_pays ? std::vector<ScheduleKind>{}
                         : std::vector<ScheduleKind>{ScheduleKind::kZeroBubbleH1});
  }
}

// Repricing: the same profile gives back every configuration's prediction exactly; a profile
// twice as slow in every layer (free links) twice its step; the balance stays the one it had,
// where dp on the new costs would cut elsewhere.
TEST(Planner, RepricesAConfigurationUnderAnotherProfileKeepingItsBalance) {
  const CostProfile profile = profile_of({1, 2, 1, 3, 1, 2}, 0.2, 8);
  CostProfile wide = profile_of({0.6, 1.1, 0.6, 1.6, 0.6, 1.1}, 0.1, 8);
  wide.threads = 2;
  PlanSearch search = on_devices(3);
  search.plain_profiles = {wide};
  search.schedules = {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved,
                      ScheduleKind::kZeroBubbleH1};
  search.keep_dominated = true;
  const PlanSearchResult result = search_plans(profile, search);
  ASSERT_GT(result.ranked.size(), 20u);
  const auto scaled = [](CostProfile p, double factor) {
    const auto scale = [factor](std::vector<LayerCost>& layers) {
      for (LayerCost& l : layers) {
        l.forward_ms *= factor;
        l.backward_ms *= factor;
        l.weight_ms *= factor;
      }
    };
    scale(p.layers);
    for (SizedCosts& size : p.sizes) scale(size.layers);
    return p;
  };
  const CostProfile twice = scaled(profile, 2), wide_twice = scaled(wide, 2);
  const Configuration plain_twice = plain_model(twice, search.costs);
  for (const Configuration& config : result.ranked) {
    const bool threads = config.threads_per_stage > 1;
    const Configuration same =
        reprice(threads ? wide : profile, search.costs, config, result.plain);
    EXPECT_NEAR(same.step_ms, config.step_ms, 1e-9) << describe(config);
    EXPECT_NEAR(same.speedup, config.speedup, 1e-12) << describe(config);
    EXPECT_EQ(same.plan.balance, config.plan.balance) << describe(config);
    EXPECT_EQ(same.plan.weight_delays, config.plan.weight_delays) << describe(config);
    const Configuration slower =
        reprice(threads ? wide_twice : twice, search.costs, config, plain_twice);
    EXPECT_NEAR(slower.step_ms, 2 * config.step_ms, 1e-9) << describe(config);
    EXPECT_EQ(slower.plan.balance, config.plan.balance) << describe(config);
  }
  // Only the last layer slower: dp would move the cut, the repriced plan keeps it.
  const Configuration two_stages = *configure(
      profile, search.costs,
      [] {
        Configuration shape;
        shape.stages = 2;
        shape.chunks = 4;
        return shape;
      }(),
      result.plain);
  CostProfile last_slow = profile;
  for (SizedCosts& size : last_slow.sizes) size.layers.back().forward_ms *= 10;
  last_slow.layers.back().forward_ms *= 10;
  const Configuration rebalanced =
      *configure(last_slow, search.costs, two_stages, plain_model(last_slow, search.costs));
  ASSERT_NE(rebalanced.plan.balance, two_stages.plan.balance);
  const Configuration kept =
      reprice(last_slow, search.costs, two_stages, plain_model(last_slow, search.costs));
  EXPECT_EQ(kept.plan.balance, two_stages.plan.balance);
  // The reference: the old balance simulated on the new costs.
  CostOptions options = search.costs;
  options.chunks = 4;
  options.schedule = two_stages.schedule;
  options.checkpoint = two_stages.checkpoint;
  const CostModel model(layers_for_chunks(last_slow, 4), 2, options);
  EXPECT_NEAR(kept.step_ms, make_plan(model, two_stages.plan.balance, "dp").prediction.step_ms,
              1e-9);
  EXPECT_GT(kept.step_ms, two_stages.step_ms);
}

TEST(Planner, KeepsEveryStageWithinItsMemoryCap) {
  const CostProfile profile = profile_of({1, 1, 1, 1}, 0, 8);
  PlanSearch search;
  search.devices = 2;
  // Below what the whole batch's activations on one stage take without checkpointing.
  search.costs.memory_caps_bytes = {12000};
  const PlanSearchResult result = search_plans(profile, search);
  EXPECT_GT(result.over_memory, 0);
  for (const Configuration& config : result.ranked) {
    EXPECT_TRUE(config.plan.fits_memory());
    EXPECT_LE(config.peak_bytes, 12000);
  }
  EXPECT_FALSE(result.plain.plan.fits_memory());
  search.costs.memory_caps_bytes = {100};
  try {
    search_plans(profile, search);
    FAIL() << "nothing fits 100 bytes";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("no configuration fits the memory caps"),
              std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("needs a cap of"), std::string::npos);
  }
  // Past the bytes pipebal counts no cap would do, and the error says so (not "a cap of 0 B").
  CostProfile huge = profile_of({1, 1, 1, 1, 1, 1}, 0, 8);
  for (SizedCosts& sized : huge.sizes) {
    for (LayerCost& layer : sized.layers) layer.param_bytes = kMaxLayerBytes;
  }
  huge.layers = huge.sizes.back().layers;
  search.costs.param_scale = 1e6;
  try {
    search_plans(huge, search);
    FAIL() << "nothing fits 100 bytes";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("needs more than 8.00 EiB, the most pipebal counts"),
              std::string::npos)
        << error.what();
  }
}

TEST(Planner, DropsConfigurationsThatBuyNothing) {
  const PlanSearchResult result = search_plans(profile_of({1, 2, 3}, 0.5, 8), on_devices(3));
  for (size_t a = 0; a < result.ranked.size(); ++a) {
    for (size_t b = a + 1; b < result.ranked.size(); ++b) {
      const Configuration& x = result.ranked[a];
      const Configuration& y = result.ranked[b];
      if (x.stages == y.stages && x.chunks == y.chunks && x.replicas == y.replicas) {
        EXPECT_LT(y.peak_bytes, x.peak_bytes) << "rank " << b << " is slower and no leaner";
      }
    }
  }
}

TEST(Planner, AOneSizeProfileSearchesItsOwnChunks) {
  CostProfile profile = profile_of({1, 1}, 0, 8);
  profile.sizes.clear();
  profile.batch_size = 2;
  profile.chunks = 4;
  const PlanSearchResult result = search_plans(profile, on_devices(2));
  EXPECT_TRUE(result.one_size);
  for (const Configuration& config : result.ranked) {
    if (config.chunks == 1) {  // beside its own count: the plain model, extrapolated
      EXPECT_EQ(describe(config), "the plain model on one device");
      EXPECT_EQ(config.costs, CostSource::kExtrapolated);
    } else {
      EXPECT_EQ(config.chunks, 4);
    }
  }
  EXPECT_EQ(result.plain.costs, CostSource::kExtrapolated);
}

// The plain model extrapolated from a one-size profile is weighed beside what was searched: a
// pipeline predicted slower than it (here by the link's latency) is not recommended, nor one
// stage over several micro-batches (the engine's cost per action).
TEST(Planner, AOneSizeProfileRecommendsThePlainModelWhereNothingSearchedBeatsIt) {
  CostProfile profile = profile_of({1, 1}, 0, 8);
  profile.sizes.clear();
  profile.batch_size = 2;
  profile.chunks = 4;
  profile.engine = EngineCost{0, 5, 0};
  PlanSearch search = on_devices(2);
  search.costs.latency_ms = 100;
  const PlanSearchResult result = search_plans(profile, search);
  ASSERT_TRUE(result.one_size);
  ASSERT_EQ(result.plain.costs, CostSource::kExtrapolated);
  EXPECT_EQ(describe(result.recommendation()), "the plain model on one device");
  EXPECT_DOUBLE_EQ(result.recommendation().step_ms, result.plain.step_ms);
  for (const Configuration& config : result.ranked) {
    EXPECT_GE(config.step_ms, result.plain.step_ms) << describe(config);
  }
}

// A count the user gives is searched even when it does not divide the batch, as balance and the
// engine take it: 8 samples in 3 micro-batches (3, 3, 2) charged as three of 3 samples. A one-size
// profile then says nothing of counts left unsearched: the user chose them.
TEST(Planner, CostsAGivenCountThatDoesNotDivideTheBatchAtItsRoundedUpSize) {
  PlanSearch search = on_devices(1);
  search.chunks = {3};
  search.schedules = {ScheduleKind::kGPipe};
  search.checkpoints = {CheckpointMode::kNever};
  const PlanSearchResult result = search_plans(profile_of({1, 1}, 0, 8), search);
  ASSERT_FALSE(result.ranked.empty());
  const auto three = std::find_if(result.ranked.begin(), result.ranked.end(),
                                  [](const Configuration& c) { return c.chunks == 3; });
  ASSERT_NE(three, result.ranked.end());
  EXPECT_EQ(three->micro_batch_size, 3);
  EXPECT_NEAR(three->step_ms, 3 * 3 * (2 + 4), 1e-9);  // 3 micro-batches x 3 samples x 6 ms
  EXPECT_FALSE(result.one_size);

  CostProfile one_size = profile_of({1, 1}, 0, 8);
  one_size.sizes.clear();
  one_size.batch_size = 2;
  one_size.chunks = 4;
  EXPECT_FALSE(search_plans(one_size, search).one_size) << "its counts were given";
}

// Interleaving listed but never searched is said, with what it needs: devices, whole rounds of
// micro-batches. With nothing else to search (the plain model only extrapolated), that is the
// error.
TEST(Planner, SaysWhyInterleavingWasNotSearched) {
  const CostProfile profile = profile_of({1, 1, 1, 1, 1, 1, 1, 1}, 0, 8);
  PlanSearch search = on_devices(1);
  search.schedules = {ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved};
  EXPECT_EQ(search_plans(profile, search).interleaved_not_searched,
            "needs 2 devices or more (1 given)");
  search.schedules = {ScheduleKind::kInterleaved};
  const PlanSearchResult plain_only = search_plans(profile, search);
  EXPECT_EQ(describe(plain_only.recommendation()), "the plain model on one device");
  EXPECT_EQ(plain_only.interleaved_not_searched, "needs 2 devices or more (1 given)");
  CostProfile one_size = profile;
  one_size.sizes.clear();
  one_size.batch_size = 2;
  one_size.chunks = 4;
  try {
    search_plans(one_size, search);
    ADD_FAILURE() << "searched nothing without saying so";
  } catch (const std::invalid_argument& error) {
    EXPECT_EQ(std::string(error.what()),
              "no configuration to search: interleaved needs 2 devices or more (1 given)");
  }
  search = on_devices(2);
  search.schedules = {ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved};
  search.chunks = {1};  // no whole round of 2 stages
  EXPECT_NE(search_plans(profile, search)
                .interleaved_not_searched.find("a micro-batch count that is a multiple of the "
                                               "stage count, and at least 2 or 3 layers per "
                                               "device (8 layers here)"),
            std::string::npos);
  search.chunks = {2};
  EXPECT_EQ(search_plans(profile, search).interleaved_not_searched, "");
  search.schedules = {ScheduleKind::kOneFOneB};
  search.chunks = {1};
  EXPECT_EQ(search_plans(profile, search).interleaved_not_searched, "") << "not listed";
}

TEST(Planner, RefusesWhatItCannotSearch) {
  CostProfile profile = profile_of({1, 1}, 0, 8);
  PlanSearch search = on_devices(2);
  search.chunks = {9};
  try {
    search_plans(profile, search);
    ADD_FAILURE() << "searched 9 micro-batches of 8 samples";
  } catch (const std::invalid_argument& error) {
    EXPECT_EQ(std::string(error.what()),
              "--chunks 9 is more than the mini-batch of 8 samples: at most one micro-batch per "
              "sample");
  }
  search.chunks = {0};
  try {
    search_plans(profile, search);
    ADD_FAILURE() << "searched no micro-batches";
  } catch (const std::invalid_argument& error) {
    EXPECT_EQ(std::string(error.what()), "--chunks must be at least 1, got 0");
  }
  search.chunks = {};
  search.costs.device_speeds = {1, 1, 1};
  EXPECT_THROW(search_plans(profile, search), std::invalid_argument);
  profile.input_shape.clear();
  EXPECT_THROW(search_plans(profile, on_devices(2)), std::invalid_argument);
  EXPECT_THROW(search_plans(profile_of({1}, 0, 8), on_devices(0)), std::invalid_argument);
}

}  // namespace
}  // namespace pipebal::balance
