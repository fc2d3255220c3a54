// The schedule simulator against hand-computed timelines and an independent reference.
#include "pipebal/balance/simulator.h"

#include <memory>
#include <random>
#include <stdexcept>

#include <gtest/gtest.h>

#include "pipebal/balance/cost_model.h"
#include "test_support.h"

namespace pipebal::balance {
namespace {

using pipeline::ActionKind;
using pipeline::CheckpointMode;
using pipeline::ScheduleKind;

std::vector<StageDurations> uniform(int stages, double forward_ms, double backward_ms) {
  return std::vector<StageDurations>(stages, {forward_ms, forward_ms, backward_ms});
}

// Reference: start times by fixed-point relaxation over the dependency graph (device order plus
// cross-stage edges), iterated until nothing changes, instead of the simulator's event walk.
double relaxed_step_ms(const pipeline::Schedule& schedule,
                       const std::vector<StageDurations>& durations,
                       const std::vector<double>& transfer_ms) {
  const int k = schedule.stages;
  auto duration = [&](int s, ActionKind kind) {
    return kind == ActionKind::kForward     ? durations[s].forward_ms
           : kind == ActionKind::kRecompute ? durations[s].recompute_ms
           : kind == ActionKind::kWeight    ? durations[s].weight_ms
                                            : durations[s].backward_ms;
  };
  std::vector<std::vector<double>> start(k), end(k);
  for (int s = 0; s < k; ++s) {
    start[s].assign(schedule.actions[s].size(), 0.0);
    end[s].assign(schedule.actions[s].size(), 0.0);
  }
  auto find_end = [&](int s, ActionKind kind, int micro_batch) {
    for (size_t a = 0; a < schedule.actions[s].size(); ++a) {
      if (schedule.actions[s][a].kind == kind && schedule.actions[s][a].micro_batch == micro_batch)
        return end[s][a];
    }
    ADD_FAILURE() << "missing action";
    return 0.0;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& order : schedule.device_order) {
      for (size_t position = 0; position < order.size(); ++position) {
        const int s = order[position].stage;
        const size_t a = static_cast<size_t>(order[position].index);
        const pipeline::Action& action = schedule.actions[s][a];
        double t = 0.0;
        if (position > 0) t = end[order[position - 1].stage][order[position - 1].index];
        if (action.kind == ActionKind::kForward && s > 0) {
          t = std::max(
              t, find_end(s - 1, ActionKind::kForward, action.micro_batch) + transfer_ms[s - 1]);
        }
        if (action.kind == ActionKind::kBackward && s + 1 < k) {
          t = std::max(t,
                       find_end(s + 1, ActionKind::kBackward, action.micro_batch) + transfer_ms[s]);
        }
        const double e = t + duration(s, action.kind);
        if (t != start[s][a] || e != end[s][a]) changed = true;
        start[s][a] = t;
        end[s][a] = e;
      }
    }
  }
  double step = 0;
  for (int s = 0; s < k; ++s) {
    for (double e : end[s]) step = std::max(step, e);
  }
  return step;
}

TEST(Simulator, GPipeTwoStagesTwoMicroBatchesByHand) {
  const auto schedule = pipeline::make_schedule(ScheduleKind::kGPipe, 2, 2, CheckpointMode::kNever);
  // Stage 0: F0 [0,1] F1 [1,2]; stage 1: F0 [1,2] F1 [2,3] B1 [3,5] B0 [5,7];
  // stage 0: B1 [5,7] B0 [7,9].
  const SimulationResult r = simulate(schedule, uniform(2, 1, 2), {0.0}, {});
  EXPECT_DOUBLE_EQ(r.step_ms, 9);
  EXPECT_DOUBLE_EQ(r.busy_ms[0], 6);
  EXPECT_DOUBLE_EQ(r.busy_ms[1], 6);
  EXPECT_DOUBLE_EQ(r.bubble_fraction, 1.0 - 12.0 / 18.0);
  ASSERT_EQ(r.timeline[0].size(), 4u);
  EXPECT_DOUBLE_EQ(r.timeline[0][2].start_ms, 5);  // B1 on stage 0
  EXPECT_EQ(r.timeline[0][2].action.kind, ActionKind::kBackward);
  EXPECT_EQ(r.timeline[0][2].action.micro_batch, 1);
  EXPECT_DOUBLE_EQ(r.timeline[1][2].start_ms, 3);  // B1 on stage 1
  EXPECT_EQ(r.timeline[1][2].stage, 1);  // entries carry their stage, like the engine's timeline
}

TEST(Simulator, TransfersDelayBothDirections) {
  const auto schedule = pipeline::make_schedule(ScheduleKind::kGPipe, 2, 2, CheckpointMode::kNever);
  // Stage 1: F0 [1.5,2.5] F1 [2.5,3.5] B1 [3.5,5.5] B0 [5.5,7.5]; stage 0: B1 [6,8] B0 [8,10].
  EXPECT_DOUBLE_EQ(simulate(schedule, uniform(2, 1, 2), {0.5}, {}).step_ms, 10);
}

TEST(Simulator, FinishingWorkEndsTheStepButIsNotBusy) {
  const auto schedule = pipeline::make_schedule(ScheduleKind::kGPipe, 2, 2, CheckpointMode::kNever);
  // Without it: stage 1 ends at 7, stage 0 at 9 (the by-hand case above, no transfers).
  const SimulationResult plain = simulate(schedule, uniform(2, 1, 2), {0.0}, {});
  const SimulationResult r = simulate(schedule, uniform(2, 1, 2), {0.0}, {}, {1.0, 4.0});
  EXPECT_DOUBLE_EQ(r.step_ms, std::max(plain.timeline[0].back().end_ms + 1.0,
                                       plain.timeline[1].back().end_ms + 4.0));
  EXPECT_GT(r.step_ms, plain.step_ms);
  EXPECT_EQ(r.busy_ms, plain.busy_ms);
  // Step 11 (stage 1 ends at 7 + 4); idle is what neither actions nor finishing fill: stage 0
  // 11 - 6 - 1, stage 1 11 - 6 - 4.
  EXPECT_DOUBLE_EQ(r.bubble_fraction, (4.0 + 1.0) / 22.0);
  EXPECT_THROW(simulate(schedule, uniform(2, 1, 2), {0.0}, {}, {1.0}), std::invalid_argument);

  // One stage with one micro-batch has no bubble, however long its finishing work.
  const auto alone = pipeline::make_schedule(ScheduleKind::kGPipe, 1, 1, CheckpointMode::kNever);
  const SimulationResult one = simulate(alone, uniform(1, 1, 2), {}, {}, {5.0});
  EXPECT_DOUBLE_EQ(one.step_ms, 8);
  EXPECT_DOUBLE_EQ(one.bubble_fraction, 0);
}

// Interleaved, a device runs several stages, and the engine averages all their gradients after
// its last action, one stage's after another: the device's step is its last action's end plus
// the sum of its stages' finishing work, not the longest stage end plus its own.
TEST(Simulator, ADevicesStagesFinishOneAfterAnotherAfterItsLastAction) {
  const auto schedule = pipeline::make_schedule(ScheduleKind::kInterleaved, 4, 4,
                                                CheckpointMode::kNever, /*virtual_stages=*/2);
  ASSERT_EQ(schedule.devices(), 2);
  const SimulationResult plain = simulate(schedule, uniform(4, 1, 2), {0.0, 0.0, 0.0}, {});
  const SimulationResult r =
      simulate(schedule, uniform(4, 1, 2), {0.0, 0.0, 0.0}, {}, {1.0, 2.0, 3.0, 4.0});
  double expected = 0;
  for (int d = 0; d < 2; ++d) {
    // Device d runs stages d and d + 2.
    const double end =
        std::max(plain.timeline[d].back().end_ms, plain.timeline[d + 2].back().end_ms);
    const double finishing = (1.0 + d) + (3.0 + d);
    expected = std::max(expected, end + finishing);
  }
  EXPECT_DOUBLE_EQ(r.step_ms, expected);
  EXPECT_EQ(r.busy_ms, plain.busy_ms);
}

TEST(Simulator, RecomputeRunsRightBeforeItsBackward) {
  const auto schedule =
      pipeline::make_schedule(ScheduleKind::kGPipe, 2, 2, CheckpointMode::kExceptLast);
  // Stage 1: F0 [1,2] F1 [2,3] B1 [3,5] R0 [5,6] B0 [6,8];
  // stage 0: F0 [0,1] F1 [1,2] B1 [5,7] R0 [7,8] B0 [8,10].
  const SimulationResult r = simulate(schedule, uniform(2, 1, 2), {0.0}, {});
  EXPECT_DOUBLE_EQ(r.step_ms, 10);
  EXPECT_DOUBLE_EQ(r.busy_ms[0], 7);
}

TEST(Simulator, OneFOneBTwoStagesByHand) {
  const auto schedule =
      pipeline::make_schedule(ScheduleKind::kOneFOneB, 2, 2, CheckpointMode::kNever);
  // Stage 1: F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7]; stage 0: F0 [0,1] F1 [1,2] B0 [4,6] B1 [7,9].
  const SimulationResult r = simulate(schedule, uniform(2, 1, 2), {0.0}, {});
  EXPECT_DOUBLE_EQ(r.step_ms, 9);
  EXPECT_DOUBLE_EQ(r.timeline[0][3].start_ms, 7);
}

TEST(Simulator, GPipeWithEqualStagesTakesMPlusNMinusOneSlotsEachWay) {
  for (int k = 1; k <= 6; ++k) {
    for (int m = 1; m <= 8; ++m) {
      const auto schedule =
          pipeline::make_schedule(ScheduleKind::kGPipe, k, m, CheckpointMode::kNever);
      const double f = 1.25;
      const double b = 2.5;
      const SimulationResult r =
          simulate(schedule, uniform(k, f, b), std::vector<double>(k - 1, 0.0), {});
      EXPECT_DOUBLE_EQ(r.step_ms, (m + k - 1) * f + (m + k - 1) * b) << "k=" << k << " m=" << m;
    }
  }
}

TEST(Simulator, MatchesRelaxationReferenceOnRandomSchedules) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> ms(0.0, 5.0);
  const CheckpointMode modes[] = {CheckpointMode::kAlways, CheckpointMode::kExceptLast,
                                  CheckpointMode::kNever};
  for (int t = 0; t < 600; ++t) {
    int k = 1 + static_cast<int>(rng() % 6);
    int m = 1 + static_cast<int>(rng() % 8);
    const auto kind = static_cast<ScheduleKind>(rng() % 4);
    int virtual_stages = 1;
    if (kind == ScheduleKind::kInterleaved) {  // devices x stages each, rounds of micro-batches
      const int devices = 1 + static_cast<int>(rng() % 4);
      virtual_stages = 1 + static_cast<int>(rng() % 3);
      k = devices * virtual_stages;
      m = devices * (1 + static_cast<int>(rng() % 3));
    }
    const auto schedule = pipeline::make_schedule(kind, k, m, modes[rng() % 3], virtual_stages);
    std::vector<StageDurations> durations(k);
    for (auto& d : durations) {
      d.forward_ms = ms(rng);
      d.recompute_ms = ms(rng);
      d.backward_ms = ms(rng);
      d.weight_ms = ms(rng);
    }
    std::vector<double> transfer_ms(k - 1);
    for (double& x : transfer_ms) x = rng() % 3 ? ms(rng) : 0.0;
    const SimulationResult r = simulate(schedule, durations, transfer_ms, {});
    EXPECT_DOUBLE_EQ(r.step_ms, relaxed_step_ms(schedule, durations, transfer_ms)) << t;
    for (int d = 0; d < schedule.devices(); ++d) {  // a device runs one action at a time
      const auto& order = schedule.device_order[d];
      for (size_t a = 1; a < order.size(); ++a) {
        const auto& before = r.timeline[order[a - 1].stage];
        const auto& now = r.timeline[order[a].stage];
        EXPECT_GE(now[order[a].index].start_ms, before[order[a - 1].index].end_ms);
      }
    }
    for (int s = 0; s < k; ++s) {
      // No action overlaps the previous one on its stage, and busy time adds up.
      double busy = 0;
      for (size_t a = 0; a < r.timeline[s].size(); ++a) {
        if (a > 0) {
          EXPECT_GE(r.timeline[s][a].start_ms, r.timeline[s][a - 1].end_ms);
        }
        busy += r.timeline[s][a].end_ms - r.timeline[s][a].start_ms;
      }
      EXPECT_NEAR(busy, r.busy_ms[s], 1e-9);
    }
  }
}

// With equal stages and free transfers, 1F1B takes (m + p - 1) slots of F + B per device; the
// interleaved schedule cuts each device's work into V stages and its bubble V-fold (Narayanan
// et al.): m V + p - 1 slots of a stage's F + B.
TEST(Simulator, InterleavingShrinksTheBubbleByTheStagesPerDevice) {
  for (int devices = 2; devices <= 4; ++devices) {
    for (int virtual_stages = 2; virtual_stages <= 3; ++virtual_stages) {
      for (int rounds = 1; rounds <= 3; ++rounds) {
        const int m = devices * rounds;
        const double f = 1.0, b = 2.0;  // per stage of the interleaved model
        const auto interleaved =
            pipeline::make_schedule(ScheduleKind::kInterleaved, devices * virtual_stages, m,
                                    CheckpointMode::kNever, virtual_stages);
        const SimulationResult r =
            simulate(interleaved, uniform(devices * virtual_stages, f, b),
                     std::vector<double>(devices * virtual_stages - 1, 0.0), {});
        EXPECT_DOUBLE_EQ(r.step_ms, (m * virtual_stages + devices - 1) * (f + b))
            << devices << " devices x " << virtual_stages << ", " << m << " micro-batches";
        const auto plain =
            pipeline::make_schedule(ScheduleKind::kOneFOneB, devices, m, CheckpointMode::kNever);
        const SimulationResult one =
            simulate(plain, uniform(devices, f * virtual_stages, b * virtual_stages),
                     std::vector<double>(devices - 1, 0.0), {});
        EXPECT_DOUBLE_EQ(one.step_ms, (m + devices - 1) * virtual_stages * (f + b));
      }
    }
  }
}

// Zero-bubble H1 with F, B and W of one unit each and free transfers: the W's fill all but
// p - 1 units of 1F1B's 3 (p - 1) units of bubble (Qi et al., ICLR 2024: (p - 1)(F + B - W)),
// so the step is 3 m + p - 1 units against 1F1B's 3 (m + p - 1).
TEST(Simulator, ZeroBubbleH1LeavesAThirdOfOneFOneBsBubble) {
  for (int p = 2; p <= 5; ++p) {
    for (int m = p; m <= 3 * p; m += p) {
      const auto zb =
          pipeline::make_schedule(ScheduleKind::kZeroBubbleH1, p, m, CheckpointMode::kNever);
      std::vector<StageDurations> split(p, {1.0, 1.0, 1.0, 1.0});
      const SimulationResult r = simulate(zb, split, std::vector<double>(p - 1, 0.0), {});
      EXPECT_DOUBLE_EQ(r.step_ms, 3 * m + p - 1) << p << " stages, " << m << " micro-batches";
      const auto one =
          pipeline::make_schedule(ScheduleKind::kOneFOneB, p, m, CheckpointMode::kNever);
      EXPECT_DOUBLE_EQ(
          simulate(one, uniform(p, 1.0, 2.0), std::vector<double>(p - 1, 0.0), {}).step_ms,
          3 * (m + p - 1));
    }
  }
}

// A random model cut into random stages, costed for simulate().
struct RandomCase {
  std::unique_ptr<CostModel> model;
  std::vector<int> cuts;
  std::vector<StageDurations> durations;
  std::vector<StageMemory> memory;
  std::vector<double> transfer_ms;
};

RandomCase random_case(std::mt19937& rng) {
  const int n = 1 + static_cast<int>(rng() % 20);
  const int k = 1 + static_cast<int>(rng() % std::min(6, n));
  RandomCase c;
  c.model = std::make_unique<CostModel>(testing::random_layers(rng, n, false), k,
                                        testing::random_options(rng, k, false, false));
  c.cuts = testing::random_cuts(rng, n, k);
  for (int s = 0; s < k; ++s) {
    c.durations.push_back(c.model->durations(s, c.cuts[s], c.cuts[s + 1]));
    c.memory.push_back(c.model->memory_terms(s, c.cuts[s], c.cuts[s + 1]));
    if (s + 1 < k) c.transfer_ms.push_back(c.model->transfer_ms(c.cuts[s + 1]));
  }
  return c;
}

TEST(Simulator, PeakMemoryEqualsTheCostModel) {
  std::mt19937 rng(12);
  for (int t = 0; t < 500; ++t) {
    const RandomCase c = random_case(rng);
    const CostModel& model = *c.model;
    const SimulationResult r = simulate(model.schedule(), c.durations, c.transfer_ms, c.memory);
    for (int s = 0; s < model.stage_count(); ++s) {
      EXPECT_EQ(r.peak_bytes[s], model.memory_bytes(s, c.cuts[s], c.cuts[s + 1])) << t << " " << s;
      // The stage time is the busy time per micro-batch.
      EXPECT_NEAR(r.busy_ms[s] / model.options().chunks, model.time_ms(s, c.cuts[s], c.cuts[s + 1]),
                  1e-9);
    }
  }
}

// Stage 0 forwards fast and back-propagates slowly, stage 1 the other way round: stage 0's
// outputs wait for stage 1 to take them, stage 1's gradients for stage 0.
TEST(Simulator, TimedPeakCountsTheMessagesWaitingForTheirReceiver) {
  const auto schedule =
      pipeline::make_schedule(ScheduleKind::kGPipe, 2, 3, CheckpointMode::kAlways);
  const std::vector<StageDurations> durations = {{1, 1, 12}, {3, 3, 3}};
  StageMemory first;
  first.fixed_bytes = 1000;
  first.input_bytes = 10;
  first.activation_bytes = 1;
  first.output_bytes = 7;
  StageMemory last;
  last.fixed_bytes = 2000;
  last.input_grad_bytes = 5;
  // Stage 0: F0 [0,1] F1 [1,2] F2 [2,3] R2 [3,4]; stage 1: F0 [1,4] F1 [4,7] F2 [7,10] R2 [10,13]
  // B2 [13,16] R1 [16,19] B1 [19,22] R0 [22,25] B0 [25,28]; stage 0: B2 [16,28] R1 [28,29]
  // B1 [29,41] R0 [41,42] B0 [42,54].
  // Stage 0's F1 output waits [2,4), F2's [3,7): at F2's end 3 inputs held, 2 outputs waiting
  // (its own peak is R2's end: 3 inputs and one micro-batch's activations).
  // Stage 1's B1 gradient waits [22,29), B0's [28,42): both at B0's end.
  const SimulationResult r = simulate(schedule, durations, {0.0}, {first, last});
  EXPECT_DOUBLE_EQ(r.step_ms, 54);
  EXPECT_EQ(r.peak_bytes[0], 1000 + 3 * 10 + 1);
  EXPECT_EQ(r.timed_peak_bytes[0], 1000 + 3 * 10 + 2 * 7);
  EXPECT_EQ(r.peak_bytes[1], 2000);
  EXPECT_EQ(r.timed_peak_bytes[1], 2000 + 2 * 5);

  // Without checkpointing stage 0 keeps each output to back-propagate from until its B: among
  // the activations it holds already, so waiting adds nothing.
  const SimulationResult kept =
      simulate(pipeline::make_schedule(ScheduleKind::kGPipe, 2, 3, CheckpointMode::kNever),
               durations, {0.0}, {first, last});
  EXPECT_EQ(kept.timed_peak_bytes[0], kept.peak_bytes[0]);
  EXPECT_EQ(kept.timed_peak_bytes[1], 2000 + 2 * 5);
}

TEST(Simulator, AMessageTakenAsItIsSentNeverWaitsButOneInFlightDoes) {
  const auto schedule = pipeline::make_schedule(ScheduleKind::kGPipe, 2, 4, CheckpointMode::kNever);
  StageMemory first;
  first.input_bytes = 10;
  first.activation_bytes = 100;
  StageMemory last;  // holds nothing but the gradients it sends
  last.input_grad_bytes = 5;
  // Equal stages: stage 0 waits for each gradient when it comes.
  const SimulationResult at_once = simulate(schedule, uniform(2, 1, 2), {0.0}, {first, last});
  EXPECT_EQ(at_once.timed_peak_bytes, at_once.peak_bytes);
  // A transfer of a quarter of a backward: at the end of each B of stage 1 its gradient is on
  // the way, the one before has arrived.
  const SimulationResult in_flight = simulate(schedule, uniform(2, 1, 2), {0.5}, {first, last});
  EXPECT_EQ(in_flight.peak_bytes[1], 0);
  EXPECT_EQ(in_flight.timed_peak_bytes[1], 5);
}

TEST(Simulator, TimedPeakIsTheTimingFreeOneAndAtMostEveryMessageMore) {
  std::mt19937 rng(21);
  int waited = 0;  // stages whose peak some waiting message raised
  for (int t = 0; t < 300; ++t) {
    const RandomCase c = random_case(rng);
    std::vector<StageMemory> silent = c.memory;  // the same without messages
    for (StageMemory& m : silent) m.output_bytes = m.input_grad_bytes = 0;
    const pipeline::Schedule& schedule = c.model->schedule();
    const SimulationResult r = simulate(schedule, c.durations, c.transfer_ms, c.memory);
    const SimulationResult quiet = simulate(schedule, c.durations, c.transfer_ms, silent);
    const int64_t chunks = schedule.chunks;
    for (int s = 0; s < schedule.stages; ++s) {
      waited += r.timed_peak_bytes[s] > r.peak_bytes[s];
      EXPECT_EQ(quiet.timed_peak_bytes[s], quiet.peak_bytes[s]) << t << " " << s;
      EXPECT_GE(r.timed_peak_bytes[s], r.peak_bytes[s]) << t << " " << s;
      EXPECT_LE(r.timed_peak_bytes[s], r.peak_bytes[s] + chunks * (c.memory[s].output_bytes +
                                                                   c.memory[s].input_grad_bytes))
          << t << " " << s;
    }
  }
  EXPECT_GT(waited, 20);
}

TEST(Simulator, ReportsADeadlockInsteadOfHanging) {
  pipeline::Schedule schedule =
      pipeline::make_schedule(ScheduleKind::kGPipe, 2, 1, CheckpointMode::kNever);
  std::swap(schedule.actions[0][0], schedule.actions[0][1]);  // B0 before F0 on stage 0
  try {
    simulate(schedule, uniform(2, 1, 1), {0.0}, {});
    FAIL() << "expected std::logic_error";
  } catch (const std::logic_error& error) {
    EXPECT_NE(std::string(error.what()).find("deadlocks at stage 0, action B0"), std::string::npos)
        << error.what();
  }
}

TEST(Simulator, RejectsMismatchedSizes) {
  const auto schedule = pipeline::make_schedule(ScheduleKind::kGPipe, 3, 2, CheckpointMode::kNever);
  EXPECT_THROW(simulate(schedule, uniform(2, 1, 1), {0.0, 0.0}, {}), std::invalid_argument);
  EXPECT_THROW(simulate(schedule, uniform(3, 1, 1), {0.0}, {}), std::invalid_argument);
  EXPECT_THROW(simulate(schedule, uniform(3, 1, 1), {0.0, 0.0}, std::vector<StageMemory>(2)),
               std::invalid_argument);
}

}  // namespace
}  // namespace pipebal::balance
