// oneDNN's side of the ISA cap (core/cpu_features.h). oneDNN fixes its instruction set on first
// use, so the cap is handed over before that, at the two doors every oneDNN call goes through:
// dnnl_engine() (every memory and primitive) and sgemm() (dense_gemm.h).
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include "core/cpu_features.h"

namespace mminfer::kernels {

// Hands MMINFER_ISA's cap to oneDNN, once per process; later calls return at once. Without
// MMINFER_ISA oneDNN keeps its own ONEDNN_MAX_CPU_ISA, which cpu_features() then follows.
void cap_dnnl_isa();
// The oneDNN level matching a cap (`all` for native).
dnnl::cpu_isa dnnl_isa_for(IsaCap cap);
// The level oneDNN runs at, the cap applied.
dnnl::cpu_isa dnnl_effective_isa();
// oneDNN's spelling of a level ("avx512_core_bf16").
const char* dnnl_isa_name(dnnl::cpu_isa isa);

}  // namespace mminfer::kernels
