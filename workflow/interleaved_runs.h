// Several training runs measured side by side: one measured step of each in turn, in an order
// that changes every round, so that neither a slow spell of a shared machine nor a neighbour's
// lingering cost falls on one run more than on the others.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "pipebal/reports/run_record.h"
#include "pipebal/workflow/training_run.h"

namespace pipebal::workflow {

// The order in which round `round` (from 0) steps `runs` runs: all of them, balanced so that over
// `runs` rounds (2 * `runs` when odd) each run goes first equally often, right after the work
// between rounds, and follows each other run equally often. A run measured always right after
// the same neighbour (one whose thread pools linger, or the profile between rounds) would carry
// that neighbour's cost in every step.
std::vector<size_t> turn_order(int round, size_t runs);

// Called after each round of measured steps with the round's index from 0 and the runs, in the
// order of their settings, alive between two of their steps.
using AfterRound = std::function<void(int round, const std::vector<TrainingRun*>& runs)>;

// Several runs alive side by side, trained in turns after their warm-up: one measured step of
// each, then the next, so that a slow spell of a shared machine falls on all of them alike and
// ratios of their step times stay fair (validate's pipelined and one-micro-batch runs). Each
// rehearses its measured steps (TrainSettings::rehearse): the other runs' turns in between
// would otherwise leave its caches cold, which slows the configurations with the most threads
// and the smallest steps the most. `after_round` (when set) runs after each round of measured
// steps: work to be measured in turns with the runs. The rounds vary the order (turn_order), so
// that no run always follows the same one, or the work between rounds.
std::vector<reports::RunRecord> run_interleaved(const std::vector<TrainSettings>& settings,
                                                const AfterRound& after_round = {});

}  // namespace pipebal::workflow
