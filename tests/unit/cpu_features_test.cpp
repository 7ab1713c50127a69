// MMINFER_ISA: parsing, the cap, and the answer this process gets (ctest runs the whole binary a
// second time under MMINFER_ISA=avx2 on machines with more, as unit_tests_isa_avx2).
#include "core/cpu_features.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "mminfer/status.h"

namespace {

using namespace mminfer;

constexpr IsaCap kAllCaps[] = {IsaCap::kAvx2,       IsaCap::kAvx2Vnni,   IsaCap::kAvx512,
                               IsaCap::kAvx512Vnni, IsaCap::kAvx512Bf16, IsaCap::kNative};

CpuFeatures everything() {
  CpuFeatures f;
  f.avx2 = f.fma = f.f16c = true;
  f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = true;
  f.avx512_vnni = f.avx_vnni = f.avx512_bf16 = true;
  f.amx_tile = f.amx_int8 = f.amx_bf16 = true;
  return f;
}

CpuFeatures avx2_only() {
  CpuFeatures f;
  f.avx2 = f.fma = f.f16c = true;
  return f;
}

TEST(CpuFeatures, ParsesEveryCapByNameInAnyCase) {
  for (IsaCap cap : kAllCaps) EXPECT_EQ(parse_isa_cap(isa_cap_name(cap)), cap);
  EXPECT_EQ(parse_isa_cap("AVX2"), IsaCap::kAvx2);
  EXPECT_EQ(parse_isa_cap("Avx512_VNNI"), IsaCap::kAvx512Vnni);
  EXPECT_EQ(parse_isa_cap(""), IsaCap::kNative);
}

TEST(CpuFeatures, UnknownCapIsOneLineNamingTheValueAndTheChoices) {
  for (const char* bad : {"avx3", "avx512 ", "avx512_core", "sse4"}) {
    try {
      parse_isa_cap(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("MMINFER_ISA"), std::string::npos) << m;
      EXPECT_NE(m.find(std::string("'") + bad + "'"), std::string::npos) << m;
      EXPECT_NE(m.find("avx2, avx2_vnni, avx512, avx512_vnni, avx512_bf16, native"), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  }
}

TEST(CpuFeatures, MminferIsaWinsAndOnednnsVariableCapsOtherwise) {
  IsaSetting s = isa_setting_from("avx2", "avx512_core_bf16");
  EXPECT_EQ(s.cap, IsaCap::kAvx2);
  EXPECT_EQ(s.source, "MMINFER_ISA");
  s = isa_setting_from(nullptr, "AVX512_CORE_VNNI");
  EXPECT_EQ(s.cap, IsaCap::kAvx512Vnni);
  EXPECT_EQ(s.source, "ONEDNN_MAX_CPU_ISA");
  EXPECT_EQ(isa_setting_from("", "avx2_vnni").cap, IsaCap::kAvx2Vnni);
  EXPECT_EQ(isa_setting_from(nullptr, "avx512_core").cap, IsaCap::kAvx512);
  EXPECT_EQ(isa_setting_from(nullptr, "ALL").cap, IsaCap::kNative);
  // Levels below our AVX2 baseline, and names oneDNN may not know, keep to the safe side.
  EXPECT_EQ(isa_setting_from(nullptr, "SSE41").cap, IsaCap::kAvx2);
  EXPECT_EQ(isa_setting_from(nullptr, "whatever").cap, IsaCap::kAvx2);
  s = isa_setting_from(nullptr, nullptr);
  EXPECT_EQ(s.cap, IsaCap::kNative);
  EXPECT_TRUE(s.source.empty());
  EXPECT_THROW(isa_setting_from("avx3", nullptr), Error);
}

TEST(CpuFeatures, EachCapLeavesOutWhatIsAboveIt) {
  const CpuFeatures all = everything();
  CpuFeatures f = apply_isa_cap(all, IsaCap::kAvx2);
  EXPECT_EQ(f, avx2_only());
  EXPECT_EQ(cpu_isa_name(f), "avx2 (AVX2, FMA, F16C)");

  f = apply_isa_cap(all, IsaCap::kAvx2Vnni);
  CpuFeatures want = avx2_only();
  want.avx_vnni = true;
  EXPECT_EQ(f, want);
  EXPECT_EQ(cpu_isa_name(f), "avx2_vnni (AVX2, FMA, F16C, AVX-VNNI)");

  f = apply_isa_cap(all, IsaCap::kAvx512);
  want = avx2_only();
  want.avx512f = want.avx512bw = want.avx512vl = want.avx512dq = true;
  EXPECT_EQ(f, want);
  EXPECT_FALSE(f.vnni());
  EXPECT_EQ(cpu_isa_name(f), "avx512 (AVX-512 F/BW/VL/DQ)");

  f = apply_isa_cap(all, IsaCap::kAvx512Vnni);
  want.avx512_vnni = true;
  EXPECT_EQ(f, want);
  EXPECT_EQ(cpu_isa_name(f), "avx512_vnni (AVX-512 F/BW/VL/DQ, VNNI)");

  f = apply_isa_cap(all, IsaCap::kAvx512Bf16);
  want.avx512_bf16 = true;
  EXPECT_EQ(f, want);
  EXPECT_EQ(cpu_isa_name(f), "avx512_bf16 (AVX-512 F/BW/VL/DQ, VNNI, BF16)");

  EXPECT_EQ(apply_isa_cap(all, IsaCap::kNative), all);
  EXPECT_EQ(cpu_isa_name(all), "avx512_amx (AVX-512 F/BW/VL/DQ, VNNI, BF16, AMX)");
}

TEST(CpuFeatures, CapNeverAddsWhatTheCpuLacks) {
  for (IsaCap cap : kAllCaps) EXPECT_EQ(apply_isa_cap(avx2_only(), cap), avx2_only()) << isa_cap_name(cap);
  CpuFeatures vnni_without_avx512 = avx2_only();
  vnni_without_avx512.avx_vnni = true;
  EXPECT_FALSE(apply_isa_cap(vnni_without_avx512, IsaCap::kAvx512Bf16).avx512f);
}

TEST(CpuFeatures, FeatureListNamesTheSetFlagsInOrder) {
  CpuFeatures f = avx2_only();
  f.avx512_bf16 = true;
  EXPECT_EQ(cpu_feature_list(f), "avx2 fma f16c avx512_bf16");
  EXPECT_EQ(cpu_feature_list(CpuFeatures{}), "(none)");
}

// The answer every kernel reads: this CPU under this process's cap. Under MMINFER_ISA=avx2 (the
// unit_tests_isa_avx2 ctest) nothing above AVX2 may be left, whatever the machine has.
TEST(CpuFeatures, ProcessAnswerIsThisCpuUnderTheEnvironmentsCap) {
  const CpuFeatures& f = cpu_features();
  EXPECT_EQ(f, apply_isa_cap(detect_cpu_features(), isa_setting().cap));
  EXPECT_TRUE(f.avx2 && f.fma && f.f16c) << "the build's x86-64-v3 baseline";
  const char* env = std::getenv("MMINFER_ISA");
  if (env && std::string(env) == "avx2") {
    EXPECT_EQ(isa_setting().cap, IsaCap::kAvx2);
    EXPECT_FALSE(f.avx512f);
    EXPECT_FALSE(f.vnni());
    EXPECT_FALSE(f.avx512_bf16);
    EXPECT_EQ(cpu_isa_name(f).rfind("avx2 (", 0), 0u) << cpu_isa_name(f);
  } else if (isa_setting().source.empty()) {
    EXPECT_EQ(f, detect_cpu_features());
  }
}

}  // namespace
