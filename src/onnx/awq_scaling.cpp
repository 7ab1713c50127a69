#include "onnx/awq_scaling.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <regex>
#include <set>

#include "mminfer/status.h"
#include "onnx/proto_edit.h"
#include "onnx/tensor_proto.h"

namespace mminfer::onnx_io {

void ActivationStats::add(const float* x, int64_t n, int64_t max_rows) {
  if (abs_sum.empty()) abs_sum.assign(static_cast<size_t>(channels), 0.0);
  for (int64_t r = 0; r < n; ++r) {
    const float* row = x + r * channels;
    for (int64_t c = 0; c < channels; ++c) abs_sum[c] += std::fabs(row[c]);
    // The first max_rows rows, then every later row overwrites one slot in turn: a spread of the set.
    int64_t slot = rows < max_rows ? rows : rows % max_rows;
    if (slot >= sample_rows) sample.resize(static_cast<size_t>((slot + 1) * channels)), sample_rows = slot + 1;
    std::copy(row, row + channels, sample.begin() + slot * channels);
    ++rows;
  }
}

namespace {

struct Candidate {
  int node;  // index in the main graph
  const onnx::TensorProto* w;
};

std::optional<std::regex> keep_regex(const std::string& keep_float) {
  if (keep_float.empty()) return std::nullopt;
  try {
    return std::regex(keep_float, std::regex::ECMAScript);
  } catch (const std::regex_error&) {
    throw Error("MatMulNBits weights: '" + keep_float + "' is not a valid regex");
  }
}

// activation -> the MatMuls write_nbits_weights quantizes that read it, in graph order.
std::map<std::string, std::vector<Candidate>> candidates(const onnx::GraphProto& g,
                                                         const std::map<std::string, const onnx::TensorProto*>& inits,
                                                         const NBitsOptions& opt, const std::string& keep_float) {
  std::optional<std::regex> keep = keep_regex(keep_float);
  std::map<std::string, std::vector<Candidate>> out;
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    if (n.op_type() != "MatMul" || !is_default_domain(n.domain()) || n.input_size() != 2 || n.output_size() != 1) continue;
    const onnx::TensorProto* w = float_initializer(inits, n.input(1), 2);
    if (!w || w->dims(0) < opt.block_size || w->dims(1) <= 0) continue;
    if (keep && (std::regex_search(n.name(), *keep) || std::regex_search(w->name(), *keep))) continue;
    out[n.input(0)].push_back({i, w});
  }
  return out;
}

uint8_t code(const uint8_t* p, int64_t i, int bits) {
  int64_t bit = i * bits;
  return static_cast<uint8_t>((p[bit / 8] >> (bit % 8)) & ((1 << bits) - 1));
}

// The [K, N] float weight that q holds (MatMulNBits' dequantization).
std::vector<float> dequantize(const NBitsWeight& q, int64_t K, int64_t N, const NBitsOptions& opt) {
  const int64_t bs = opt.block_size, kb = (K + bs - 1) / bs, blob = bs * opt.bits / 8, zp_bytes = (kb * opt.bits + 7) / 8;
  std::vector<float> w(static_cast<size_t>(K * N));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 0; b < kb; ++b) {
      float scale = q.scales.data<float>()[n * kb + b];
      int zp = opt.symmetric ? 1 << (opt.bits - 1) : code(q.zero_points.data<uint8_t>() + n * zp_bytes, b, opt.bits);
      const uint8_t* p = q.b.data<uint8_t>() + (n * kb + b) * blob;
      for (int64_t j = 0; j < bs && b * bs + j < K; ++j)
        w[(b * bs + j) * N + n] = static_cast<float>(code(p, j, opt.bits) - zp) * scale;
    }
  return w;
}

// Sum over the sample rows of |X (W - diag(1/s) Q(diag(s) W))|^2.
double output_error(const ActivationStats& x, const Tensor& w, const std::vector<float>& s, const NBitsOptions& opt) {
  const int64_t K = w.dim(0), N = w.dim(1);
  const float* wf = w.data<float>();
  std::vector<float> scaled(static_cast<size_t>(K * N));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) scaled[k * N + n] = wf[k * N + n] * s[k];
  std::vector<float> dq = dequantize(quantize_nbits(scaled.data(), K, N, opt), K, N, opt);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) dq[k * N + n] = wf[k * N + n] - dq[k * N + n] / s[k];
  double err = 0;
  std::vector<double> y(static_cast<size_t>(N));
  for (int64_t r = 0; r < x.sample_rows; ++r) {
    std::fill(y.begin(), y.end(), 0.0);
    const float* row = x.sample.data() + r * K;
    for (int64_t k = 0; k < K; ++k) {
      if (row[k] == 0.f) continue;
      const float* d = dq.data() + k * N;
      for (int64_t n = 0; n < N; ++n) y[n] += static_cast<double>(row[k]) * d[n];
    }
    for (double v : y) err += v * v;
  }
  return err;
}

// s = mean|x|^alpha, normalized so that max(s) * min(s) = 1 (AWQ's choice: no overall growth).
std::vector<float> scales_for(const ActivationStats& x, double alpha) {
  const int64_t K = x.channels;
  std::vector<double> m(static_cast<size_t>(K));
  double top = 0;
  for (int64_t k = 0; k < K; ++k) top = std::max(top, m[k] = x.abs_sum[k] / static_cast<double>(std::max<int64_t>(x.rows, 1)));
  double lo = 1e300, hi = 0;
  for (double& v : m) v = std::pow(std::max(v, top * 1e-6 + 1e-12), alpha), lo = std::min(lo, v), hi = std::max(hi, v);
  double norm = std::sqrt(lo * hi);
  std::vector<float> s(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) s[k] = static_cast<float>(m[k] / norm);
  return s;
}

// A float constant of K values along its last axis (every other dimension 1).
bool channel_vector(const onnx::TensorProto* t, int64_t K) {
  if (!t || t->data_type() != onnx::TensorProto::FLOAT || t->dims_size() == 0 || t->dims(t->dims_size() - 1) != K) return false;
  for (int i = 0; i + 1 < t->dims_size(); ++i)
    if (t->dims(i) != 1) return false;
  return true;
}

class Folder {
 public:
  Folder(onnx::ModelProto& model, const std::string& base_dir)
      : g_(model.mutable_graph()), base_dir_(base_dir), inits_(initializers(*g_)), names_(*g_) {
    for (int i = 0; i < g_->node_size(); ++i) {
      for (const auto& in : g_->node(i).input()) readers_[in].push_back(i);
      for (const auto& out : g_->node(i).output()) producer_[out] = i;
      for (const auto& a : g_->node(i).attribute())  // a subgraph reading a value: never fold into it
        if (a.has_g() || a.graphs_size() > 0) opaque_.insert(i);
    }
    for (const auto& o : g_->output()) readers_[o.name()].push_back(-1);
  }

  const std::map<std::string, const onnx::TensorProto*>& inits() const { return inits_; }

  // Input `slot` of node `n` becomes a copy of its constant times `f` along the last axis
  // (or, for a [K0, K] MatMul weight, its columns; `rows` scales the rows of [K, N] instead).
  void scale_input(int n, int slot, const std::vector<float>& f, bool rows = false) {
    onnx::NodeProto* node = g_->mutable_node(n);
    Tensor t = tensor_from_proto(*inits_.at(resolve(node->input(slot))), base_dir_);
    const int64_t K = static_cast<int64_t>(f.size()), total = t.numel();
    float* v = t.data<float>();
    if (rows) {
      const int64_t N = total / K;
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < N; ++j) v[k * N + j] *= f[k];
    } else {
      for (int64_t i = 0; i < total; ++i) v[i] *= f[i % K];
    }
    std::string name = names_.fresh(node->input(slot) + "_awq");
    add_initializer(new_inits_, t, name);
    node->set_input(slot, name);
  }

  // Folds 1/s into the producer of `x` (read only by `group`); the node's name, or "" if none fits.
  std::string fold(const std::string& x, const std::vector<Candidate>& group, const std::vector<float>& inv) {
    const int64_t K = static_cast<int64_t>(inv.size());
    if (readers_[x].size() != group.size() || !producer_.count(x)) return "";
    int p = producer_[x];
    if (opaque_.count(p)) return "";
    const onnx::NodeProto& n = g_->node(p);
    auto constant = [&](int slot) -> const onnx::TensorProto* {
      if (slot >= n.input_size() || n.input(slot).empty()) return nullptr;
      auto it = inits_.find(resolve(n.input(slot)));
      return it == inits_.end() ? nullptr : it->second;
    };
    const bool ms = n.domain() == "com.microsoft" || is_default_domain(n.domain());
    if (ms && (n.op_type() == "LayerNormalization" || n.op_type() == "SimplifiedLayerNormalization") && n.output(0) == x) {
      if (!channel_vector(constant(1), K) || (n.input_size() > 2 && !n.input(2).empty() && !channel_vector(constant(2), K)))
        return "";
      scale_input(p, 1, inv);
      if (n.input_size() > 2 && !n.input(2).empty()) scale_input(p, 2, inv);
      return n.name();
    }
    if (!is_default_domain(n.domain()) || n.input_size() != 2) return "";
    if (n.op_type() == "MatMul" && constant(1) && constant(1)->dims_size() == 2 && constant(1)->dims(1) == K &&
        constant(1)->data_type() == onnx::TensorProto::FLOAT) {
      scale_input(p, 1, inv);
      return n.name();
    }
    for (int c = 0; c < 2; ++c) {
      if (!channel_vector(constant(c), K) || constant(1 - c)) continue;
      if (n.op_type() == "Mul") {
        scale_input(p, c, inv);
        return n.name();
      }
      if (n.op_type() == "Add") {  // (a * g) + b with a decomposed LayerNorm: both g and b
        const std::string& a = n.input(1 - c);
        if (!producer_.count(a) || readers_[a].size() != 1) return "";
        int q = producer_[a];
        const onnx::NodeProto& m = g_->node(q);
        if (m.op_type() != "Mul" || !is_default_domain(m.domain()) || m.input_size() != 2) return "";
        for (int d = 0; d < 2; ++d) {
          auto it = inits_.find(resolve(m.input(d)));
          if (it == inits_.end() || !channel_vector(it->second, K) || inits_.count(resolve(m.input(1 - d)))) continue;
          scale_input(q, d, inv);
          scale_input(p, c, inv);
          return n.name();
        }
        return "";
      }
    }
    return "";
  }

  // The constant behind Identity nodes (exporters write one for each copy of a shared weight).
  std::string resolve(std::string name) const {
    for (int hops = 0; hops < 8 && !inits_.count(name); ++hops) {
      auto it = producer_.find(name);
      if (it == producer_.end()) break;
      const onnx::NodeProto& n = g_->node(it->second);
      if (n.op_type() != "Identity" || !is_default_domain(n.domain()) || n.input_size() != 1) break;
      name = n.input(0);
    }
    return name;
  }

  // x / s for the group: a Mul by 1/s before its first MatMul.
  void insert_mul(const std::string& x, const std::vector<Candidate>& group, const std::vector<float>& inv) {
    Tensor t = Tensor::empty(DType::kFloat32, {static_cast<int64_t>(inv.size())});
    std::copy(inv.begin(), inv.end(), t.data<float>());
    std::string scale = names_.fresh(x + "_awq_inv_scale"), out = names_.fresh(x + "_awq");
    add_initializer(new_inits_, t, scale);
    int first = group[0].node;
    for (const Candidate& c : group) g_->mutable_node(c.node)->set_input(0, out), first = std::min(first, c.node);
    inserted_[first].push_back(make_node("Mul", {x, scale}, {out}, names_.fresh(x + "_awq_Mul")));
  }

  void finish() {
    std::vector<onnx::NodeProto> nodes;
    for (int i = 0; i < g_->node_size(); ++i) {
      for (auto& m : inserted_[i]) nodes.push_back(std::move(m));
      nodes.push_back(g_->node(i));
    }
    replace_nodes(g_, std::move(nodes), std::move(new_inits_));
  }

 private:
  onnx::GraphProto* g_;
  const std::string& base_dir_;
  std::map<std::string, const onnx::TensorProto*> inits_;
  NameSet names_;
  std::map<std::string, std::vector<int>> readers_;  // -1: a graph output
  std::map<std::string, int> producer_;
  std::set<int> opaque_;
  std::map<int, std::vector<onnx::NodeProto>> inserted_;
  std::vector<onnx::TensorProto> new_inits_;
};

}  // namespace

std::vector<std::string> awq_activations(const onnx::ModelProto& model, const NBitsOptions& opt, const std::string& keep_float) {
  auto inits = initializers(model.graph());
  std::vector<std::string> out;
  for (auto& [x, group] : candidates(model.graph(), inits, opt, keep_float)) out.push_back(x);
  return out;
}

std::vector<AwqChoice> apply_awq_scaling(onnx::ModelProto& model, const std::map<std::string, ActivationStats>& stats,
                                         const NBitsOptions& opt, const std::string& base_dir, const std::string& keep_float) {
  Folder folder(model, base_dir);
  std::vector<AwqChoice> choices;
  for (auto& [x, group] : candidates(model.graph(), folder.inits(), opt, keep_float)) {
    auto it = stats.find(x);
    if (it == stats.end() || it->second.rows == 0) continue;
    const ActivationStats& st = it->second;
    std::vector<Tensor> weights;
    bool usable = true;
    for (const Candidate& c : group) {
      weights.push_back(tensor_from_proto(*c.w, base_dir));
      const float* v = weights.back().data<float>();
      usable = usable && weights.back().dim(0) == st.channels &&
               std::all_of(v, v + weights.back().numel(), [](float f) { return std::isfinite(f); });
    }
    if (!usable) continue;
    AwqChoice choice;
    choice.activation = x;
    choice.matmuls = static_cast<int>(group.size());
    double values = 0;
    for (const Tensor& w : weights) values += static_cast<double>(st.sample_rows * w.dim(1));
    double best = -1;
    for (int step = 0; step <= 10; ++step) {
      double alpha = step / 10.0, err = 0;
      std::vector<float> s = scales_for(st, alpha);
      for (const Tensor& w : weights) err += output_error(st, w, s, opt);
      err /= std::max(values, 1.0);
      if (step == 0) choice.error_plain = err;
      if (best < 0 || err < best) best = err, choice.alpha = alpha;
    }
    choice.error = best;
    if (choice.alpha > 0) {
      std::vector<float> s = scales_for(st, choice.alpha), inv(s.size());
      for (size_t k = 0; k < s.size(); ++k) inv[k] = 1.f / s[k];
      choice.folded_into = folder.fold(x, group, inv);
      if (choice.folded_into.empty()) folder.insert_mul(x, group, inv), choice.folded_into = "a new Mul";
      for (const Candidate& c : group) folder.scale_input(c.node, 1, s, true);
    }
    choices.push_back(choice);
  }
  folder.finish();
  return choices;
}

}  // namespace mminfer::onnx_io
