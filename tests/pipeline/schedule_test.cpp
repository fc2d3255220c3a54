// The schedule definition shared by the engine and the simulator.
#include "pipebal/pipeline/schedule.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace pipebal::pipeline {
namespace {

using A = ActionKind;

TEST(Schedule, GPipeRunsAllForwardsThenBackwardsInReverse) {
  const Schedule s = make_schedule(ScheduleKind::kGPipe, 2, 3, CheckpointMode::kNever);
  const std::vector<Action> expected{{A::kForward, 0},  {A::kForward, 1},  {A::kForward, 2},
                                     {A::kBackward, 2}, {A::kBackward, 1}, {A::kBackward, 0}};
  EXPECT_EQ(s.actions[0], expected);
  EXPECT_EQ(s.actions[1], expected);
}

TEST(Schedule, CheckpointExceptLastRecomputesAllButTheLastMicroBatch) {
  const Schedule s = make_schedule(ScheduleKind::kGPipe, 1, 2, CheckpointMode::kExceptLast);
  const std::vector<Action> expected{
      {A::kForward, 0}, {A::kForward, 1}, {A::kBackward, 1}, {A::kRecompute, 0}, {A::kBackward, 0}};
  EXPECT_EQ(s.actions[0], expected);
}

TEST(Schedule, OneFOneBWarmsUpByRemainingStages) {
  const Schedule s = make_schedule(ScheduleKind::kOneFOneB, 3, 4, CheckpointMode::kNever);
  // Stage 0: two warm-up forwards, then F/B alternate, then drain.
  const std::vector<Action> first{{A::kForward, 0},  {A::kForward, 1}, {A::kForward, 2},
                                  {A::kBackward, 0}, {A::kForward, 3}, {A::kBackward, 1},
                                  {A::kBackward, 2}, {A::kBackward, 3}};
  EXPECT_EQ(s.actions[0], first);
  // The last stage alternates from the start.
  const std::vector<Action> last{{A::kForward, 0},  {A::kBackward, 0}, {A::kForward, 1},
                                 {A::kBackward, 1}, {A::kForward, 2},  {A::kBackward, 2},
                                 {A::kForward, 3},  {A::kBackward, 3}};
  EXPECT_EQ(s.actions[2], last);
}

// Every action of every stage once, F before R before B, and each device's order walks its
// stages' lists in their order.
void expect_complete(const Schedule& s) {
  const int chunks = s.chunks;
  std::vector<int> next(s.stages, 0);
  for (int d = 0; d < s.devices(); ++d) {
    for (const DeviceStep& step : s.device_order[d]) {
      EXPECT_EQ(s.device_of(step.stage), d) << "stage " << step.stage;
      EXPECT_EQ(step.index, next[step.stage]++) << "stage " << step.stage;
    }
  }
  for (int stage = 0; stage < s.stages; ++stage) {
    EXPECT_EQ(next[stage], static_cast<int>(s.actions[stage].size())) << "stage " << stage;
  }
  for (const auto& list : s.actions) {
    std::vector<int> forward(chunks), recompute(chunks), backward(chunks), weight(chunks);
    for (const auto& a : list) {
      if (a.kind == A::kForward) ++forward[a.micro_batch];
      if (a.kind == A::kRecompute) ++recompute[a.micro_batch];
      if (a.kind == A::kBackward) {
        EXPECT_EQ(forward[a.micro_batch], 1) << "backward before forward";
        EXPECT_EQ(recompute[a.micro_batch],
                  is_checkpointed(s.checkpoint, a.micro_batch, chunks) ? 1 : 0);
        ++backward[a.micro_batch];
      }
      if (a.kind == A::kWeight) {
        EXPECT_EQ(backward[a.micro_batch], 1) << "W before its B";
        ++weight[a.micro_batch];
      }
    }
    for (int i = 0; i < chunks; ++i) {
      EXPECT_EQ(backward[i], 1);
      EXPECT_EQ(weight[i], splits_backward(s.kind) ? 1 : 0);
    }
  }
}

// Zero-bubble H1 keeps 1F1B's peak memory: no stage holds more micro-batches between their F and
// their W than 1F1B's first stage holds between F and B (min(stages, chunks)).
TEST(Schedule, ZeroBubbleH1HoldsNoMoreMicroBatchesThanOneFOneB) {
  for (int stages = 1; stages <= 5; ++stages) {
    for (int chunks = 1; chunks <= 9; ++chunks) {
      for (auto mode : {CheckpointMode::kNever, CheckpointMode::kExceptLast}) {
        const Schedule s = make_schedule(ScheduleKind::kZeroBubbleH1, stages, chunks, mode);
        expect_complete(s);
        for (int stage = 0; stage < stages; ++stage) {
          int held = 0, peak = 0;
          for (const Action& a : s.actions[stage]) {
            held += a.kind == A::kForward ? 1 : a.kind == A::kWeight ? -1 : 0;
            peak = std::max(peak, held);
          }
          EXPECT_LE(peak, std::min(stages, chunks))
              << stages << " stages, " << chunks << " micro-batches, stage " << stage;
        }
      }
    }
  }
}

TEST(Schedule, ZeroBubbleH1DefersWeightGradientsIntoTheDrain) {
  const Schedule s = make_schedule(ScheduleKind::kZeroBubbleH1, 3, 4, CheckpointMode::kNever);
  // Stage s runs a micro-batch's W s B's after its B: the first at once, the last two later.
  const std::vector<Action> last{{A::kForward, 0},  {A::kBackward, 0}, {A::kForward, 1},
                                 {A::kBackward, 1}, {A::kForward, 2},  {A::kBackward, 2},
                                 {A::kWeight, 0},   {A::kForward, 3},  {A::kBackward, 3},
                                 {A::kWeight, 1},   {A::kWeight, 2},   {A::kWeight, 3}};
  EXPECT_EQ(s.actions[2], last);
  const std::vector<Action> first{{A::kForward, 0},  {A::kForward, 1},  {A::kForward, 2},
                                  {A::kBackward, 0}, {A::kWeight, 0},   {A::kForward, 3},
                                  {A::kBackward, 1}, {A::kWeight, 1},   {A::kBackward, 2},
                                  {A::kWeight, 2},   {A::kBackward, 3}, {A::kWeight, 3}};
  EXPECT_EQ(s.actions[0], first);
}

// Stage s with W delay d runs micro-batch k's W right after its B of k + d, the rest at the end:
// it then holds at most the 1F1B count (stages - s) plus d micro-batches between F and W.
TEST(Schedule, ZeroBubbleWeightDelaysPlaceEachWAfterTheBOfThatManyMicroBatchesLater) {
  for (int stages = 1; stages <= 4; ++stages) {
    for (int chunks = 1; chunks <= 6; ++chunks) {
      for (int delay = 0; delay <= chunks; ++delay) {
        SCOPED_TRACE(std::to_string(stages) + " stages, " + std::to_string(chunks) +
                     " micro-batches, delay " + std::to_string(delay));
        const Schedule s =
            make_schedule(ScheduleKind::kZeroBubbleH1, stages, chunks, CheckpointMode::kExceptLast,
                          1, std::vector<int>(stages, delay));
        expect_complete(s);
        EXPECT_EQ(s.weight_delays, std::vector<int>(stages, delay));
        for (int stage = 0; stage < stages; ++stage) {
          const std::vector<Action>& list = s.actions[stage];
          int held = 0, peak = 0;
          for (size_t i = 0; i < list.size(); ++i) {
            held += list[i].kind == A::kForward ? 1 : list[i].kind == A::kWeight ? -1 : 0;
            peak = std::max(peak, held);
            if (list[i].kind != A::kWeight) continue;
            const int k = list[i].micro_batch;
            if (k + delay < chunks) {
              ASSERT_GT(i, 0u);
              EXPECT_EQ(list[i - 1], (Action{A::kBackward, k + delay})) << "stage " << stage;
            } else {
              const bool in_final_run =
                  list[i - 1].kind == A::kWeight || list[i - 1] == Action{A::kBackward, chunks - 1};
              EXPECT_TRUE(in_final_run) << "stage " << stage << ": W " << k;
            }
          }
          EXPECT_LE(peak, std::min(chunks, stages - stage + delay)) << "stage " << stage;
        }
      }
    }
  }
}

// A stage whose delay is kWholeBackward runs 1F1B's order, B the whole backward, no W.
TEST(Schedule, ZeroBubbleStageWithTheWholeBackwardRunsOneFOneBsOrder) {
  const Schedule s = make_schedule(ScheduleKind::kZeroBubbleH1, 3, 5, CheckpointMode::kExceptLast,
                                   1, {kWholeBackward, 1, kWholeBackward});
  const Schedule one = make_schedule(ScheduleKind::kOneFOneB, 3, 5, CheckpointMode::kExceptLast);
  EXPECT_EQ(s.actions[0], one.actions[0]);
  EXPECT_EQ(s.actions[2], one.actions[2]);
  EXPECT_NE(s.actions[1], one.actions[1]);
  EXPECT_FALSE(s.splits(0));
  EXPECT_TRUE(s.splits(1));
  EXPECT_FALSE(one.splits(1));
}

TEST(Schedule, ZeroBubbleDefaultsToH1sDelaysAndChecksGivenOnes) {
  const Schedule h1 = make_schedule(ScheduleKind::kZeroBubbleH1, 4, 2, CheckpointMode::kNever);
  EXPECT_EQ(h1.weight_delays, (std::vector<int>{0, 1, 2, 2}));
  EXPECT_EQ(h1_weight_delays(4, 2), h1.weight_delays);
  EXPECT_TRUE(
      make_schedule(ScheduleKind::kOneFOneB, 2, 2, CheckpointMode::kNever).weight_delays.empty());
  const auto refused = [](ScheduleKind kind, std::vector<int> delays, const std::string& says) {
    try {
      make_schedule(kind, 2, 4, CheckpointMode::kNever, 1, delays);
      ADD_FAILURE() << "accepted " << says;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused(ScheduleKind::kOneFOneB, {0, 1}, "W delays go with zb-h1, not 1f1b");
  refused(ScheduleKind::kZeroBubbleH1, {0, 1, 1}, "3 W delays for 2 stages");
  refused(ScheduleKind::kZeroBubbleH1, {0, -2}, "stage 1's W delay is -2, expected 0 to 65536");
  // Longer than the micro-batches: every W after the last B.
  EXPECT_EQ(make_schedule(ScheduleKind::kZeroBubbleH1, 2, 4, CheckpointMode::kNever, 1, {9, 0})
                .weight_delays,
            (std::vector<int>{4, 0}));
}

TEST(Schedule, InterleavedRunsEveryActionOnceOnTheDeviceHoldingItsStage) {
  for (int devices = 1; devices <= 4; ++devices) {
    for (int virtual_stages = 1; virtual_stages <= 3; ++virtual_stages) {
      for (int rounds = 0; rounds <= 3; ++rounds) {  // 0: one micro-batch
        for (auto mode : {CheckpointMode::kAlways, CheckpointMode::kExceptLast}) {
          SCOPED_TRACE(std::to_string(devices) + " devices x " + std::to_string(virtual_stages) +
                       ", " + std::to_string(rounds) + " rounds");
          const Schedule s =
              make_schedule(ScheduleKind::kInterleaved, devices * virtual_stages,
                            rounds == 0 ? 1 : devices * rounds, mode, virtual_stages);
          EXPECT_EQ(s.devices(), devices);
          expect_complete(s);
        }
      }
    }
  }
}

// Megatron-LM's order for 2 devices, 2 stages each, 4 micro-batches, worked out by hand:
// device 0 warms up with 4 forwards (two per stage), device 1 with 2.
TEST(Schedule, InterleavedFollowsTheVirtualPipelineOrder) {
  const Schedule s =
      make_schedule(ScheduleKind::kInterleaved, 4, 4, CheckpointMode::kNever, /*virtual=*/2);
  const auto order = [&](int device) {
    std::string text;
    for (const DeviceStep& step : s.device_order[device]) {
      const Action& a = s.actions[step.stage][step.index];
      text += to_string(a.kind) + std::to_string(step.stage) + "." + std::to_string(a.micro_batch) +
              " ";
    }
    return text;
  };
  EXPECT_EQ(order(0),
            "F0.0 F0.1 F2.0 F2.1 F0.2 B2.0 F0.3 B2.1 F2.2 B0.0 F2.3 B0.1 B2.2 B2.3 B0.2 B0.3 ");
  EXPECT_EQ(order(1),
            "F1.0 F1.1 F3.0 B3.0 F3.1 B3.1 F1.2 B1.0 F1.3 B1.1 F3.2 B3.2 F3.3 B3.3 B1.2 B1.3 ");
}

TEST(Schedule, InterleavedChecksItsShape) {
  const auto message = [](int stages, int chunks, int virtual_stages, ScheduleKind kind) {
    try {
      make_schedule(kind, stages, chunks, CheckpointMode::kNever, virtual_stages);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(message(4, 5, 2, ScheduleKind::kInterleaved)
                .find("micro-batches (5) to be a multiple of the devices (2)"),
            std::string::npos);
  EXPECT_NE(message(5, 4, 2, ScheduleKind::kInterleaved)
                .find("stages (5) to be a multiple of the stages per device (2)"),
            std::string::npos);
  EXPECT_NE(message(4, 4, 2, ScheduleKind::kOneFOneB).find("go with interleaved"),
            std::string::npos);
}

TEST(Schedule, EveryStageRunsEveryMicroBatchOnceEachWay) {
  for (auto kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB}) {
    for (int stages = 1; stages <= 5; ++stages) {
      for (int chunks = 1; chunks <= 6; ++chunks) {
        for (auto mode : {CheckpointMode::kAlways, CheckpointMode::kExceptLast}) {
          expect_complete(make_schedule(kind, stages, chunks, mode));
        }
      }
    }
  }
}

TEST(Schedule, ParsersNameTheValidChoices) {
  EXPECT_EQ(parse_schedule_kind("1f1b"), ScheduleKind::kOneFOneB);
  EXPECT_EQ(parse_schedule_kind("zb-h1"), ScheduleKind::kZeroBubbleH1);
  EXPECT_EQ(parse_action_kind("W"), ActionKind::kWeight);
  EXPECT_EQ(to_string(ActionKind::kWeight), "W");
  EXPECT_EQ(parse_checkpoint_mode("except_last"), CheckpointMode::kExceptLast);
  try {
    parse_schedule_kind("pipedream");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gpipe, 1f1b, interleaved, zb-h1"), std::string::npos);
  }
  EXPECT_THROW(parse_checkpoint_mode("sometimes"), std::invalid_argument);
  EXPECT_THROW(make_schedule(ScheduleKind::kGPipe, 0, 1, CheckpointMode::kNever),
               std::invalid_argument);
}

}  // namespace
}  // namespace pipebal::pipeline
