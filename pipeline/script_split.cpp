// See script_split.h.
#include "pipebal/pipeline/script_split.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/csrc/jit/ir/ir.h>

#include "pipebal/pipeline/script_dropout.h"

namespace pipebal::pipeline {
namespace {

namespace jit = torch::jit;
using jit::Node;
using jit::Value;

[[noreturn]] void refuse(const std::string& why) {
  throw std::invalid_argument(why);
}

bool is_tensor(const Value* value) {
  return value->type()->kind() == c10::TypeKind::TensorType;
}

bool is_module(const Value* value) {
  const auto type = value->type()->cast<c10::ClassType>();
  return type && type->is_module();
}

// True when `inner` is `outer` or an attribute inside it ("blocks.0.weight" in "blocks").
bool inside(const std::string& inner, const std::string& outer) {
  return inner == outer || (inner.size() > outer.size() && inner[outer.size()] == '.' &&
                            inner.compare(0, outer.size(), outer) == 0);
}

std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', start)) {
    parts.push_back(path.substr(start, dot - start));
    start = dot + 1;
  }
  parts.push_back(path.substr(start));
  return parts;
}

// The attribute at a path of the model: its value and what its owner registered it as.
struct Attribute {
  c10::IValue value;
  c10::TypePtr type;
  bool is_parameter = false;
  bool is_buffer = false;
  // Modules and tensors belong to one piece; other attributes are copied into every piece.
  bool is_state() const { return value.isModule() || value.isTensor(); }
};

Attribute attribute_at(const jit::Module& model, const std::string& path) {
  jit::Module owner = model;
  const std::vector<std::string> parts = components(path);
  for (size_t i = 0; i + 1 < parts.size(); ++i) owner = owner.attr(parts[i]).toModule();
  const std::string& name = parts.back();
  const size_t slot = *owner.type()->findAttributeSlot(name);
  return {owner.attr(name), owner.type()->getAttribute(slot), owner.type()->is_parameter(slot),
          owner.type()->is_buffer(slot)};
}

std::string class_name(const c10::IValue& value) {
  const auto& qualified = value.toModule().type()->name();
  return qualified ? qualified->name() : "ScriptModule";
}

// The top-level node that contains `node` (itself when it is one).
Node* top_level(Node* node, const jit::Block* top) {
  while (node->owningBlock() != top) node = node->owningBlock()->owningNode();
  return node;
}

// Builds one piece's graph and module from nodes of the model's forward graph.
class PieceGraph {
 public:
  PieceGraph(const jit::Module& model, const std::shared_ptr<jit::CompilationUnit>& unit,
             const std::unordered_map<const Value*, std::string>& paths)
      : model_(model),
        unit_(unit),
        module_(c10::QualifiedName("__torch__.pipebal.Piece"), unit, /*shouldMangle=*/true),
        graph_(std::make_shared<jit::Graph>()),
        paths_(paths) {
    module_.register_attribute("training", c10::BoolType::get(), model.is_training());
    self_ = graph_->addInput("self");
    self_->setType(module_.type());
  }

  // Makes the module at `path` an attribute of the piece (before any node uses it).
  void add_module(const std::string& path) {
    for (const std::string& held : modules_) {
      if (inside(path, held)) return;
    }
    module_.register_module(flat_name(path), attribute_at(model_, path).value.toModule());
    modules_.push_back(path);
  }

  void add_input(Value* original) {
    Value* input = graph_->addInput();
    input->copyMetadata(original);
    env_[original] = input;
  }

  // Copies `node`, whose inputs are inputs of the piece or outputs of nodes copied before.
  void copy(Node* node, const std::vector<Value*>& uses) {
    for (Value* value : uses) resolve(value);
    Node* copied =
        graph_->insertNode(graph_->createClone(node, [&](Value* v) { return resolve(v); }));
    for (size_t i = 0; i < node->outputs().size(); ++i)
      env_[node->outputs()[i]] = copied->outputs()[i];
  }

  // Returns `results` as one tuple, unpacking a tuple-valued result when `unpack` is set.
  jit::Module finish(const std::vector<Value*>& results, bool unpack) {
    std::vector<Value*> values;
    for (Value* result : results) {
      Value* value = resolve(result);
      if (unpack && value->type()->kind() == c10::TypeKind::TupleType) {
        for (Value* element : graph_->insertNode(graph_->createTupleUnpack(value))->outputs()) {
          values.push_back(element);
        }
      } else {
        values.push_back(value);
      }
    }
    graph_->registerOutput(graph_->insertNode(graph_->createTuple(values))->output());
    const auto& type = module_.type();
    type->addMethod(unit_->create_function(c10::QualifiedName(*type->name(), "forward"), graph_));
    return module_;
  }

 private:
  // The piece's copy of a value of the model's graph.
  Value* resolve(Value* original) {
    if (const auto found = env_.find(original); found != env_.end()) return found->second;
    Node* node = original->node();
    Value* copy = nullptr;
    if (node->kind() == c10::prim::Constant) {
      copy = graph_->insertNode(graph_->createClone(node, [](Value* v) { return v; }))->output();
    } else if (const auto path = paths_.find(original); path != paths_.end()) {
      copy = read_path(path->second);
    } else {
      throw std::logic_error(
          fmt::format("piece is missing value %{} of the forward graph", original->debugName()));
    }
    env_[original] = copy;
    return copy;
  }

  // self.<path> in the piece: through a module the piece holds, or an attribute of its own.
  Value* read_path(const std::string& path) {
    if (path == "training") return graph_->insertGetAttr(self_, "training");
    for (const std::string& held : modules_) {
      if (!inside(path, held)) continue;
      Value* value = graph_->insertGetAttr(self_, flat_name(held));
      const std::vector<std::string> parts = components(path);
      for (size_t i = components(held).size(); i < parts.size(); ++i) {
        value = graph_->insertGetAttr(value, parts[i]);
      }
      return value;
    }
    const Attribute attribute = attribute_at(model_, path);
    const std::string name = flat_name(path);
    if (!module_.hasattr(name)) {
      if (attribute.value.isModule()) {
        module_.register_module(name, attribute.value.toModule());
      } else if (attribute.is_parameter || attribute.is_buffer) {
        module_.register_parameter(name, attribute.value.toTensor(), attribute.is_buffer);
      } else {
        module_.register_attribute(name, attribute.type, attribute.value);
      }
    }
    return graph_->insertGetAttr(self_, name);
  }

  // "blocks.0" -> "blocks_0", unique among the piece's attributes.
  std::string flat_name(const std::string& path) {
    if (const auto found = flat_names_.find(path); found != flat_names_.end()) return found->second;
    std::string name = path;
    std::replace(name.begin(), name.end(), '.', '_');
    const std::string base = name;
    for (int suffix = 1; module_.hasattr(name); ++suffix) name = fmt::format("{}_{}", base, suffix);
    return flat_names_[path] = name;
  }

  jit::Module model_;
  std::shared_ptr<jit::CompilationUnit> unit_;
  jit::Module module_;
  std::shared_ptr<jit::Graph> graph_;
  const std::unordered_map<const Value*, std::string>& paths_;
  Value* self_ = nullptr;
  std::unordered_map<const Value*, Value*> env_;
  std::vector<std::string> modules_;
  std::unordered_map<std::string, std::string> flat_names_;
};

class Splitter {
 public:
  explicit Splitter(const jit::Module& model)
      : model_(model), graph_(model.get_method("forward").graph()) {}

  std::vector<ScriptPiece> run() {
    scan();
    while (merge_where_a_cut_would_change_the_model()) {
    }
    return build();
  }

 private:
  // Sorts the forward graph's nodes: module calls, other operators (each a piece's), and nodes
  // every piece may copy (constants, attribute reads).
  void scan() {
    const auto inputs = graph_->inputs();
    if (inputs.size() < 2) refuse("its forward takes no input");
    self_ = inputs[0];
    for (size_t i = 1; i < inputs.size(); ++i) {
      if (!is_tensor(inputs[i])) {
        refuse(fmt::format("forward's argument '{}' is a {}; pipebal feeds tensors only",
                           inputs[i]->debugNameBase(), inputs[i]->type()->repr_str()));
      }
    }
    for (Node* node : graph_->nodes()) {
      if (node->kind() == c10::prim::Constant) continue;
      if (read_attribute(node)) continue;
      if (node->kind() == c10::prim::CallMethod) {
        add_call(node);
      } else {
        check_no_self(node);
        uses_[node] = captured_inputs(node);
      }
      steps_.push_back(node);
    }
    if (calls_.empty()) refuse("its forward calls no module, so there is nothing to cut at");
    read_results();
    cut_before_.assign(calls_.size(), true);
  }

  // A GetAttr on self or on a module read from it: a path such as "blocks.0.weight".
  bool read_attribute(Node* node) {
    if (node->kind() != c10::prim::GetAttr) return false;
    const std::string name = node->s(c10::attr::name);
    if (node->input() == self_) {
      paths_[node->output()] = name;
    } else if (const auto parent = paths_.find(node->input());
               parent != paths_.end() && is_module(node->input())) {
      paths_[node->output()] = parent->second + "." + name;
    } else {
      return false;
    }
    return true;
  }

  void add_call(Node* node) {
    const std::string method = node->s(c10::attr::name);
    if (node->inputs()[0] == self_) {
      refuse(
          fmt::format("forward calls the model's own method '{}'; make it a child module", method));
    }
    if (paths_.count(node->inputs()[0]) == 0) {
      refuse(fmt::format("forward calls method '{}' of a value that is not one of its modules",
                         method));
    }
    check_no_self(node);
    call_index_[node] = calls_.size();
    calls_.push_back(node);
    uses_[node] = captured_inputs(node);
  }

  void check_no_self(const Node* node) const {
    for (const Value* input : node->inputs()) {
      if (input == self_) {
        refuse(fmt::format("forward passes the model itself to {}", node->kind().toQualString()));
      }
    }
  }

  // A node's inputs and, for control flow, the values its blocks take from outside. Control
  // flow may compute with tensors, but not call modules or read the model's attributes: its
  // branches would have to be cut, which pipebal cannot do.
  std::vector<Value*> captured_inputs(Node* node) const {
    std::vector<Value*> all(node->inputs().begin(), node->inputs().end());
    if (node->blocks().empty()) return all;
    const char* what = node->kind() == c10::prim::If     ? "an if"
                       : node->kind() == c10::prim::Loop ? "a loop"
                                                         : node->kind().toQualString();
    std::unordered_set<const Value*> inner;
    std::vector<jit::Block*> blocks(node->blocks().begin(), node->blocks().end());
    for (size_t b = 0; b < blocks.size(); ++b) {
      for (const Value* param : blocks[b]->inputs()) inner.insert(param);
      for (Node* nested : blocks[b]->nodes()) {
        for (Value* input : nested->inputs()) {
          if (input == self_ || paths_.count(input) > 0) {
            refuse(fmt::format(
                "forward uses its modules inside control flow ({}), which pipebal cannot cut "
                "into stages",
                what));
          }
          if (inner.count(input) == 0 && input->node()->kind() != c10::prim::Constant) {
            all.push_back(input);
          }
        }
        for (const Value* output : nested->outputs()) inner.insert(output);
        blocks.insert(blocks.end(), nested->blocks().begin(), nested->blocks().end());
      }
      for (Value* output : blocks[b]->outputs()) {
        if (inner.count(output) == 0 && output->node()->kind() != c10::prim::Constant) {
          all.push_back(output);
        }
      }
    }
    return all;
  }

  void read_results() {
    Value* result = graph_->outputs()[0];
    Node* producer = result->node();
    if (producer->kind() == c10::prim::TupleConstruct && result->uses().size() == 1) {
      result_tuple_ = producer;
      uses_.erase(producer);
      steps_.erase(std::find(steps_.begin(), steps_.end(), producer));
      results_.assign(producer->inputs().begin(), producer->inputs().end());
    } else {
      results_ = {result};
      unpack_result_ = result->type()->kind() == c10::TypeKind::TupleType;
    }
    for (size_t i = 0; i < results_.size(); ++i) {
      const Value* value = results_[i];
      bool tensors = is_tensor(value);
      if (unpack_result_) {
        tensors = true;
        for (const auto& element : value->type()->containedTypes()) {
          tensors = tensors && element->kind() == c10::TypeKind::TensorType;
        }
      }
      if (tensors) continue;
      // A tuple built in forward: name the element that is no tensor (a nested tuple, an int).
      refuse(result_tuple_ != nullptr
                 ? fmt::format("forward returns a tuple whose element {} is a {}, not a tensor "
                               "(pipebal takes a tensor or a flat tuple of tensors)",
                               i, value->type()->repr_str())
                 : fmt::format("forward returns a {}, not a tensor or a tuple of tensors",
                               value->type()->repr_str()));
    }
  }

  // The inputs `node` writes in place (aten::add_'s self).
  static std::vector<Value*> written_inputs(Node* node) {
    std::vector<Value*> written;
    if (const c10::FunctionSchema* schema = node->maybeSchema()) {
      for (size_t i = 0; i < schema->arguments().size() && i < node->inputs().size(); ++i) {
        const c10::AliasInfo* alias = schema->arguments()[i].alias_info();
        if (alias != nullptr && alias->isWrite()) written.push_back(node->inputs()[i]);
      }
    }
    return written;
  }

  // The piece of each call, from the cuts between calls.
  std::vector<int> call_pieces() const {
    std::vector<int> pieces(calls_.size(), 0);
    for (size_t k = 1; k < calls_.size(); ++k) pieces[k] = pieces[k - 1] + (cut_before_[k] ? 1 : 0);
    return pieces;
  }

  // Each call starts the piece its cut gives it; any other operator joins the latest piece
  // whose results it uses (so a call's results are taken apart, added to and reshaped where
  // they are made, and nothing runs before its inputs exist).
  void assign_pieces() {
    const std::vector<int> of_call = call_pieces();
    piece_count_ = of_call.back() + 1;
    piece_of_.clear();
    for (Node* node : steps_) {
      int piece = 0;
      if (const auto call = call_index_.find(node); call != call_index_.end()) {
        piece = of_call[call->second];
      } else {
        for (const Value* input : uses_.at(node)) piece = std::max(piece, home(input));
        // A write stays after the reads before it.
        for (Value* written : written_inputs(node)) {
          for (const jit::Use& use : written->uses()) {
            Node* user = top_level(use.user, graph_->block());
            if (user->isBefore(node) && piece_of_.count(user) > 0) {
              piece = std::max(piece, piece_of_.at(user));
            }
          }
        }
      }
      piece_of_[node] = piece;
    }
  }

  // The piece that makes `value` (0 for forward's arguments, constants and attributes).
  int home(const Value* value) const {
    const auto found = piece_of_.find(value->node());
    return found == piece_of_.end() ? 0 : found->second;
  }

  // The pieces that use `value`, the last one for forward's results.
  std::set<int> users(Value* value) const {
    std::set<int> pieces;
    for (const jit::Use& use : value->uses()) {
      Node* user = top_level(use.user, graph_->block());
      if (user == result_tuple_ || user == graph_->return_node()) {
        pieces.insert(piece_count_ - 1);
      } else if (const auto found = piece_of_.find(user); found != piece_of_.end()) {
        pieces.insert(found->second);
      }
    }
    return pieces;
  }

  // Joins pieces between which a cut would change what the model computes. True when it did.
  bool merge_where_a_cut_would_change_the_model() {
    assign_pieces();
    std::vector<bool> join(piece_count_, false);  // join[p]: pieces p - 1 and p become one
    const auto keep_together = [&](int a, int b) {
      for (int p = std::min(a, b) + 1; p <= std::max(a, b); ++p) join[p] = true;
    };
    // A module, parameter or buffer is used by one piece only: its gradients, its optimizer
    // state and its in-place updates (batch norm's statistics) stay in one stage.
    std::vector<std::pair<std::string, int>> state_uses;
    for (Node* node : steps_) {
      for (const Value* input : node->inputs()) {
        const auto path = paths_.find(input);
        if (path != paths_.end() && path->second != "training" &&
            attribute_at(model_, path->second).is_state()) {
          state_uses.emplace_back(path->second, piece_of_.at(node));
        }
      }
    }
    for (size_t i = 0; i < state_uses.size(); ++i) {
      for (size_t j = i + 1; j < state_uses.size(); ++j) {
        if (inside(state_uses[i].first, state_uses[j].first) ||
            inside(state_uses[j].first, state_uses[i].first)) {
          keep_together(state_uses[i].second, state_uses[j].second);
        }
      }
    }
    for (Node* node : steps_) {
      const int piece = piece_of_.at(node);
      // Only tensors travel between stages.
      for (Value* output : node->outputs()) {
        if (is_tensor(output)) continue;
        for (const int user : users(output)) keep_together(piece, user);
      }
      // A tensor written in place is written where it was made: a stage writing its copy of
      // another stage's tensor would not change what the other stages see.
      for (const Value* written : written_inputs(node)) keep_together(home(written), piece);
    }
    if (std::none_of(join.begin(), join.end(), [](bool j) { return j; })) return false;
    int piece = 0;
    for (size_t k = 1; k < calls_.size(); ++k) {
      if (!cut_before_[k]) continue;
      ++piece;
      if (join[piece]) cut_before_[k] = false;
    }
    return true;
  }

  // How each value travels: to the next piece as a positional tensor when that piece alone
  // uses it later, as a skip tensor when a later one does.
  std::vector<ScriptPiece> build() {
    std::vector<Value*> values(graph_->inputs().begin() + 1, graph_->inputs().end());
    for (Node* node : steps_)
      values.insert(values.end(), node->outputs().begin(), node->outputs().end());
    std::vector<std::vector<Value*>> passed(piece_count_), stashed(piece_count_),
        read(piece_count_);
    std::vector<std::vector<std::string>> pops(piece_count_);
    for (Value* value : values) {
      const int from = home(value);
      std::set<int> later = users(value);
      later.erase(later.begin(), later.upper_bound(from));
      if (later.empty()) continue;
      if (later.size() == 1 && *later.begin() == from + 1) {
        passed[from].push_back(value);
        continue;
      }
      stashed[from].push_back(value);
      for (const int user : later) read[user].push_back(value);
      pops[*later.rbegin()].push_back(value->debugName());
    }

    const auto unit = std::make_shared<jit::CompilationUnit>();
    const std::vector<int> of_call = call_pieces();
    std::vector<ScriptPiece> pieces(piece_count_);
    for (int p = 0; p < piece_count_; ++p) {
      ScriptPiece& piece = pieces[p];
      PieceGraph graph(model_, unit, paths_);
      std::vector<std::string> called;
      for (size_t k = 0; k < calls_.size(); ++k) {
        if (of_call[k] != p) continue;
        const std::string& path = paths_.at(calls_[k]->inputs()[0]);
        if (std::find(called.begin(), called.end(), path) == called.end()) called.push_back(path);
        graph.add_module(path);
      }
      const std::vector<Value*> inputs =
          p == 0 ? std::vector<Value*>(graph_->inputs().begin() + 1, graph_->inputs().end())
                 : passed[p - 1];
      for (Value* input : inputs) graph.add_input(input);
      for (Value* skip : read[p]) graph.add_input(skip);
      for (Node* node : steps_) {
        if (piece_of_.at(node) != p) continue;
        graph.copy(node, uses_.at(node));
        piece.own_code_draws =
            piece.own_code_draws || (call_index_.count(node) == 0 && draws(node));
      }
      std::vector<Value*> outputs = p + 1 == piece_count_ ? results_ : passed[p];
      piece.inputs = inputs.size();
      piece.outputs = p + 1 == piece_count_ && unpack_result_
                          ? results_[0]->type()->containedTypes().size()
                          : outputs.size();
      outputs.insert(outputs.end(), stashed[p].begin(), stashed[p].end());
      piece.module = graph.finish(outputs, p + 1 == piece_count_ && unpack_result_);
      for (const Value* skip : read[p]) piece.reads.push_back(skip->debugName());
      for (const Value* skip : stashed[p]) piece.stashes.push_back(skip->debugName());
      piece.pops = pops[p];
      piece.name = called.size() <= 3 ? fmt::format("{}", fmt::join(called, "+"))
                                      : fmt::format("{}..{}", called.front(), called.back());
      piece.type =
          called.size() == 1 ? class_name(attribute_at(model_, called[0]).value) : "Sequence";
    }
    return pieces;
  }

  // Whether a node of the forward's own code may draw random numbers: a random ATen operator,
  // or a function call (F.dropout is one) that may run one.
  static bool draws(const Node* node) {
    if (node->kind() == c10::prim::CallFunction || is_random_op(*node)) return true;
    for (const jit::Block* block : node->blocks()) {
      for (const Node* nested : block->nodes()) {
        if (draws(nested)) return true;
      }
    }
    return false;
  }

  jit::Module model_;
  std::shared_ptr<jit::Graph> graph_;
  Value* self_ = nullptr;
  std::unordered_map<const Value*, std::string> paths_;        // attribute reads
  std::vector<Node*> steps_;                                   // calls and operators, in order
  std::unordered_map<const Node*, std::vector<Value*>> uses_;  // their inputs, captures included
  std::vector<Node*> calls_;
  std::unordered_map<const Node*, size_t> call_index_;
  Node* result_tuple_ = nullptr;  // forward's `return (a, b)`, taken apart
  std::vector<Value*> results_;
  bool unpack_result_ = false;  // forward returns a tuple a call made
  std::vector<bool> cut_before_;
  std::unordered_map<const Node*, int> piece_of_;
  int piece_count_ = 0;
};

}  // namespace

std::vector<ScriptPiece> split_forward(const torch::jit::Module& model) {
  if (!model.find_method("forward")) refuse("it has no forward method");
  return Splitter(model).run();
}

}  // namespace pipebal::pipeline
