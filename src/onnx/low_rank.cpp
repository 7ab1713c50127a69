#include "onnx/low_rank.h"

#include <algorithm>
#include <set>

#include "core/dense_linear_algebra.h"
#include "mminfer/status.h"
#include "onnx/proto_edit.h"
#include "onnx/tensor_proto.h"

namespace mminfer::onnx_io {

namespace {

std::vector<const Projection*> projections(const TransformerBlocks& blocks) {
  std::vector<const Projection*> out;
  for (const AttentionBlock& b : blocks.attention)
    for (const Projection* p : {&b.q, &b.k, &b.v, &b.o}) out.push_back(p);
  for (const MlpBlock& b : blocks.mlp) out.push_back(&b.up), out.push_back(&b.down);
  for (const Projection& p : blocks.other) out.push_back(&p);
  std::sort(out.begin(), out.end(), [](const Projection* a, const Projection* b) { return a->matmul < b->matmul; });
  return out;
}

struct Factors {
  DenseMatrix a, b;  // [K, r], [r, N]
  int64_t rank = 0;
  double error = 0;
};

// The smallest rank within max_error of X W in relative output energy, and its factors.
Factors factor(const DenseMatrix& w, int64_t k, int64_t n, const InputMoments& mo, double max_error) {
  DenseMatrix l(mo.xx.begin(), mo.xx.end());
  double mean_diag = 0;
  for (int64_t i = 0; i < k; ++i) mean_diag += l[i * k + i];
  mean_diag = std::max(mean_diag / static_cast<double>(k), 1e-30);
  bool factored = false;
  for (double ridge = 1e-9; ridge < 1 && !factored; ridge *= 100) {
    DenseMatrix f = l;
    for (int64_t i = 0; i < k; ++i) f[i * k + i] += ridge * mean_diag;
    if (cholesky_factor(f, k)) l = std::move(f), factored = true;
  }
  if (!factored) throw Error("low rank: the calibration inputs' second moment is not positive definite");
  DenseMatrix m(static_cast<size_t>(k * n), 0.0);  // Lᵀ W
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = i; j < k; ++j) {  // (Lᵀ)[i][j] = L[j][i], nonzero for j >= i
      const double f = l[j * k + i];
      if (f == 0.0) continue;
      for (int64_t c = 0; c < n; ++c) m[i * n + c] += f * w[j * n + c];
    }
  Svd svd = jacobi_svd(m, k, n);
  double total = 0;
  for (double s : svd.s) total += s * s;
  Factors out;
  double tail = total;
  out.rank = svd.k;
  for (int64_t r = 0; r <= svd.k; ++r) {
    if (tail <= max_error * total) {
      out.rank = r;
      break;
    }
    if (r < svd.k) tail -= svd.s[r] * svd.s[r];
  }
  out.rank = std::max<int64_t>(out.rank, 1);
  tail = 0;
  for (int64_t r = out.rank; r < svd.k; ++r) tail += svd.s[r] * svd.s[r];
  out.error = total > 0 ? tail / total : 0;
  const int64_t r = out.rank;
  out.a.assign(static_cast<size_t>(k * r), 0.0);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < r; ++j) out.a[i * r + j] = svd.u[i * svd.k + j] * svd.s[j];
  solve_lower_transposed(l, out.a, k, r);  // L⁻ᵀ U_r S_r
  out.b.assign(static_cast<size_t>(r * n), 0.0);
  for (int64_t j = 0; j < r; ++j)
    for (int64_t c = 0; c < n; ++c) out.b[j * n + c] = svd.v[c * svd.k + j];
  return out;
}

Tensor to_tensor(const DenseMatrix& m, int64_t rows, int64_t cols) {
  Tensor t = Tensor::empty(DType::kFloat32, {rows, cols});
  for (int64_t i = 0; i < rows * cols; ++i) t.data<float>()[i] = static_cast<float>(m[static_cast<size_t>(i)]);
  return t;
}

}  // namespace

std::vector<std::string> projection_inputs(const onnx::GraphProto& g, const TransformerBlocks& blocks) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const Projection* p : projections(blocks)) {
    const std::string& in = g.node(p->matmul).input(0);
    if (seen.insert(in).second) out.push_back(in);
  }
  return out;
}

std::vector<LowRankChoice> factor_low_rank(onnx::ModelProto& model, const TransformerBlocks& blocks,
                                           const std::map<std::string, InputMoments>& moments,
                                           const LowRankOptions& opt, const std::string& base_dir) {
  onnx::GraphProto* g = model.mutable_graph();
  auto inits = initializers(*g);
  NameSet names(*g);
  std::vector<LowRankChoice> out;
  std::map<int, std::pair<std::string, std::string>> replaced;  // MatMul -> (A, B) initializers
  std::vector<onnx::TensorProto> added;
  for (const Projection* p : projections(blocks)) {
    const std::string& in = g->node(p->matmul).input(0);
    auto mo = moments.find(in);
    if (mo == moments.end() || mo->second.channels != p->rows || mo->second.rows == 0) continue;
    LowRankChoice c;
    c.weight = p->weight;
    c.input = in;
    c.rows = p->rows;
    c.cols = p->cols;
    Tensor w = tensor_from_proto(*inits.at(p->weight), base_dir);
    DenseMatrix wd(w.data<float>(), w.data<float>() + w.numel());
    Factors f = factor(wd, p->rows, p->cols, mo->second, opt.max_error);
    c.rank = f.rank;
    c.error = f.error;
    const double tokens = mo->second.tokens_per_sample();
    c.flops_before = 2 * tokens * static_cast<double>(p->rows * p->cols);
    c.factored = static_cast<double>(f.rank * (p->rows + p->cols)) <= opt.max_cost * static_cast<double>(p->rows * p->cols);
    c.flops_after = c.factored ? 2 * tokens * static_cast<double>(f.rank * (p->rows + p->cols)) : c.flops_before;
    if (c.factored) {
      std::string a = names.fresh(p->weight + "_low_rank_a"), b = names.fresh(p->weight + "_low_rank_b");
      add_initializer(added, to_tensor(f.a, p->rows, f.rank), a);
      add_initializer(added, to_tensor(f.b, f.rank, p->cols), b);
      replaced[p->matmul] = {a, b};
    }
    out.push_back(std::move(c));
  }
  std::vector<onnx::NodeProto> nodes;
  for (int i = 0; i < g->node_size(); ++i) {
    auto it = replaced.find(i);
    if (it == replaced.end()) {
      nodes.push_back(g->node(i));
      continue;
    }
    const onnx::NodeProto& mm = g->node(i);
    std::string mid = names.fresh(mm.output(0) + "_low_rank");
    nodes.push_back(make_node("MatMul", {mm.input(0), it->second.first}, {mid}, names.fresh(mm.name() + "_low_rank_a")));
    onnx::NodeProto second = mm;
    second.set_input(0, mid);
    second.set_input(1, it->second.second);
    nodes.push_back(std::move(second));
  }
  replace_nodes(g, std::move(nodes), std::move(added));
  return out;
}

}  // namespace mminfer::onnx_io
