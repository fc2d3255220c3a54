// See script_dropout.h.
#include "pipebal/pipeline/script_dropout.h"

#include <functional>
#include <map>
#include <set>

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/library.h>

#include "pipebal/pipeline/dropout.h"

namespace pipebal::pipeline {
namespace {

namespace jit = torch::jit;

at::Tensor pipebal_dropout(const at::Tensor& input, double p, bool train) {
  return stage_dropout(input, p, train, /*feature=*/false);
}

at::Tensor pipebal_feature_dropout(const at::Tensor& input, double p, bool train) {
  return stage_dropout(input, p, train, /*feature=*/true);
}

// Composite operators: autograd differentiates the ATen operations they call.
TORCH_LIBRARY(pipebal, m) {
  m.def("dropout(Tensor input, float p, bool train) -> Tensor", &pipebal_dropout);
  m.def("feature_dropout(Tensor input, float p, bool train) -> Tensor", &pipebal_feature_dropout);
}

const c10::Symbol kAtenDropout = c10::Symbol::fromQualString("aten::dropout");
const c10::Symbol kAtenFeatureDropout = c10::Symbol::fromQualString("aten::feature_dropout");
const c10::Symbol kStageDropout = c10::Symbol::fromQualString("pipebal::dropout");
const c10::Symbol kStageFeatureDropout = c10::Symbol::fromQualString("pipebal::feature_dropout");

// Calls `visit` on every node of `block` and the blocks nested in it.
void for_each_node(jit::Block* block, const std::function<void(jit::Node*)>& visit) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    jit::Node* node = *it++;  // `visit` may replace the node
    for (jit::Block* inner : node->blocks()) for_each_node(inner, visit);
    visit(node);
  }
}

// Calls `visit` on every node of every method graph of `module` and (with `submodules`) its
// submodules, each graph once (submodules of one class share their methods).
void for_each_node(const torch::jit::Module& module, const std::function<void(jit::Node*)>& visit,
                   bool submodules = true) {
  std::set<jit::Graph*> seen;
  const auto walk_methods = [&](const torch::jit::Module& m) {
    for (const torch::jit::Method& method : m.get_methods()) {
      jit::Graph* graph = jit::toGraphFunction(method.function()).graph().get();
      if (seen.insert(graph).second) for_each_node(graph->block(), visit);
    }
  };
  if (!submodules) return walk_methods(module);
  for (const torch::jit::Module& m : module.modules()) walk_methods(m);
}

// Replaces each node of `graph` whose kind `kinds` maps by a node of the mapped kind on the same
// inputs.
int replace_kinds(jit::Graph& graph, const std::map<c10::Symbol, c10::Symbol>& kinds) {
  int replaced = 0;
  for_each_node(graph.block(), [&](jit::Node* node) {
    const auto to = kinds.find(node->kind());
    if (to == kinds.end() || node->outputs().size() != 1) return;
    jit::Node* replacement = graph.create(to->second, node->inputs(), 1);
    replacement->insertBefore(node);
    replacement->output()->setType(node->output()->type());
    node->output()->replaceAllUsesWith(replacement->output());
    node->destroy();
    ++replaced;
  });
  return replaced;
}

// ATen operators that draw from the default generator.
const std::set<std::string>& random_ops() {
  static const std::set<std::string> ops = {"aten::dropout",
                                            "aten::dropout_",
                                            "aten::feature_dropout",
                                            "aten::feature_dropout_",
                                            "aten::alpha_dropout",
                                            "aten::alpha_dropout_",
                                            "aten::feature_alpha_dropout",
                                            "aten::feature_alpha_dropout_",
                                            "aten::bernoulli",
                                            "aten::bernoulli_",
                                            "aten::rand",
                                            "aten::rand_like",
                                            "aten::randn",
                                            "aten::randn_like",
                                            "aten::randint",
                                            "aten::randint_like",
                                            "aten::randperm",
                                            "aten::multinomial",
                                            "aten::normal",
                                            "aten::normal_",
                                            "aten::uniform_",
                                            "aten::exponential_",
                                            "aten::geometric_",
                                            "aten::log_normal_",
                                            "aten::cauchy_",
                                            "aten::random_",
                                            "aten::rrelu",
                                            "aten::rrelu_",
                                            "aten::rrelu_with_noise",
                                            "aten::native_dropout"};
  return ops;
}

}  // namespace

int use_stage_dropout(torch::jit::Module& module) {
  const std::map<c10::Symbol, c10::Symbol> kinds = {{kAtenDropout, kStageDropout},
                                                    {kAtenFeatureDropout, kStageFeatureDropout}};
  std::set<jit::Graph*> done;
  int replaced = 0;
  // Children first: inlining a call takes the callee's compiled graph (and caches it), so a
  // submodule's methods must be rewritten before a parent's graph inlines them.
  std::function<void(const torch::jit::Module&)> rewrite = [&](const torch::jit::Module& m) {
    for (const torch::jit::Module& child : m.children()) rewrite(child);
    for (const torch::jit::Method& method : m.get_methods()) {
      std::shared_ptr<jit::Graph> graph = jit::toGraphFunction(method.function()).graph();
      if (!done.insert(graph.get()).second) continue;
      // Functions a method calls (F.dropout, scripted helpers) are shared by every module of the
      // compilation unit: inline them into the method's own graph and rewrite only that copy.
      jit::Inline(*graph);
      // Fold branches on constants, such as dropout's `if inplace:`, whose untaken in-place
      // dropout would otherwise count as a draw from ATen's generator.
      jit::ConstantPropagation(graph);
      replaced += replace_kinds(*graph, kinds);
    }
  };
  rewrite(module);
  return replaced;
}

bool calls_stage_dropout(const torch::jit::Module& module, bool submodules) {
  bool found = false;
  for_each_node(
      module,
      [&](jit::Node* node) {
        found = found || node->kind() == kStageDropout || node->kind() == kStageFeatureDropout;
      },
      submodules);
  return found;
}

bool is_random_op(const torch::jit::Node& node) {
  return random_ops().count(node.kind().toQualString()) > 0 || node.kind() == kStageDropout ||
         node.kind() == kStageFeatureDropout;
}

bool calls_aten_random_ops(const torch::jit::Module& module) {
  bool found = false;
  for_each_node(module, [&](jit::Node* node) {
    found = found || random_ops().count(node->kind().toQualString()) > 0;
  });
  return found;
}

}  // namespace pipebal::pipeline
