// Balances a profile.json (written by `pipebal profile`, or by any tool) into pipeline stages
// with pipebal's torch-free library, and prints the plan. No LibTorch needed:
//
//   balance_profile profile.json 4
#include <cstdlib>
#include <iostream>
#include <string>

#include "pipebal/balance/cost_model.h"
#include "pipebal/balance/micro_batch_costs.h"
#include "pipebal/balance/partition.h"
#include "pipebal/balance/profile_options.h"
#include "pipebal/balance/profile_reader.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: balance_profile PROFILE.json STAGES\n";
    return 2;
  }
  namespace balance = pipebal::balance;
  try {
    const balance::CostProfile profile = balance::read_profile(argv[1]);
    // The profile's micro-batch count, engine costs and measured link: what `pipebal balance`
    // plans with, so that this predicts what it predicts.
    balance::CostOptions options = balance::profile_cost_options(profile);
    options.schedule = pipebal::pipeline::ScheduleKind::kOneFOneB;
    const balance::CostModel model(balance::layers_for_chunks(profile, options.chunks),
                                   std::stoi(argv[2]), options);

    const balance::Plan plan = balance::partition(model, balance::Algorithm::kDp);
    std::cout << "balance";
    for (int layers : plan.balance) std::cout << ' ' << layers;
    std::cout << "\nbottleneck " << plan.bottleneck_ms << " ms per micro-batch\n";
    for (size_t s = 0; s < plan.stages.size(); ++s) {
      const balance::StagePlan& stage = plan.stages[s];
      // Layers by name where the profile names them all, else by index.
      const std::string first = stage.layer_names.empty()
                                    ? "layer " + std::to_string(stage.first_layer)
                                    : stage.layer_names.front();
      const std::string last = stage.layer_names.empty()
                                   ? "layer " + std::to_string(stage.first_layer + stage.layers - 1)
                                   : stage.layer_names.back();
      std::cout << "stage " << s << ": " << first << " .. " << last << ", " << stage.time_ms
                << " ms, " << stage.memory_bytes << " bytes\n";
    }
    std::cout.precision(9);
    std::cout << "predicted step " << plan.prediction.step_ms << " ms with " << options.chunks
              << " micro-batches, speed-up " << plan.prediction.speedup << "x\n";
  } catch (const std::exception& error) {
    std::cerr << "balance_profile: " << error.what() << "\n";
    return 2;
  }
  return 0;
}
