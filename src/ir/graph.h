// The engine's own graph: values and nodes referenced by index, rewritten by passes.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/attributes.h"
#include "mminfer/tensor.h"

namespace mminfer::ir {

constexpr int kNoValue = -1;  // an omitted optional input

struct Value {
  std::string name;
  DType dtype = DType::kUndefined;
  bool has_shape = false;           // false: rank unknown
  std::vector<int64_t> dims;        // -1 where unknown
  std::vector<std::string> symbols; // symbolic names, "" where none
  int producer = -1;                // node index, -1 for inputs/initializers
  bool is_graph_input = false;
  bool is_graph_output = false;
  bool is_constant = false;         // holds an initializer
  Tensor constant;
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  // "" for the default ONNX domain
  int opset = 0;       // opset version of the node's domain
  Attributes attrs;
  std::vector<int> inputs;   // value ids, kNoValue for omitted optional inputs
  std::vector<int> outputs;  // value ids, kNoValue for omitted optional outputs
  bool removed = false;
};

class Graph {
 public:
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int> inputs;   // runtime inputs (initializers excluded)
  std::vector<int> outputs;
  // Subgraphs only: outer-scope values the body reads. They are appended to `inputs` (after
  // the formal ones) and to the owning node's inputs, in the same order.
  std::vector<int> captures;
  std::map<std::string, int> opsets;  // domain -> version ("" is ai.onnx)
  std::string producer_name;
  int64_t ir_version = 0;

  int add_value(const std::string& name);
  int find_value(const std::string& name) const;  // -1 when absent
  const std::string& label(const Node& n) const;   // node name, or its first output's name

  // Node indices in an order where every producer comes before its consumers.
  // Throws Error on cycles or on inputs that nothing produces.
  std::vector<int> topological_order() const;
  // Recomputes Value::producer from the live nodes.
  void relink();

 private:
  std::map<std::string, int> by_name_;
};

// Makes the named outputs the graph's only ones, in that order; what only the others needed is
// left for dead-node elimination. Throws Error for a name that is not an output.
void keep_outputs(Graph& g, const std::vector<std::string>& names);

// Subgraph held by an If/Loop/Scan attribute.
}  // namespace mminfer::ir

namespace mminfer {
struct GraphAttr {
  std::shared_ptr<ir::Graph> graph;
};
}  // namespace mminfer
