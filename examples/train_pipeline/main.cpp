// A user's own torch::nn model, written in C++, trained pipelined with pipebal: profile it on a
// sample, let the exact balancer cut it into stages, then train it with the micro-batch
// pipeline engine — an optimizer, a real loss, a few epochs on data made here — and check that
// it learns.
//
//   train_pipeline [STAGES] [EPOCHS]
#include <iostream>
#include <string>

#include <torch/torch.h>

#include "pipebal/balance/cost_model.h"
#include "pipebal/balance/micro_batch_costs.h"
#include "pipebal/balance/partition.h"
#include "pipebal/balance/profile_options.h"
#include "pipebal/pipeline/module_layer.h"
#include "pipebal/pipeline/pipeline.h"
#include "pipebal/profiler/profile_json.h"
#include "pipebal/profiler/profiler.h"
#include "pipebal/workflow/denormals.h"
#include "pipebal/workflow/malloc_tuning.h"

namespace {

namespace nn = torch::nn;
using pipebal::pipeline::Batch;

// The model: an MLP classifier. Each make_layer is one unit the balancer may cut between.
pipebal::pipeline::LayerSeq make_model(int64_t features, int64_t hidden, int64_t classes) {
  pipebal::pipeline::LayerSeq model("mlp-classifier");
  model.add(pipebal::pipeline::make_layer("fc1", "Linear", nn::Linear(features, hidden)));
  model.add(pipebal::pipeline::make_layer("relu1", "ReLU", nn::ReLU()));
  model.add(pipebal::pipeline::make_layer("fc2", "Linear", nn::Linear(hidden, hidden)));
  model.add(pipebal::pipeline::make_layer("relu2", "ReLU", nn::ReLU()));
  model.add(pipebal::pipeline::make_layer("fc3", "Linear", nn::Linear(hidden, hidden)));
  model.add(pipebal::pipeline::make_layer("relu3", "ReLU", nn::ReLU()));
  model.add(pipebal::pipeline::make_layer("head", "Linear", nn::Linear(hidden, classes)));
  return model;
}

// A learnable task: the class is the index of the largest of the first `classes` features.
std::pair<at::Tensor, at::Tensor> make_data(int64_t samples, int64_t features, int64_t classes) {
  const at::Tensor x = torch::randn({samples, features});
  const at::Tensor y = x.narrow(1, 0, classes).argmax(1);
  return {x, y};
}

double accuracy(pipebal::pipeline::Pipeline& pipeline, const at::Tensor& x, const at::Tensor& y) {
  const at::Tensor predicted = pipeline.forward(Batch(x)).value().argmax(1);
  return predicted.eq(y).to(torch::kDouble).mean().item<double>();
}

}  // namespace

int main(int argc, char** argv) {
  const int stages = argc > 1 ? std::stoi(argv[1]) : 2;
  const int epochs = argc > 2 ? std::stoi(argv[2]) : 8;
  const int64_t features = 16, hidden = 64, classes = 4, batch = 64, chunks = 4;
  // Before any tensor: each step reuses the memory the last one freed (workflow/malloc_tuning.h).
  pipebal::workflow::keep_freed_memory_in_process();
  // Before any thread starts: a layer's time must not depend on how small its numbers are.
  pipebal::workflow::flush_denormals_unless_kept();
  torch::manual_seed(0);
  pipebal::pipeline::LayerSeq model = make_model(features, hidden, classes);
  const auto [train_x, train_y] = make_data(1024, features, classes);
  const auto [test_x, test_y] = make_data(512, features, classes);

  // 1. Profile one micro-batch (the model itself is not touched: the profiler works on a copy).
  pipebal::profiler::ProfileOptions profile_options;
  profile_options.repeat = 5;
  const pipebal::profiler::Profile profile = pipebal::profiler::profile_model(
      model, Batch(train_x.narrow(0, 0, batch / chunks)), profile_options);

  // 2. Balance: the exact optimum for this profile, stage count and schedule.
  namespace balance = pipebal::balance;
  // The engine costs the profile measured too, as `pipebal balance` plans with them.
  const balance::CostProfile costs = pipebal::profiler::cost_profile(profile);
  balance::CostOptions cost_options = balance::profile_cost_options(costs, chunks);
  cost_options.schedule = pipebal::pipeline::ScheduleKind::kOneFOneB;
  const balance::CostModel cost_model(balance::layers_for_chunks(costs, cost_options.chunks),
                                      stages, cost_options);
  const balance::Plan plan = balance::partition(cost_model, balance::Algorithm::kDp);
  std::cout << "balance";
  for (int layers : plan.balance) std::cout << ' ' << layers;
  std::cout << ", predicted step " << plan.prediction.step_ms << " ms\n";

  // 3. Train with the pipeline engine: same gradients as the plain model, stages overlapping.
  pipebal::pipeline::PipelineOptions options;
  options.chunks = chunks;
  options.schedule = pipebal::pipeline::ScheduleKind::kOneFOneB;
  pipebal::pipeline::Pipeline pipeline(model, plan.balance, {}, options);
  torch::optim::Adam optimizer(model.parameters(), torch::optim::AdamOptions(1e-2));
  const auto cross_entropy = [](const at::Tensor& out, const at::Tensor& target) {
    return torch::cross_entropy_loss(out, target);
  };
  const double before = accuracy(pipeline, test_x, test_y);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    double loss = 0;
    int steps = 0;
    for (int64_t first = 0; first + batch <= train_x.size(0); first += batch, ++steps) {
      optimizer.zero_grad();
      loss += pipeline
                  .step(Batch(train_x.narrow(0, first, batch)), train_y.narrow(0, first, batch),
                        cross_entropy)
                  .loss;
      optimizer.step();
    }
    std::cout << "epoch " << epoch + 1 << ": loss " << loss / steps << "\n";
  }
  const double after = accuracy(pipeline, test_x, test_y);
  std::cout << "test accuracy " << before << " -> " << after << " (chance " << 1.0 / classes
            << ")\n";
  return after > 2.0 / classes ? 0 : 1;  // learned: well above chance
}
