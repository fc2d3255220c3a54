// Shared checks for the zoo's model tests: errors that name what they should, and clones that are
// equal to their original and independent of it.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pipebal/pipeline/layer_seq.h"

namespace pipebal::models {

// Runs `f`, which must throw std::invalid_argument whose message contains every one of `parts`.
template <typename F>
void expect_invalid_argument(F f, const std::vector<std::string>& parts) {
  try {
    f();
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    for (const auto& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
    }
  }
}

// Same buffers and the same output on `input` (evaluation mode); changing every parameter of the
// copy leaves the original's parameters and output untouched. Leaves both in evaluation mode.
inline void expect_equal_deep_clone(const pipeline::LayerSeq& seq, const pipeline::LayerSeq& copy,
                                    const at::Tensor& input) {
  const auto buffers = seq.buffers();
  const auto copied_buffers = copy.buffers();
  ASSERT_EQ(copied_buffers.size(), buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    EXPECT_TRUE(torch::equal(copied_buffers[i], buffers[i]));
  }

  seq.train(false);
  copy.train(false);
  const at::Tensor original_out = seq.forward(pipeline::Batch(input)).value();
  EXPECT_TRUE(torch::equal(copy.forward(pipeline::Batch(input)).value(), original_out));

  const std::vector<at::Tensor> before = seq.parameters();
  std::vector<at::Tensor> saved;
  for (const auto& p : before) saved.push_back(p.clone());
  {
    torch::NoGradGuard no_grad;
    for (auto& p : copy.parameters()) p.add_(1.0);
  }
  for (size_t i = 0; i < saved.size(); ++i) EXPECT_TRUE(torch::equal(before[i], saved[i]));
  EXPECT_TRUE(torch::equal(seq.forward(pipeline::Batch(input)).value(), original_out));
  EXPECT_FALSE(torch::equal(copy.forward(pipeline::Batch(input)).value(), original_out));
}

}  // namespace pipebal::models
