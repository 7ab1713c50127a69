#include "core/cpu_features.h"

#include <cctype>
#include <cstdlib>

#include "mminfer/status.h"

namespace mminfer {

namespace {

struct Flag {
  const char* name;
  bool CpuFeatures::*member;
};
constexpr Flag kFlags[] = {
    {"avx2", &CpuFeatures::avx2},           {"fma", &CpuFeatures::fma},
    {"f16c", &CpuFeatures::f16c},           {"avx512f", &CpuFeatures::avx512f},
    {"avx512bw", &CpuFeatures::avx512bw},   {"avx512vl", &CpuFeatures::avx512vl},
    {"avx512dq", &CpuFeatures::avx512dq},   {"avx512_vnni", &CpuFeatures::avx512_vnni},
    {"avx_vnni", &CpuFeatures::avx_vnni},   {"avx512_bf16", &CpuFeatures::avx512_bf16},
    {"amx_tile", &CpuFeatures::amx_tile},   {"amx_int8", &CpuFeatures::amx_int8},
    {"amx_bf16", &CpuFeatures::amx_bf16},
};

struct CapName {
  const char* name;
  IsaCap cap;
};
constexpr CapName kCaps[] = {{"avx2", IsaCap::kAvx2},
                             {"avx2_vnni", IsaCap::kAvx2Vnni},
                             {"avx512", IsaCap::kAvx512},
                             {"avx512_vnni", IsaCap::kAvx512Vnni},
                             {"avx512_bf16", IsaCap::kAvx512Bf16},
                             {"native", IsaCap::kNative}};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// oneDNN's names for its levels (dnnl_cpu_isa_t); anything else is below AVX2 or unknown to it.
IsaCap onednn_cap(std::string_view value) {
  std::string v = lower(value);
  if (v == "avx2_vnni") return IsaCap::kAvx2Vnni;
  if (v == "avx512_core") return IsaCap::kAvx512;
  if (v == "avx512_core_vnni") return IsaCap::kAvx512Vnni;
  if (v == "avx512_core_bf16") return IsaCap::kAvx512Bf16;
  if (v == "avx512_core_amx" || v == "all") return IsaCap::kNative;
  return IsaCap::kAvx2;
}

bool set(const char* s) { return s && *s; }

}  // namespace

CpuFeatures detect_cpu_features() {
  // __builtin_cpu_supports also checks that the OS saves the wider registers (XCR0).
  CpuFeatures f;
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.f16c = __builtin_cpu_supports("f16c");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512_vnni = __builtin_cpu_supports("avx512vnni");
  f.avx_vnni = __builtin_cpu_supports("avxvnni");
  f.avx512_bf16 = __builtin_cpu_supports("avx512bf16");
  f.amx_tile = __builtin_cpu_supports("amx-tile");
  f.amx_int8 = __builtin_cpu_supports("amx-int8");
  f.amx_bf16 = __builtin_cpu_supports("amx-bf16");
  return f;
}

IsaCap parse_isa_cap(std::string_view value) {
  std::string v = lower(value);
  if (v.empty()) return IsaCap::kNative;
  std::string accepted;
  for (const CapName& c : kCaps) {
    if (v == c.name) return c.cap;
    accepted += accepted.empty() ? c.name : std::string(", ") + c.name;
  }
  throw Error("MMINFER_ISA: unknown value '" + std::string(value) + "' (use " + accepted + ")");
}

const char* isa_cap_name(IsaCap cap) {
  for (const CapName& c : kCaps)
    if (c.cap == cap) return c.name;
  return "?";
}

IsaSetting isa_setting_from(const char* mminfer_isa, const char* onednn_max_cpu_isa) {
  if (set(mminfer_isa)) return {parse_isa_cap(mminfer_isa), "MMINFER_ISA"};
  if (set(onednn_max_cpu_isa)) return {onednn_cap(onednn_max_cpu_isa), "ONEDNN_MAX_CPU_ISA"};
  return {};
}

CpuFeatures apply_isa_cap(CpuFeatures f, IsaCap cap) {
  if (cap == IsaCap::kNative) return f;
  f.amx_tile = f.amx_int8 = f.amx_bf16 = false;
  // oneDNN's AVX-512 levels leave AVX-VNNI out as well; keeping ours the same keeps both in step.
  if (cap != IsaCap::kAvx2Vnni) f.avx_vnni = false;
  if (cap == IsaCap::kAvx2 || cap == IsaCap::kAvx2Vnni) f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = false;
  if (cap != IsaCap::kAvx512Vnni && cap != IsaCap::kAvx512Bf16) f.avx512_vnni = false;
  if (cap != IsaCap::kAvx512Bf16) f.avx512_bf16 = false;
  if (!f.avx512f) f.avx512_vnni = f.avx512_bf16 = false;  // EVEX extensions need their base
  return f;
}

const IsaSetting& isa_setting() {
  static const IsaSetting setting = [] {
    const char* onednn = std::getenv("ONEDNN_MAX_CPU_ISA");
    const char* legacy = std::getenv("DNNL_MAX_CPU_ISA");  // oneDNN still reads the old name
    IsaSetting s = isa_setting_from(std::getenv("MMINFER_ISA"), set(onednn) ? onednn : legacy);
    if (s.source == "ONEDNN_MAX_CPU_ISA" && !set(onednn)) s.source = "DNNL_MAX_CPU_ISA";
    return s;
  }();
  return setting;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = apply_isa_cap(detect_cpu_features(), isa_setting().cap);
  return features;
}

std::string cpu_isa_name(const CpuFeatures& f) {
  std::string level, parts;
  auto add = [&](const char* part, bool present) {
    if (present) parts += parts.empty() ? part : std::string(", ") + part;
  };
  if (f.avx512f) {
    bool amx = f.amx_tile && (f.amx_int8 || f.amx_bf16);
    level = amx ? "avx512_amx" : f.avx512_bf16 ? "avx512_bf16" : f.avx512_vnni ? "avx512_vnni" : "avx512";
    std::string subsets = "F";
    if (f.avx512bw) subsets += "/BW";
    if (f.avx512vl) subsets += "/VL";
    if (f.avx512dq) subsets += "/DQ";
    add(("AVX-512 " + subsets).c_str(), true);
    add("VNNI", f.avx512_vnni);
    add("BF16", f.avx512_bf16);
    add("AMX", amx);
  } else {
    level = f.avx_vnni ? "avx2_vnni" : "avx2";
    add("AVX2", f.avx2);
    add("FMA", f.fma);
    add("F16C", f.f16c);
    add("AVX-VNNI", f.avx_vnni);
  }
  return level + " (" + parts + ")";
}

std::string cpu_feature_list(const CpuFeatures& f) {
  std::string out;
  for (const Flag& flag : kFlags)
    if (f.*flag.member) out += out.empty() ? flag.name : std::string(" ") + flag.name;
  return out.empty() ? "(none)" : out;
}

}  // namespace mminfer
