#include "kernels/cpu/dnnl_util.h"

#include <string>

#include "kernels/cpu/kernel.h"

namespace mminfer::kernels {

using tag = dnnl::memory::format_tag;

dnnl::engine& dnnl_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
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

bool append_activation(dnnl::post_ops& ops, const Activation& act) {
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

dnnl::memory reorder_if_needed(const dnnl::memory& src, const dnnl::memory::desc& want) {
  if (src.get_desc() == want) return src;
  dnnl::memory dst(want, dnnl_engine());
  dnnl::reorder(src, dst).execute(dnnl_stream(), const_cast<dnnl::memory&>(src), dst);
  dnnl_stream().wait();
  return dst;
}

void fail_dnnl(const char* what, const dnnl::error& e) {
  fail(std::string(what) + ": oneDNN refused (" + e.what() + ")");
}

}  // namespace mminfer::kernels
