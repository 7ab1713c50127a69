#include "kernels/cpu/gemm/dnnl_isa.h"

#include <cstdio>

namespace mminfer::kernels {

dnnl::cpu_isa dnnl_isa_for(IsaCap cap) {
  switch (cap) {
    case IsaCap::kAvx2: return dnnl::cpu_isa::avx2;
    case IsaCap::kAvx2Vnni: return dnnl::cpu_isa::avx2_vnni;
    case IsaCap::kAvx512: return dnnl::cpu_isa::avx512_core;
    case IsaCap::kAvx512Vnni: return dnnl::cpu_isa::avx512_core_vnni;
    case IsaCap::kAvx512Bf16: return dnnl::cpu_isa::avx512_core_bf16;
    case IsaCap::kNative: break;
  }
  return dnnl::cpu_isa::all;
}

void cap_dnnl_isa() {
  static const bool applied = [] {
    const IsaSetting& s = isa_setting();
    if (s.source != "MMINFER_ISA") return false;
    // Also for native: MMINFER_ISA then overrides an ONEDNN_MAX_CPU_ISA that cpu_features() ignored.
    if (dnnl::set_max_cpu_isa(dnnl_isa_for(s.cap)) == dnnl::status::success) return true;
    // Only when something used oneDNN before any mminfer kernel did.
    std::fprintf(stderr, "mminfer: warning: oneDNN was already in use; MMINFER_ISA=%s does not cap it (it runs %s)\n",
                 isa_cap_name(s.cap), dnnl_isa_name(dnnl::get_effective_cpu_isa()));
    return false;
  }();
  (void)applied;
}

dnnl::cpu_isa dnnl_effective_isa() {
  cap_dnnl_isa();
  return dnnl::get_effective_cpu_isa();
}

const char* dnnl_isa_name(dnnl::cpu_isa isa) {
  using ci = dnnl::cpu_isa;
  switch (isa) {
    case ci::all: return "all";
    case ci::sse41: return "sse41";
    case ci::avx: return "avx";
    case ci::avx2: return "avx2";
    case ci::avx2_vnni: return "avx2_vnni";
    case ci::avx512_mic: return "avx512_mic";
    case ci::avx512_mic_4ops: return "avx512_mic_4ops";
    case ci::avx512_core: return "avx512_core";
    case ci::avx512_core_vnni: return "avx512_core_vnni";
    case ci::avx512_core_bf16: return "avx512_core_bf16";
    case ci::avx512_core_amx: return "avx512_core_amx";
  }
  return "unknown";
}

}  // namespace mminfer::kernels
