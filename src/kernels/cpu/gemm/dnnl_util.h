// Shared oneDNN plumbing: one CPU engine for the process, a stream per calling thread, and
// small helpers to describe our dense row-major tensors to oneDNN.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/cpu/gemm/epilogue.h"

namespace mminfer::kernels {

dnnl::engine& dnnl_engine();
// oneDNN streams are not meant to be shared between threads; one per thread is cheap.
dnnl::stream& dnnl_stream();

// Plain (row-major, dense) layout tag for a tensor of the given rank: a, ab, abc, ...
dnnl::memory::format_tag plain_tag(size_t rank);
// Plain tag for grouped weights (g, oc/g, ic/g, spatial...) of the given total rank.
dnnl::memory::desc plain_desc(const std::vector<int64_t>& dims, dnnl::memory::data_type dt = dnnl::memory::data_type::f32);

// Logical [N, C, spatial...] stored channels-last, as [N, spatial..., C].
dnnl::memory::desc channels_last_desc(const std::vector<int64_t>& nchw_dims);

// Appends the activation (then its scale and shift) as eltwise post-ops; returns false when
// oneDNN has no equivalent.
bool append_activation(dnnl::post_ops& ops, const Activation& act);

// The activation (then its scale and shift) as a chain of in-place eltwise primitives on `md`:
// the same functions, in the same order and to the same bits, as append_activation's post-ops.
std::vector<dnnl::eltwise_forward> eltwise_chain(const Activation& act, const dnnl::memory::desc& md);
// Runs such a chain in place on `data`, laid out as `md`.
void run_eltwise_chain(std::vector<dnnl::eltwise_forward>& chain, float* data, const dnnl::memory::desc& md);

// Copies `src` (described by src_md) into a new memory of `want` layout, or returns it as is
// when the layouts already agree.
dnnl::memory reorder_if_needed(const dnnl::memory& src, const dnnl::memory::desc& want);

// Constant weights reordered into `want`, always into a fresh copy in weight memory
// (core/weight_memory.h: huge pages where available). `owner` keeps the bytes alive; `mem`
// only points at them.
struct PackedWeights {
  dnnl::memory mem;
  std::shared_ptr<void> owner;
};
PackedWeights pack_weights(const dnnl::memory& src, const dnnl::memory::desc& want);

// The layouts one constant operand has been packed into, one copy per distinct layout.
class PackedWeightCache {
 public:
  // The weights in layout `want`: packed from `plain` the first time, and from the first
  // packing afterwards (so `plain` may be released once this is non-empty).
  dnnl::memory get(const dnnl::memory& plain, const dnnl::memory::desc& want);
  bool empty() const { return packed_.empty(); }

 private:
  std::vector<std::pair<dnnl::memory::desc, PackedWeights>> packed_;
};

// Runs a oneDNN call and turns its exceptions into our one-line errors.
[[noreturn]] void fail_dnnl(const char* what, const dnnl::error& e);

}  // namespace mminfer::kernels
