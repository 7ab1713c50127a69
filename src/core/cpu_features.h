// What the CPU offers the kernels, asked once and capped by the environment, so that every
// dispatch (our AVX2 / AVX-512 kernels, the INT8 weight limit, BF16 precision and, through
// kernels' dnnl_isa.h, oneDNN) takes the same path. The cap exists to test and compare the
// lower paths on a machine that has the higher ones:
//   MMINFER_ISA=avx2          AVX2, FMA, F16C only (the build's baseline): no AVX-512, no VNNI
//   MMINFER_ISA=avx2_vnni     + AVX-VNNI
//   MMINFER_ISA=avx512        + AVX-512 F/BW/VL/DQ (no VNNI, as oneDNN's avx512_core)
//   MMINFER_ISA=avx512_vnni   + AVX512_VNNI
//   MMINFER_ISA=avx512_bf16   + AVX512_BF16
//   MMINFER_ISA=native        everything the CPU has (also when unset or empty)
// A cap never adds what the CPU lacks. Without MMINFER_ISA, oneDNN's own ONEDNN_MAX_CPU_ISA caps
// our kernels too, so both agree on VNNI (the INT8 weight range depends on it).
#pragma once
#include <string>
#include <string_view>

namespace mminfer {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_vnni = false, avx_vnni = false, avx512_bf16 = false;
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;

  bool vnni() const { return avx512_vnni || avx_vnni; }  // u8·s8 dot products without int16 saturation
  bool operator==(const CpuFeatures&) const = default;
};

enum class IsaCap { kAvx2, kAvx2Vnni, kAvx512, kAvx512Vnni, kAvx512Bf16, kNative };

struct IsaSetting {
  IsaCap cap = IsaCap::kNative;
  std::string source;  // "MMINFER_ISA", "ONEDNN_MAX_CPU_ISA", or empty when neither is set
};

// What this CPU and its OS offer, uncapped.
CpuFeatures detect_cpu_features();
// An MMINFER_ISA value (case-insensitive; empty means native); throws Error naming the accepted ones.
IsaCap parse_isa_cap(std::string_view value);
const char* isa_cap_name(IsaCap cap);
// The cap from MMINFER_ISA, else from ONEDNN_MAX_CPU_ISA (levels below AVX2, and values oneDNN
// would not know, count as avx2: the safe side), else native. Null or empty means unset.
IsaSetting isa_setting_from(const char* mminfer_isa, const char* onednn_max_cpu_isa);
// `f` without what `cap` leaves out.
CpuFeatures apply_isa_cap(CpuFeatures f, IsaCap cap);

// The process's setting and capped features, read from the environment on first use. Both throw
// Error on a bad MMINFER_ISA (every time, so the first caller reports it).
const IsaSetting& isa_setting();
const CpuFeatures& cpu_features();

// The path the kernels take, e.g. "avx512_bf16 (AVX-512 F/BW/VL/DQ, VNNI, BF16)".
std::string cpu_isa_name(const CpuFeatures& f);
// The flags that are set, space-separated ("avx2 fma f16c avx512f ...").
std::string cpu_feature_list(const CpuFeatures& f);

}  // namespace mminfer
