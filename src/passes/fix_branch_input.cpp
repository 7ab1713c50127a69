#include "passes/fix_branch_input.h"

#include <algorithm>
#include <map>

#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

// Copies `body`'s nodes into `g` in place of If node `at`; body values read from the enclosing
// scope resolve by name, the body's own values get fresh names.
void inline_branch(ir::Graph& g, int at, const ir::Graph& body) {
  std::map<int, int> to_outer;
  for (size_t v = 0; v < body.values.size(); ++v) {
    const ir::Value& bv = body.values[v];
    if (bv.is_graph_input) {
      int outer = g.find_value(bv.name);
      if (outer < 0) throw Error("If branch reads '" + bv.name + "', which the graph does not define");
      to_outer[static_cast<int>(v)] = outer;
      continue;
    }
    int id = g.add_value(fresh_name(g, g.label(g.nodes[at]) + "/" + bv.name));
    ir::Value& ov = g.values[id];
    std::string name = ov.name;
    ov = bv;
    ov.name = name;
    ov.is_graph_output = false;
    ov.producer = -1;
    to_outer[static_cast<int>(v)] = id;
  }
  auto map = [&](int v) { return v < 0 ? v : to_outer.at(v); };
  const std::vector<int> outputs = g.nodes[at].outputs;
  g.nodes[at].removed = true;
  for (const ir::Node& bn : body.nodes) {
    if (bn.removed) continue;
    // Constant nodes become constants, as the loader makes them in a top-level graph.
    if (bn.op_type == "Constant" && bn.domain.empty() && bn.outputs.size() == 1 && bn.outputs[0] >= 0) {
      Tensor t;
      if (const Tensor* v = bn.attrs.has("value") ? bn.attrs.get_tensor("value") : nullptr) {
        t = *v;
      } else if (bn.attrs.has("value_float")) {
        t = Tensor::empty(DType::kFloat32, {});
        *t.data<float>() = bn.attrs.get_float("value_float", 0);
      } else if (bn.attrs.has("value_int")) {
        t = Tensor::empty(DType::kInt64, {});
        *t.data<int64_t>() = bn.attrs.get_int("value_int", 0);
      }
      if (t.defined()) {
        make_constant(g.values[map(bn.outputs[0])], t);
        continue;
      }
    }
    ir::Node n = bn;
    for (int& in : n.inputs) in = map(in);
    for (int& out : n.outputs) out = map(out);
    g.nodes.push_back(std::move(n));
  }
  // The If's outputs take the branch's results.
  for (size_t k = 0; k < outputs.size() && k < body.outputs.size(); ++k) {
    if (outputs[k] < 0) continue;
    ir::Node id;
    id.name = g.label(g.nodes[at]) + "/result_" + std::to_string(k);
    id.op_type = "Identity";
    id.opset = g.opsets.count("") ? g.opsets.at("") : 1;
    id.inputs = {map(body.outputs[k])};
    id.outputs = {outputs[k]};
    g.nodes.push_back(std::move(id));
  }
}

}  // namespace

bool fix_branch_input(ir::Graph& g, const std::string& input, bool value) {
  int cond = g.find_value(input);
  if (cond < 0 || !g.values[cond].is_graph_input) return false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    ir::Node& n = g.nodes[i];
    if (n.removed || n.op_type != "If" || !n.domain.empty() || n.inputs.empty() || n.inputs[0] != cond) continue;
    auto it = n.attrs.all().find(value ? "then_branch" : "else_branch");
    auto* ga = it == n.attrs.all().end() ? nullptr : std::get_if<std::shared_ptr<GraphAttr>>(&it->second);
    if (!ga || !*ga || !(*ga)->graph) throw Error("If '" + g.label(n) + "' has no " + (value ? "then" : "else") + " branch");
    const ir::Graph body = *(*ga)->graph;  // a copy: inlining grows g.nodes, which holds n
    inline_branch(g, static_cast<int>(i), body);
  }
  g.relink();
  drop_unread_inputs(g);  // the condition, and what only the other branch read (a first step's pasts)
  return true;
}

}  // namespace mminfer::passes
