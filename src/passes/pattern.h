// Small helpers for passes that match chains of nodes.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace mminfer::passes {

// Readers of every value (live nodes only); graph outputs count as a reader.
class UseCounts {
 public:
  explicit UseCounts(const ir::Graph& g);
  int count(int value) const { return value < 0 ? 0 : counts_[value]; }
  // The single live node reading `value`, or -1 when there is not exactly one (or it is an output).
  int only_reader(int value) const;

 private:
  std::vector<int> counts_;
  std::vector<int> reader_;
};

bool is_op(const ir::Node& n, const char* op);  // default ONNX domain
// The operand of binary node `n` that is not `v` (or -1 when `v` is not an operand).
int other_input(const ir::Node& n, int v);
// The value of a constant with exactly one element, as float.
std::optional<float> scalar_constant(const ir::Graph& g, int value);
// The elements of an int32/int64 constant, flattened; nullopt when `value` is not one.
std::optional<std::vector<int64_t>> int_constant(const ir::Graph& g, int value);
// An int attribute (`fallback` when absent); nullopt when it holds another type (a malformed file).
std::optional<int64_t> int_attr(const ir::Node& n, const std::string& name, int64_t fallback);
// An ints attribute; nullopt when absent or of another type.
std::optional<std::vector<int64_t>> ints_attr(const ir::Node& n, const std::string& name);
// Slice's starts, ends, axes and steps: attributes before opset 10, constant inputs from 10;
// nullopt when one is not constant.
struct SliceParams {
  std::vector<int64_t> starts, ends, axes, steps;
};
std::optional<SliceParams> slice_params(const ir::Graph& g, const ir::Node& slice);
// Positions a one-axis Slice reads from an axis of length n, clamped as the ONNX spec says.
std::vector<int64_t> slice_positions(int64_t n, int64_t start, int64_t end, int64_t step);
// Rank from shape inference, or -1 when unknown.
int known_rank(const ir::Graph& g, int value);
// Marks `old_nodes` removed, appends `fused` in their place and refreshes producers.
void replace_nodes(ir::Graph& g, const std::vector<int>& old_nodes, ir::Node fused);
// Removes from g.inputs every input no live node reads (and that is not also an output).
void drop_unread_inputs(ir::Graph& g);
// Drops the data of the constants among `values` that no live node reads any more, so weights a
// pass rewrote do not stay in memory beside their new form.
void release_unread_constants(ir::Graph& g, const std::vector<int>& values);
// Turns `v` into a constant holding `t`, with its type and shape.
void make_constant(ir::Value& v, const Tensor& t);
// A fresh value name that does not clash with existing ones.
std::string fresh_name(const ir::Graph& g, const std::string& base);
// A default-domain node at the graph's opset, with one output.
ir::Node default_node(const ir::Graph& g, const std::string& op, const std::string& name, std::vector<int> inputs,
                      int output);
// A node of ours (domain "mminfer", opset 1), as the fusion passes make them.
ir::Node mminfer_node(const std::string& op, const std::string& name, std::vector<int> inputs, std::vector<int> outputs);
// A new constant int64 vector value (named after `name`, made fresh).
int add_int64_constant(ir::Graph& g, const std::string& name, const std::vector<int64_t>& v);

// y · Sigmoid(y · alpha) where y is read by those two nodes only: SiLU (alpha 1, written as
// y · Sigmoid(y) in either order) or QuickGELU (alpha 1.702). `nodes` are the matched nodes.
struct SiluMatch {
  float alpha;
  std::vector<int> nodes;
  int output;
};
std::optional<SiluMatch> match_silu(const ir::Graph& g, const UseCounts& uses, int y);

// The attributes that say how a node's arithmetic is quantized (precision, int8_activations,
// int8_range): a fused or rewritten node carries them over from the node it replaces, and
// nodes merged into one must agree on them.
void copy_precision_attrs(const ir::Node& from, ir::Node& to);
bool same_precision_attrs(const ir::Node& a, const ir::Node& b);

}  // namespace mminfer::passes
