// What the processes of a run compare: the digest of tensors changes with any byte, the dtype or
// the shape, and not with the layout in memory; the shared settings tell apart models built from
// other seeds (a TorchScript file at another path is compared by its weights) and other data,
// and leave out what may differ between hosts.
#include "pipebal/workflow/shared_settings.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <optional>
#include <string>

#include "pipebal/distributed/settings_agreement.h"

namespace pipebal::workflow {
namespace {

TEST(ContentDigest, ChangesWithAnyByteTheDtypeOrTheShapeButNotTheLayout) {
  torch::manual_seed(0);
  const at::Tensor a = torch::randn({4, 5}, torch::kDouble);
  const at::Tensor b = torch::randn({3}, torch::kFloat);
  const uint64_t digest = content_digest({a, b});
  EXPECT_EQ(content_digest({a.clone(), b.clone()}), digest);
  // The same values through a transposed view: the layout is not the content.
  EXPECT_EQ(content_digest({a.t().contiguous().t(), b}), digest);
  at::Tensor one_bit = a.clone();
  one_bit.view(torch::kLong)[2][3].bitwise_xor_(1);  // the lowest bit of one element
  EXPECT_NE(content_digest({one_bit, b}), digest);
  EXPECT_NE(content_digest({a.reshape({5, 4}), b}), digest);
  EXPECT_NE(content_digest({a.view(torch::kLong), b}), digest);
  EXPECT_NE(content_digest({b, a}), digest);
  EXPECT_NE(content_digest({a}), digest);
  // A last word of fewer than 8 bytes counts too.
  const at::Tensor bytes = torch::arange(11, torch::kByte);
  at::Tensor last = bytes.clone();
  last[10] = 99;
  EXPECT_NE(content_digest({last}), content_digest({bytes}));
}

// Rank 1's settings against rank 0's.
std::optional<std::string> difference(const distributed::SharedSettings& rank0,
                                      const distributed::SharedSettings& rank1) {
  return distributed::settings_difference({rank0, rank1});
}

TEST(SharedSettings, NameTheSettingThatDiffers) {
  TrainSettings settings;
  settings.model = "mlp:layers=3,width=8";
  settings.balance = {2, 2};
  const models::Model model = models::build_model(settings.model, 0);
  const distributed::SharedSettings mine = shared_settings(settings, model, nullptr);
  EXPECT_EQ(difference(mine, shared_settings(settings, model, nullptr)), std::nullopt);

  // The same model written otherwise, and what may differ between hosts: no difference.
  TrainSettings host = settings;
  host.model = "mlp:width=8,layers=3";
  host.devices = {"cuda"};
  host.threads_per_stage = 2;
  host.step_timeout_s = 30;
  EXPECT_EQ(difference(mine, shared_settings(host, model, nullptr)), std::nullopt);

  TrainSettings chunks = settings;
  chunks.chunks = 8;
  EXPECT_EQ(difference(mine, shared_settings(chunks, model, nullptr)),
            "rank 1's --chunks is 8, rank 0's is 4: every process of a run must be given the "
            "same settings");
  // A shape given one way on rank 0 and as a typed input on rank 1: named as such.
  TrainSettings shaped = settings;
  shaped.input_shape = {4, 8};
  TrainSettings typed = settings;
  typed.inputs = {"float32[4,8]"};
  EXPECT_EQ(
      difference(shared_settings(shaped, model, nullptr), shared_settings(typed, model, nullptr)),
      "rank 1's --input-shape is none (--input), rank 0's is 4,8: every process of a run "
      "must be given the same settings");
  // Other weights under the same flags (a TorchScript file of the same name, trained further).
  const models::Model reseeded = models::build_model(settings.model, 1);
  EXPECT_EQ(difference(mine, shared_settings(settings, reseeded, nullptr)),
            "rank 1's model weights differ from rank 0's: every process of a run must be given "
            "the same settings");

  models::Dataset data;
  data.inputs = {torch::ones({6, 8})};
  data.targets = torch::zeros({6}, torch::kLong);
  models::Dataset other = data;
  other.targets = torch::ones({6}, torch::kLong);
  EXPECT_EQ(
      difference(shared_settings(settings, model, &data), shared_settings(settings, model, &data)),
      std::nullopt);
  EXPECT_EQ(
      difference(shared_settings(settings, model, &data), shared_settings(settings, model, &other)),
      "rank 1's training data differ from rank 0's: every process of a run must be given "
      "the same settings");
}

}  // namespace
}  // namespace pipebal::workflow
