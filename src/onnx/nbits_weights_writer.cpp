#include "onnx/nbits_weights_writer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <vector>

#include "mminfer/status.h"
#include "onnx/proto_edit.h"
#include "onnx/tensor_proto.h"

namespace mminfer::onnx_io {

namespace {

constexpr const char* kMicrosoft = "com.microsoft";

// Sets the `bits`-wide field i of a low-first packed byte stream (zeroed beforehand).
void put(uint8_t* p, int64_t i, int bits, int value) {
  int64_t bit = i * bits;
  p[bit / 8] = static_cast<uint8_t>(p[bit / 8] | (value << (bit % 8)));
}

void check_options(const NBitsOptions& opt) {
  if (opt.bits != 4 && opt.bits != 8) throw Error("MatMulNBits weights: bits must be 4 or 8, got " + std::to_string(opt.bits));
  if (opt.block_size < 16 || opt.block_size > 256 || (opt.block_size & (opt.block_size - 1)) != 0)
    throw Error("MatMulNBits weights: block size must be a power of two from 16 to 256, got " + std::to_string(opt.block_size));
}

Tensor zeros(DType dtype, Shape shape) {
  Tensor t = Tensor::empty(dtype, std::move(shape));
  std::memset(t.data<uint8_t>(), 0, t.nbytes());
  return t;
}

bool all_finite(const Tensor& t) {
  const float* v = t.data<float>();
  return std::all_of(v, v + t.numel(), [](float x) { return std::isfinite(x); });
}

}  // namespace

NBitsWeight quantize_nbits(const float* w, int64_t K, int64_t N, const NBitsOptions& opt) {
  check_options(opt);
  const int bits = opt.bits;
  const int64_t bs = opt.block_size, kb = (K + bs - 1) / bs, blob = bs * bits / 8, zp_bytes = (kb * bits + 7) / 8;
  const int qmax = (1 << bits) - 1, mid = 1 << (bits - 1);
  NBitsWeight out;
  out.b = zeros(DType::kUint8, {N, kb, blob});
  out.scales = Tensor::empty(DType::kFloat32, {N, kb});
  if (!opt.symmetric) out.zero_points = zeros(DType::kUint8, {N, zp_bytes});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 0; b < kb; ++b) {
      const int64_t k0 = b * bs, k1 = std::min(K, k0 + bs);
      float lo = 0.f, hi = 0.f;
      for (int64_t k = k0; k < k1; ++k) lo = std::min(lo, w[k * N + n]), hi = std::max(hi, w[k * N + n]);
      float scale;
      int zp;
      if (opt.symmetric) {
        // As ONNX Runtime's quantizer: the value of largest magnitude maps to code 0 (-mid), so
        // every code on its side is used; the scale is negative when that value is positive.
        scale = (hi > -lo ? hi : lo) / -static_cast<float>(mid);
        zp = mid;
      } else {
        scale = (hi - lo) / static_cast<float>(qmax);
        zp = scale > 0 ? static_cast<int>(std::clamp(std::nearbyint(-lo / scale), 0.f, static_cast<float>(qmax))) : 0;
      }
      if (scale == 0.f) scale = 1.f;  // an all-zero block
      out.scales.data<float>()[n * kb + b] = scale;
      if (!opt.symmetric) put(out.zero_points.data<uint8_t>() + n * zp_bytes, b, bits, zp);
      uint8_t* p = out.b.data<uint8_t>() + (n * kb + b) * blob;
      for (int64_t j = 0; j < bs; ++j) {
        const int64_t k = k0 + j;
        // Past K the code is the zero point: those weights dequantize to exactly 0.
        float q = k < K ? std::nearbyint(w[k * N + n] / scale) + static_cast<float>(zp) : static_cast<float>(zp);
        put(p, j, bits, static_cast<int>(std::clamp(q, 0.f, static_cast<float>(qmax))));
      }
    }
  return out;
}

namespace {

// One rewrite over the main graph and its subgraphs; quantized weights are shared by name.
class NBitsRewrite {
 public:
  NBitsRewrite(onnx::GraphProto* main, const NBitsOptions& opt, const std::string& base_dir, const std::string& keep_float)
      : opt_(opt), base_dir_(base_dir), inits_(initializers(*main)), names_(*main) {
    if (!keep_float.empty()) {
      try {
        keep_.emplace(keep_float, std::regex::ECMAScript);
      } catch (const std::regex_error&) {
        throw Error("MatMulNBits weights: '" + keep_float + "' is not a valid regex");
      }
    }
  }

  // Rewrites g's MatMuls in place, then those of every subgraph below them.
  void graph(onnx::GraphProto* g, bool is_main) {
    std::set<std::string> own;  // a subgraph's own initializers hide the main graph's
    if (!is_main)
      for (const auto& t : g->initializer()) own.insert(t.name());
    for (onnx::NodeProto& node : *g->mutable_node()) {
      if (!own.count(node.input_size() > 1 ? node.input(1) : "")) rewrite(&node);
      for (auto& a : *node.mutable_attribute()) {
        if (a.has_g()) graph(a.mutable_g(), false);
        for (auto& sub : *a.mutable_graphs()) graph(&sub, false);
      }
    }
  }

  int count() const { return count_; }
  std::vector<onnx::TensorProto> take_initializers() { return std::move(new_inits_); }

 private:
  void rewrite(onnx::NodeProto* node) {
    const onnx::TensorProto* w = node->op_type() == "MatMul" && is_default_domain(node->domain()) &&
                                         node->input_size() == 2 && node->output_size() == 1
                                     ? float_initializer(inits_, node->input(1), 2)
                                     : nullptr;
    if (!w) return;
    if (keep_ && (std::regex_search(node->name(), *keep_) || std::regex_search(w->name(), *keep_))) return;
    const int64_t K = w->dims(0), N = w->dims(1);
    if (K < opt_.block_size || N <= 0) return;
    if (!written_.count(w->name())) written_[w->name()] = quantize(*w, K, N);
    const std::vector<std::string>& q = written_[w->name()];
    if (q.empty()) return;  // stays float
    std::vector<std::string> ins = {node->input(0)};
    ins.insert(ins.end(), q.begin(), q.end());
    onnx::NodeProto n = make_node("MatMulNBits", ins, {node->output(0)}, node->name().empty() ? names_.fresh("MatMulNBits") : node->name());
    n.set_domain(kMicrosoft);
    set_int_attribute(&n, "K", K);
    set_int_attribute(&n, "N", N);
    set_int_attribute(&n, "bits", opt_.bits);
    set_int_attribute(&n, "block_size", opt_.block_size);
    if (opt_.accuracy_level != 0) set_int_attribute(&n, "accuracy_level", opt_.accuracy_level);
    *node = std::move(n);
    ++count_;
  }

  // The names of w's B, scales and zero points; empty when w holds non-finite values.
  std::vector<std::string> quantize(const onnx::TensorProto& w, int64_t K, int64_t N) {
    Tensor wf = tensor_from_proto(w, base_dir_);
    if (!all_finite(wf)) return {};
    NBitsWeight q = quantize_nbits(wf.data<float>(), K, N, opt_);
    std::vector<std::string> ins = {names_.fresh(w.name() + "_Q" + std::to_string(opt_.bits)), names_.fresh(w.name() + "_scales")};
    add_initializer(new_inits_, q.b, ins[0]);
    add_initializer(new_inits_, q.scales, ins[1]);
    if (q.zero_points.defined()) {
      ins.push_back(names_.fresh(w.name() + "_zero_points"));
      add_initializer(new_inits_, q.zero_points, ins[2]);
    }
    return ins;
  }

  const NBitsOptions& opt_;
  const std::string& base_dir_;
  std::map<std::string, const onnx::TensorProto*> inits_;
  NameSet names_;
  std::optional<std::regex> keep_;
  std::map<std::string, std::vector<std::string>> written_;  // weight -> its quantized inputs
  std::vector<onnx::TensorProto> new_inits_;
  int count_ = 0;
};

}  // namespace

int write_nbits_weights(onnx::ModelProto& model, const NBitsOptions& opt, const std::string& base_dir,
                        const std::string& keep_float) {
  check_options(opt);
  onnx::GraphProto* g = model.mutable_graph();
  NBitsRewrite rewrite(g, opt, base_dir, keep_float);
  rewrite.graph(g, true);
  if (rewrite.count() > 0) {
    bool imported = false;
    for (const auto& op : model.opset_import()) imported = imported || op.domain() == kMicrosoft;
    if (!imported) {
      auto* op = model.add_opset_import();
      op->set_domain(kMicrosoft);
      op->set_version(1);
    }
  }
  for (auto& t : rewrite.take_initializers()) *g->add_initializer() = std::move(t);
  drop_unused_initializers(g);
  return rewrite.count();
}

}  // namespace mminfer::onnx_io
