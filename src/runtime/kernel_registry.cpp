// Every op family's registration, in one list. It lives in the runtime rather than in kernels
// because If, Loop and Scan run subgraphs through the executor: kept here, the list sees both
// and the only arrow out of kernels stays kernels -> core. A new family is one declaration and
// one line below.
#include "runtime/kernel_registry.h"

#include "core/cpu_features.h"
#include "runtime/control_flow.h"

namespace mminfer::kernels {

// math/
void register_elementwise_unary(Registry&);
void register_elementwise_binary(Registry&);
void register_elementwise_pow(Registry&);
void register_elementwise_variadic(Registry&);
void register_reductions(Registry&);
void register_argminmax(Registry&);
void register_softmax(Registry&);
void register_matmul(Registry&);
void register_gemm(Registry&);
void register_einsum(Registry&);
void register_cumsum(Registry&);
void register_topk(Registry&);
void register_det(Registry&);
// nn/
void register_activations(Registry&);
void register_attention(Registry&);
void register_conv(Registry&);
void register_conv_transpose(Registry&);
void register_pooling(Registry&);
void register_roi_pool(Registry&);
void register_normalization(Registry&);
void register_batch_norm(Registry&);
void register_local_norms(Registry&);
void register_recurrent(Registry&);
void register_losses(Registry&);
void register_non_max_suppression(Registry&);
void register_rms_norm(Registry&);
void register_skip_norm(Registry&);
void register_rotary_embedding(Registry&);
void register_rotate_half(Registry&);  // mminfer::RotateHalf
void register_silu(Registry&);         // mminfer::Silu
void register_token_merge(Registry&);  // mminfer::TokenMerge
// nn/, com.microsoft attention with a KV cache
void register_group_query_attention(Registry&);
void register_multi_head_attention(Registry&);
void register_kv_cache_attention(Registry&);  // mminfer::CachedAttention
// tensor/
void register_cast(Registry&);
void register_shape_ops(Registry&);
void register_transpose_ops(Registry&);
void register_expand_tile(Registry&);
void register_gather_scatter(Registry&);
void register_scatter(Registry&);
void register_select_ops(Registry&);
void register_unique(Registry&);
void register_slice_concat(Registry&);
void register_pad(Registry&);
void register_reverse_sequence(Registry&);
void register_trilu(Registry&);
void register_generators(Registry&);
void register_resize(Registry&);
void register_grid_sample(Registry&);
// quantization/
void register_quantize(Registry&);
void register_matmul_integer(Registry&);
void register_conv_integer(Registry&);
void register_matmul_nbits(Registry&);  // com.microsoft MatMulNBits
void register_matmul_nbits_tiled(Registry&);  // its weight tiled for AVX-512 VNNI
// signal/
void register_signal(Registry&);

}  // namespace mminfer::kernels

namespace mminfer::runtime {

const kernels::Registry& kernel_registry() {
  static const kernels::Registry registry = [] {
    cpu_features();  // a bad MMINFER_ISA is one Error here, before any kernel exists
    using namespace kernels;
    Registry r;
    // math/
    register_elementwise_unary(r);
    register_elementwise_binary(r);
    register_elementwise_pow(r);
    register_elementwise_variadic(r);
    register_reductions(r);
    register_argminmax(r);
    register_softmax(r);
    register_matmul(r);
    register_gemm(r);
    register_einsum(r);
    register_cumsum(r);
    register_topk(r);
    register_det(r);
    // nn/
    register_activations(r);
    register_attention(r);
    register_conv(r);
    register_conv_transpose(r);
    register_pooling(r);
    register_roi_pool(r);
    register_normalization(r);
    register_batch_norm(r);
    register_local_norms(r);
    register_recurrent(r);
    register_losses(r);
    register_non_max_suppression(r);
    register_rms_norm(r);            // SimplifiedLayerNormalization, RMSNormalization
    register_skip_norm(r);           // com.microsoft Skip(Simplified)LayerNormalization
    register_rotary_embedding(r);    // com.microsoft and ONNX RotaryEmbedding
    register_rotate_half(r);
    register_silu(r);
    register_token_merge(r);
    // nn/, com.microsoft attention with a KV cache
    register_group_query_attention(r);
    register_multi_head_attention(r);
    register_kv_cache_attention(r);
    // tensor/
    register_cast(r);
    register_shape_ops(r);
    register_transpose_ops(r);
    register_expand_tile(r);
    register_gather_scatter(r);
    register_scatter(r);
    register_select_ops(r);
    register_unique(r);
    register_slice_concat(r);
    register_pad(r);
    register_reverse_sequence(r);
    register_trilu(r);
    register_generators(r);
    register_resize(r);
    register_grid_sample(r);
    // quantization/
    register_quantize(r);
    register_matmul_integer(r);
    register_conv_integer(r);
    register_matmul_nbits(r);
    register_matmul_nbits_tiled(r);
    // signal/
    register_signal(r);
    // runtime/control_flow.cpp
    register_control_flow(r);
    return r;
  }();
  return registry;
}

}  // namespace mminfer::runtime
