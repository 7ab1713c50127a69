#include "kernels/cpu/gemm/dnnl_util.h"

#include <algorithm>
#include <string>

#include "core/weight_memory.h"
#include "kernels/cpu/common/kernel.h"
#include "kernels/cpu/gemm/dnnl_isa.h"

namespace mminfer::kernels {

using tag = dnnl::memory::format_tag;

dnnl::engine& dnnl_engine() {
  static dnnl::engine engine = [] {
    cap_dnnl_isa();
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return engine;
}

dnnl::stream& dnnl_stream() {
  thread_local dnnl::stream stream(dnnl_engine());
  return stream;
}

dnnl::memory::format_tag plain_tag(size_t rank) {
  static const tag tags[] = {tag::undef, tag::a, tag::ab, tag::abc, tag::abcd, tag::abcde, tag::abcdef};
  if (rank < 1 || rank > 6) fail("oneDNN tensors must have rank 1 to 6, got " + std::to_string(rank));
  return tags[rank];
}

dnnl::memory::desc plain_desc(const std::vector<int64_t>& dims, dnnl::memory::data_type dt) {
  return dnnl::memory::desc(dnnl::memory::dims(dims.begin(), dims.end()), dt, plain_tag(dims.size()));
}

dnnl::memory::desc channels_last_desc(const std::vector<int64_t>& nchw_dims) {
  size_t r = nchw_dims.size();
  dnnl::memory::dims strides(r);
  int64_t stride = 1;
  strides[1] = stride;
  stride *= nchw_dims[1];
  for (size_t i = r; i-- > 2;) {
    strides[i] = stride;
    stride *= nchw_dims[i];
  }
  strides[0] = stride;
  return dnnl::memory::desc(dnnl::memory::dims(nchw_dims.begin(), nchw_dims.end()), dnnl::memory::data_type::f32, strides);
}

namespace {

// The activation proper, without the trailing affine map.
bool append_function(dnnl::post_ops& ops, const Activation& act) {
  using alg = dnnl::algorithm;
  switch (act.kind) {
    case Activation::kNone: return true;
    case Activation::kRelu: ops.append_eltwise(1.f, alg::eltwise_relu, 0.f, 0.f); return true;
    case Activation::kLeakyRelu: ops.append_eltwise(1.f, alg::eltwise_relu, act.alpha, 0.f); return true;
    case Activation::kClip: ops.append_eltwise(1.f, alg::eltwise_clip, act.alpha, act.beta); return true;
    case Activation::kHardSigmoid:
      ops.append_eltwise(1.f, alg::eltwise_linear, act.alpha, act.beta);
      ops.append_eltwise(1.f, alg::eltwise_clip, 0.f, 1.f);
      return true;
    case Activation::kHardSwish: ops.append_eltwise(1.f, alg::eltwise_hardswish, 0.f, 0.f); return true;
    case Activation::kSigmoid: ops.append_eltwise(1.f, alg::eltwise_logistic, 0.f, 0.f); return true;
    case Activation::kTanh: ops.append_eltwise(1.f, alg::eltwise_tanh, 0.f, 0.f); return true;
    case Activation::kGeluErf: ops.append_eltwise(1.f, alg::eltwise_gelu_erf, 0.f, 0.f); return true;
    case Activation::kGeluTanh: ops.append_eltwise(1.f, alg::eltwise_gelu_tanh, 0.f, 0.f); return true;
    case Activation::kSilu: ops.append_eltwise(1.f, alg::eltwise_swish, act.alpha, 0.f); return true;
  }
  return false;
}

}  // namespace

bool append_activation(dnnl::post_ops& ops, const Activation& act) {
  using alg = dnnl::algorithm;
  if (act.kind == Activation::kHardSigmoid && act.has_affine()) {
    // oneDNN 2.6 runs a second eltwise_linear in one chain with the first one's parameters, so
    // the trailing map joins HardSigmoid's own linear step and moves the clip bounds instead:
    // clip(u, 0, 1) * s + t == clip(u * s + t, between t and s + t).
    float lo = act.shift, hi = act.scale + act.shift;
    ops.append_eltwise(1.f, alg::eltwise_linear, act.scale * act.alpha, act.scale * act.beta + act.shift);
    ops.append_eltwise(1.f, alg::eltwise_clip, std::min(lo, hi), std::max(lo, hi));
    return true;
  }
  if (!append_function(ops, act)) return false;
  if (act.has_affine()) ops.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, act.scale, act.shift);
  return true;
}

std::vector<dnnl::eltwise_forward> eltwise_chain(const Activation& act, const dnnl::memory::desc& md) {
  dnnl::post_ops ops;
  if (!append_activation(ops, act)) fail("activation has no oneDNN eltwise");
  std::vector<dnnl::eltwise_forward> chain;
  for (int i = 0; i < ops.len(); ++i) {
    float scale = 1.f, alpha = 0.f, beta = 0.f;
    dnnl::algorithm alg;
    ops.get_params_eltwise(i, scale, alg, alpha, beta);
    dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference, alg, md, alpha, beta);
    chain.emplace_back(dnnl::eltwise_forward::primitive_desc(desc, dnnl_engine()));
  }
  return chain;
}

void run_eltwise_chain(std::vector<dnnl::eltwise_forward>& chain, float* data, const dnnl::memory::desc& md) {
  dnnl::memory mem(md, dnnl_engine(), data);
  try {
    for (auto& prim : chain) prim.execute(dnnl_stream(), {{DNNL_ARG_SRC, mem}, {DNNL_ARG_DST, mem}});
    dnnl_stream().wait();
  } catch (const dnnl::error& e) {
    fail_dnnl("eltwise", e);
  }
}

dnnl::memory reorder_if_needed(const dnnl::memory& src, const dnnl::memory::desc& want) {
  if (src.get_desc() == want) return src;
  dnnl::memory dst(want, dnnl_engine());
  dnnl::reorder(src, dst).execute(dnnl_stream(), const_cast<dnnl::memory&>(src), dst);
  dnnl_stream().wait();
  return dst;
}

PackedWeights pack_weights(const dnnl::memory& src, const dnnl::memory::desc& want) {
  PackedWeights w;
  w.owner = allocate_weight_memory(want.get_size());
  w.mem = dnnl::memory(want, dnnl_engine(), w.owner.get());
  dnnl::reorder(src, w.mem).execute(dnnl_stream(), const_cast<dnnl::memory&>(src), w.mem);
  dnnl_stream().wait();
  return w;
}

dnnl::memory PackedWeightCache::get(const dnnl::memory& plain, const dnnl::memory::desc& want) {
  for (auto& [d, packed] : packed_)
    if (d == want) return packed.mem;
  const dnnl::memory& src = packed_.empty() ? plain : packed_.front().second.mem;
  packed_.emplace_back(want, pack_weights(src, want));
  return packed_.back().second.mem;
}

void fail_dnnl(const char* what, const dnnl::error& e) {
  fail(std::string(what) + ": oneDNN refused (" + e.what() + ")");
}

}  // namespace mminfer::kernels
