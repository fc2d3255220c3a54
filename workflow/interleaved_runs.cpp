// See interleaved_runs.h.
#include "pipebal/workflow/interleaved_runs.h"

#include <algorithm>
#include <memory>

namespace pipebal::workflow {

// A balanced Latin square (Williams): the first row 0, 1, n-1, 2, n-2, ...; row r adds r to it;
// with an odd count the rows come again reversed, as each pair would otherwise meet in one order.
std::vector<size_t> turn_order(int round, size_t runs) {
  std::vector<size_t> order(runs);
  if (runs == 0) return order;
  const size_t period = runs % 2 == 0 ? runs : 2 * runs;
  const size_t row = static_cast<size_t>(round) % period;
  for (size_t i = 0; i < runs; ++i) {
    const size_t first_row = i % 2 == 1 ? (i + 1) / 2 : (runs - i / 2) % runs;
    order[i] = (first_row + row) % runs;
  }
  if (row >= runs) std::reverse(order.begin(), order.end());
  return order;
}

std::vector<reports::RunRecord> run_interleaved(const std::vector<TrainSettings>& settings,
                                                const AfterRound& after_round) {
  std::vector<std::unique_ptr<TrainingRun>> runs;
  int tag_base = 0;
  for (TrainSettings s : settings) {
    s.rehearse = true;
    runs.push_back(std::make_unique<TrainingRun>(s, tag_base));
    tag_base += static_cast<int>(s.balance.size());
  }
  std::vector<TrainingRun*> alive;
  for (auto& run : runs) alive.push_back(run.get());
  // Warm-up (and memory counting) one run after the other, then measured steps in turns.
  for (auto& run : runs) {
    while (run->warming_up()) run->step();
  }
  for (int round = 0;; ++round) {
    bool stepped = false;
    for (const size_t k : turn_order(round, runs.size())) {
      if (runs[k]->done()) continue;
      runs[k]->step();
      stepped = true;
    }
    if (!stepped) break;
    if (after_round) after_round(round, alive);
  }
  std::vector<reports::RunRecord> records;
  for (auto& run : runs) records.push_back(run->finish());
  // Last made, first gone: the first run restores the thread count it found.
  while (!runs.empty()) runs.pop_back();
  return records;
}

}  // namespace pipebal::workflow
