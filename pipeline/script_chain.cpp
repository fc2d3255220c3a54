// See script_chain.h.
#include "pipeline/script_chain.h"

#include <map>
#include <vector>

#include <fmt/format.h>
#include <torch/csrc/jit/ir/ir.h>

namespace pipebal::pipeline {
namespace {

using torch::jit::Node;
using torch::jit::Value;

std::string op_name(const Node* node) {
  return node->kind().toQualString();
}

// Walks the forward graph's top-level nodes, tracking the values the next child must take.
class ChainCheck {
 public:
  explicit ChainCheck(const torch::jit::Module& module) {
    int index = 0;
    for (const auto& child : module.named_children()) {
      children_.push_back(child.name);
      index_of_[child.name] = index++;
    }
  }

  std::string run(const torch::jit::Graph& graph) {
    if (children_.empty()) return "it has no child modules to use as layers";
    const auto inputs = graph.inputs();
    if (inputs.size() < 2) return "its forward takes no input";
    self_ = inputs[0];
    current_.assign(inputs.begin() + 1, inputs.end());
    // Control flow is the deeper reason, whatever computes its condition comes first.
    for (const Node* node : graph.nodes()) {
      if (node->kind() == c10::prim::If || node->kind() == c10::prim::Loop) {
        return fmt::format("forward has control flow ({}), which pipebal cannot cut into stages",
                           node->kind() == c10::prim::If ? "an if" : "a loop");
      }
    }
    for (const Node* node : graph.nodes()) {
      std::string why = visit(node);
      if (!why.empty()) return why;
    }
    if (next_ < children_.size()) {
      return fmt::format("forward never calls child {} '{}'", next_, children_[next_]);
    }
    const auto outputs = graph.outputs();
    if (outputs.size() == 1 && current_.size() == 1 && outputs[0] == current_[0]) return "";
    if (outputs.size() == 1 && outputs[0] == returned_tuple_) return "";
    return fmt::format("forward does not return the output of its last child '{}' as it is",
                       children_.back());
  }

 private:
  std::string visit(const Node* node) {
    const auto kind = node->kind();
    if (kind == c10::prim::Constant) return "";
    if (kind == c10::prim::GetAttr) return visit_get_attr(node);
    if (kind == c10::prim::CallMethod) return visit_call(node);
    if (kind == c10::prim::TupleUnpack && node->input() == last_call_output_ &&
        current_.size() == 1 && current_[0] == last_call_output_) {
      current_.assign(node->outputs().begin(), node->outputs().end());
      return "";
    }
    if (kind == c10::prim::TupleConstruct && next_ == children_.size() &&
        std::vector<const Value*>(node->inputs().begin(), node->inputs().end()) ==
            std::vector<const Value*>(current_.begin(), current_.end())) {
      returned_tuple_ = node->output();
      return "";
    }
    return fmt::format("forward computes {} {} outside any child", op_name(node), where());
  }

  std::string visit_get_attr(const Node* node) {
    const std::string name = node->s(c10::attr::name);
    if (node->input() == self_ && index_of_.count(name) > 0) {
      child_of_[node->output()] = name;
      return "";
    }
    if (const auto parent = child_of_.find(node->input()); parent != child_of_.end()) {
      inside_child_[node->output()] = parent->second;
      return "";
    }
    if (!node->output()->hasUses()) return "";
    return fmt::format("forward uses attribute '{}' {} outside any child", name, where());
  }

  std::string visit_call(const Node* node) {
    const auto found = child_of_.find(node->inputs()[0]);
    if (const auto inside = inside_child_.find(node->inputs()[0]); inside != inside_child_.end()) {
      return fmt::format(
          "forward calls a module inside child {} '{}' (a ModuleList or similar) "
          "rather than the child; make each such module a top-level child",
          index_of_.at(inside->second), inside->second);
    }
    if (found == child_of_.end()) {
      return fmt::format("forward calls a module that is not one of its own children {}", where());
    }
    const std::string& name = found->second;
    const size_t index = index_of_.at(name);
    const std::string method = node->s(c10::attr::name);
    if (method != "forward") {
      return fmt::format("forward calls method '{}' of child {} '{}', not its forward", method,
                         index, name);
    }
    if (index < next_) {
      return fmt::format("forward calls child {} '{}' a second time", index, name);
    }
    if (index > next_) {
      return fmt::format(
          "forward calls child {} '{}' before child {} '{}' (pipebal runs the "
          "children in the order they are registered)",
          index, name, next_, children_[next_]);
    }
    const std::vector<const Value*> arguments(node->inputs().begin() + 1, node->inputs().end());
    if (arguments != std::vector<const Value*>(current_.begin(), current_.end())) {
      return fmt::format("child {} '{}' does not take exactly {}", index, name,
                         index == 0 ? "forward's inputs"
                                    : fmt::format("the outputs of child {} '{}'", index - 1,
                                                  children_[index - 1]));
    }
    ++next_;
    last_call_output_ = node->output();
    current_ = {node->output()};
    return "";
  }

  // "after child 1 'fc2'", for a node seen between two child calls.
  std::string where() const {
    if (next_ == 0) return fmt::format("before child 0 '{}'", children_.front());
    return fmt::format("after child {} '{}'", next_ - 1, children_[next_ - 1]);
  }

  std::vector<std::string> children_;
  std::map<std::string, size_t> index_of_;
  std::map<const Value*, std::string> child_of_;
  std::map<const Value*, std::string> inside_child_;  // a child's own submodules
  const Value* self_ = nullptr;
  std::vector<const Value*> current_;
  const Value* last_call_output_ = nullptr;
  const Value* returned_tuple_ = nullptr;
  size_t next_ = 0;
};

}  // namespace

std::string why_not_a_chain(const torch::jit::Module& module) {
  const auto method = module.find_method("forward");
  if (!method) return "it has no forward method";
  ChainCheck check(module);
  return check.run(*method->graph());
}

}  // namespace pipebal::pipeline
