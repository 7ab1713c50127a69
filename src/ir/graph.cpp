#include "ir/graph.h"

#include <algorithm>
#include <queue>

namespace mminfer::ir {

int Graph::add_value(const std::string& name) {
  if (!name.empty()) {
    auto it = by_name_.find(name);
    if (it != by_name_.end()) return it->second;
  }
  int id = static_cast<int>(values.size());
  values.push_back(Value{});
  values.back().name = name;
  if (!name.empty()) by_name_[name] = id;
  return id;
}

int Graph::find_value(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : it->second;
}

const std::string& Graph::label(const Node& n) const {
  if (!n.name.empty() || n.outputs.empty() || n.outputs[0] < 0) return n.name;
  return values[n.outputs[0]].name;
}

void Graph::relink() {
  for (auto& v : values) v.producer = -1;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].removed) continue;
    for (int o : nodes[i].outputs)
      if (o >= 0) values[o].producer = static_cast<int>(i);
  }
}

std::vector<int> Graph::topological_order() const {
  std::vector<int> producer(values.size(), -1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].removed) continue;
    for (int o : nodes[i].outputs) {
      if (o < 0) continue;
      if (producer[o] != -1)
        throw Error("value '" + values[o].name + "' is produced by two nodes ('" + label(nodes[producer[o]]) +
                    "' and '" + label(nodes[i]) + "')");
      if (values[o].is_graph_input || values[o].is_constant)
        throw Error("node '" + label(nodes[i]) + "' writes to graph input or initializer '" + values[o].name + "'");
      producer[o] = static_cast<int>(i);
    }
  }
  std::vector<int> pending(nodes.size(), 0);
  std::vector<std::vector<int>> users(nodes.size());
  std::queue<int> ready;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].removed) continue;
    for (int in : nodes[i].inputs) {
      if (in < 0) continue;
      const Value& v = values[in];
      if (producer[in] >= 0) {
        ++pending[i];
        users[producer[in]].push_back(static_cast<int>(i));
      } else if (!v.is_graph_input && !v.is_constant) {
        throw Error("node '" + label(nodes[i]) + "' (" + nodes[i].op_type + ") reads '" + v.name +
                    "', which no node, input or initializer provides");
      }
    }
  }
  // Seed in file order so the result is stable and close to the author's order.
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!nodes[i].removed && pending[i] == 0) ready.push(static_cast<int>(i));
  std::vector<int> order;
  while (!ready.empty()) {
    int n = ready.front();
    ready.pop();
    order.push_back(n);
    for (int u : users[n])
      if (--pending[u] == 0) ready.push(u);
  }
  size_t live = 0;
  for (auto& n : nodes) live += !n.removed;
  if (order.size() != live) throw Error("graph has a cycle");
  for (int o : outputs) {
    const Value& v = values[o];
    if (producer[o] < 0 && !v.is_graph_input && !v.is_constant)
      throw Error("graph output '" + v.name + "' is not produced by any node");
  }
  return order;
}

void keep_outputs(Graph& g, const std::vector<std::string>& names) {
  std::vector<int> kept;
  for (const std::string& name : names) {
    auto it = std::find_if(g.outputs.begin(), g.outputs.end(), [&](int v) { return g.values[v].name == name; });
    if (it == g.outputs.end()) {
      std::string have;
      for (int v : g.outputs) have += (have.empty() ? "" : ", ") + g.values[v].name;
      throw Error("the model has no output '" + name + "' (its outputs: " + have + ")");
    }
    if (std::find(kept.begin(), kept.end(), *it) != kept.end()) throw Error("output '" + name + "' is asked for twice");
    kept.push_back(*it);
  }
  for (int v : g.outputs) g.values[v].is_graph_output = false;
  for (int v : kept) g.values[v].is_graph_output = true;
  g.outputs = kept;
}

}  // namespace mminfer::ir
