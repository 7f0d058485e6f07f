// Model::freeze: the layers fine-tuning leaves as they are. The model is
// walked in forward order down to its *units* (the leaves of nested
// Sequentials; a residual block is one unit); a freeze is the first k units.
// Registration follows forward order, so those units' parameters are the
// arena's prefix [0, frozen_params()), and being below every trainable unit
// they need no gradient at all: backward stops where they begin.
#include "core/error.h"
#include "nn/model.h"

namespace cohort::nn {

namespace {

// A named node of the walk: its module, its containers (outermost first) and
// the units [first, end) under it.
struct Node {
  std::string name;
  Module* module;
  std::vector<Module*> containers;
  size_t first, end;
};

struct Walk {
  std::vector<Node> nodes;  // pre-order
  std::vector<size_t> units;  // node index of each unit, in forward order
};

void walk(Sequential& s, const std::string& prefix, std::vector<Module*> containers, Walk& w) {
  containers.push_back(&s);
  for (size_t i = 0; i < s.size(); ++i) {
    Module& m = s.child(i);
    const std::string& own = s.child_name(i);
    const std::string name = own.empty() ? prefix : prefix.empty() ? own : prefix + "." + own;
    const size_t at = w.nodes.size();
    w.nodes.push_back({name, &m, containers, w.units.size(), 0});
    if (auto* inner = dynamic_cast<Sequential*>(&m); inner && inner->size())
      walk(*inner, name, containers, w);
    else
      w.units.push_back(at);
    w.nodes[at].end = w.units.size();
  }
}

std::string top_level_names(Sequential& s) {
  std::string names = "layers: ";
  for (size_t i = 0; i < s.size(); ++i) names += (i ? ", " : "") + s.child_name(i);
  return names + "; or backbone, none";
}

// The units a --freeze value freezes: the count from the first.
size_t frozen_units(const Walk& w, const std::string& what, const ModelSpec& spec,
                    Sequential& layers) {
  if (what == "none") return 0;
  const bool backbone = what == "backbone";
  COHORT_INPUT_CHECK(!backbone || !spec.head.empty(), "--freeze backbone: model ", spec.name,
                     " names no classifier head; give the last layer to freeze (",
                     top_level_names(layers), ")");
  const std::string& layer = backbone ? spec.head : what;
  for (const Node& n : w.nodes)
    if (n.name == layer) return backbone ? n.first : n.end;
  throw InputError("--freeze: model " + spec.name + " has no layer '" + what + "' (" +
                   top_level_names(layers) + "; nested ones by dotted name)");
}

}  // namespace

void Model::freeze(const std::string& what) {
  COHORT_CHECK(freeze_ == "none", "model ", name(), " is frozen already (through ", freeze_, ")");
  Walk w;
  walk(*layers_, "", {}, w);
  const size_t k = frozen_units(w, what, *spec_, *layers_);
  if (k == 0) return;
  COHORT_INPUT_CHECK(k < w.units.size() &&
                         w.nodes[w.units[k]].module->param_begin() < params_.size(),
                     "--freeze ", what, " leaves model ", name(), " nothing to train");
  for (const Node& n : w.nodes)
    if (n.end <= k) n.module->set_frozen(true);  // units and wholly frozen containers
  // The first trainable unit, and every container that holds it, take no dx:
  // all that lies before it is frozen.
  const Node& first = w.nodes[w.units[k]];
  first.module->set_needs_input_grad(false);
  for (Module* c : first.containers) c->set_needs_input_grad(false);
  layers_->fold_frozen_norms();
  freeze_ = what;
  frozen_params_ = first.module->param_begin();
}

}  // namespace cohort::nn
