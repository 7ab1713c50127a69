// Builds small IR graphs in tests without going through protobuf.
#pragma once
#include <random>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace mminfer::testing {

class GraphBuilder {
 public:
  explicit GraphBuilder(int opset = 17) { g.opsets[""] = opset; }

  int input(const std::string& name, const Shape& shape, DType dt = DType::kFloat32) {
    int id = g.add_value(name);
    auto& v = g.values[id];
    v.is_graph_input = true;
    v.dtype = dt;
    v.has_shape = true;
    v.dims = shape;
    v.symbols.assign(shape.size(), "");
    g.inputs.push_back(id);
    return id;
  }
  int constant(const std::string& name, const Tensor& t) {
    int id = g.add_value(name);
    auto& v = g.values[id];
    v.is_constant = true;
    v.constant = t;
    v.dtype = t.dtype();
    v.has_shape = true;
    v.dims = t.shape();
    v.symbols.assign(v.dims.size(), "");
    return id;
  }
  int scalar(const std::string& name, float x) {
    Tensor t = Tensor::empty(DType::kFloat32, {});
    *t.data<float>() = x;
    return constant(name, t);
  }
  // A 1-D int64 constant (Slice starts and ends, axes, shapes).
  int int64s(const std::string& name, const std::vector<int64_t>& v) {
    Tensor t = Tensor::empty(DType::kInt64, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
    return constant(name, t);
  }
  int random(const std::string& name, const Shape& shape, unsigned seed, float scale = 1.f) {
    return constant(name, random_tensor(shape, seed, scale));
  }
  // Adds a node; returns its first output. `rank` (if >= 0) records the output's known rank.
  int node(const std::string& op, std::vector<int> inputs, Attributes attrs = {}, int rank = -1, int outputs = 1,
           const std::string& domain = "") {
    ir::Node n;
    n.op_type = op;
    n.domain = domain;
    n.opset = domain.empty() ? g.opsets[""] : 1;
    n.name = op + std::to_string(g.nodes.size());
    n.inputs = std::move(inputs);
    n.attrs = std::move(attrs);
    for (int i = 0; i < outputs; ++i) {
      int id = g.add_value(n.name + "_out" + std::to_string(i));
      g.values[id].dtype = DType::kFloat32;
      if (rank >= 0) {
        g.values[id].has_shape = true;
        g.values[id].dims.assign(rank, -1);
        g.values[id].symbols.assign(rank, "");
      }
      n.outputs.push_back(id);
    }
    g.nodes.push_back(n);
    return n.outputs[0];
  }
  void output(int v) {
    g.values[v].is_graph_output = true;
    g.outputs.push_back(v);
  }
  void set_shape(int v, const Shape& s) {
    g.values[v].has_shape = true;
    g.values[v].dims = s;
    g.values[v].symbols.assign(s.size(), "");
  }

  static Tensor random_tensor(const Shape& shape, unsigned seed, float scale = 1.f) {
    Tensor t = Tensor::empty(DType::kFloat32, shape);
    std::mt19937 rng(seed);
    std::normal_distribution<float> n(0.f, scale);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = n(rng);
    return t;
  }

  ir::Graph g;
};

}  // namespace mminfer::testing
