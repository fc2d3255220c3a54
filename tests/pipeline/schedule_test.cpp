// The schedule definition shared by the engine and the simulator.
#include "pipeline/schedule.h"

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

TEST(Schedule, EveryStageRunsEveryMicroBatchOnceEachWay) {
  for (auto kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB}) {
    for (int stages = 1; stages <= 5; ++stages) {
      for (int chunks = 1; chunks <= 6; ++chunks) {
        const Schedule s = make_schedule(kind, stages, chunks, CheckpointMode::kAlways);
        for (const auto& list : s.actions) {
          std::vector<int> forward(chunks), recompute(chunks), backward(chunks);
          for (const auto& a : list) {
            if (a.kind == A::kForward) ++forward[a.micro_batch];
            if (a.kind == A::kRecompute) ++recompute[a.micro_batch];
            if (a.kind == A::kBackward) {
              EXPECT_EQ(forward[a.micro_batch], 1) << "backward before forward";
              EXPECT_EQ(recompute[a.micro_batch], 1) << "backward before recompute";
              ++backward[a.micro_batch];
            }
          }
          for (int i = 0; i < chunks; ++i) EXPECT_EQ(backward[i], 1);
        }
      }
    }
  }
}

TEST(Schedule, ParsersNameTheValidChoices) {
  EXPECT_EQ(parse_schedule_kind("1f1b"), ScheduleKind::kOneFOneB);
  EXPECT_EQ(parse_checkpoint_mode("except_last"), CheckpointMode::kExceptLast);
  try {
    parse_schedule_kind("pipedream");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gpipe, 1f1b"), std::string::npos);
  }
  EXPECT_THROW(parse_checkpoint_mode("sometimes"), std::invalid_argument);
  EXPECT_THROW(make_schedule(ScheduleKind::kGPipe, 0, 1, CheckpointMode::kNever),
               std::invalid_argument);
}

}  // namespace
}  // namespace pipebal::pipeline
