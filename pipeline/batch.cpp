// See batch.h.
#include "pipebal/pipeline/batch.h"

#include <stdexcept>

#include <ATen/ATen.h>
#include <fmt/format.h>

namespace pipebal::pipeline {

const at::Tensor& Batch::value() const {
  if (tensors.empty()) throw std::invalid_argument("batch has no tensors");
  return tensors.front();
}

at::Tensor& Batch::value() {
  if (tensors.empty()) throw std::invalid_argument("batch has no tensors");
  return tensors.front();
}

int64_t Batch::size() const {
  const at::Tensor& main = value();
  if (main.dim() == 0) throw std::invalid_argument("batch tensor is a scalar: it has no dim 0");
  return main.size(0);
}

Batch Batch::to(const c10::Device& device) const {
  Batch moved;
  moved.tensors.reserve(tensors.size());
  for (const auto& t : tensors) moved.tensors.push_back(t.to(device));
  for (const auto& [name, t] : skips) moved.skips.emplace(name, t.to(device));
  return moved;
}

std::vector<int64_t> micro_batch_sizes(int64_t samples, int chunks) {
  if (chunks < 1)
    throw std::invalid_argument(fmt::format("chunks must be at least 1, got {}", chunks));
  if (chunks > samples) {
    throw std::invalid_argument(
        fmt::format("cannot split {} samples into {} micro-batches: more chunks than samples",
                    samples, chunks));
  }
  std::vector<int64_t> sizes(chunks, samples / chunks);
  for (int64_t i = 0; i < samples % chunks; ++i) ++sizes[i];
  return sizes;
}

namespace {

void check_dim0(const at::Tensor& t, int64_t samples, const std::string& what) {
  if (t.dim() == 0 || t.size(0) != samples) {
    throw std::invalid_argument(fmt::format("{} has {} samples in dim 0, expected {}", what,
                                            t.dim() == 0 ? 0 : t.size(0), samples));
  }
}

}  // namespace

std::vector<Batch> scatter(const Batch& batch, int chunks) {
  const int64_t samples = batch.size();
  for (size_t i = 0; i < batch.tensors.size(); ++i) {
    check_dim0(batch.tensors[i], samples, fmt::format("batch tensor {}", i));
  }
  for (const auto& [name, t] : batch.skips) check_dim0(t, samples, "skip tensor '" + name + "'");

  const std::vector<int64_t> sizes = micro_batch_sizes(samples, chunks);
  std::vector<Batch> parts(chunks);
  int64_t offset = 0;
  for (int c = 0; c < chunks; ++c) {
    for (const auto& t : batch.tensors) parts[c].tensors.push_back(t.narrow(0, offset, sizes[c]));
    for (const auto& [name, t] : batch.skips)
      parts[c].skips.emplace(name, t.narrow(0, offset, sizes[c]));
    offset += sizes[c];
  }
  return parts;
}

Batch gather(const std::vector<Batch>& parts) {
  if (parts.empty()) throw std::invalid_argument("gather: no micro-batches");
  const Batch& first = parts.front();
  Batch whole;
  for (size_t i = 0; i < first.tensors.size(); ++i) {
    std::vector<at::Tensor> pieces;
    for (const auto& part : parts) {
      if (part.tensors.size() != first.tensors.size()) {
        throw std::invalid_argument("gather: micro-batches carry different numbers of tensors");
      }
      pieces.push_back(part.tensors[i]);
    }
    whole.tensors.push_back(at::cat(pieces, 0));
  }
  for (const auto& [name, unused] : first.skips) {
    std::vector<at::Tensor> pieces;
    for (const auto& part : parts) {
      const auto it = part.skips.find(name);
      if (it == part.skips.end() || part.skips.size() != first.skips.size()) {
        throw std::invalid_argument("gather: micro-batches carry different skip tensors");
      }
      pieces.push_back(it->second);
    }
    whole.skips.emplace(name, at::cat(pieces, 0));
  }
  return whole;
}

}  // namespace pipebal::pipeline
