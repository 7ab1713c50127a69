// oneDNN runs at the level cpu_features() reports, so both sides agree on VNNI (the INT8 weight
// range depends on it) and on AVX-512, under any MMINFER_ISA.
#include "kernels/cpu/gemm/dnnl_isa.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "kernels/cpu/quantization/conv_int8.h"
#include "kernels/cpu/quantization/int8_gemm.h"

namespace {

using namespace mminfer;
using namespace mminfer::kernels;
using ci = dnnl::cpu_isa;

TEST(DnnlIsa, EachCapHasItsOneDnnLevel) {
  EXPECT_EQ(dnnl_isa_for(IsaCap::kAvx2), ci::avx2);
  EXPECT_EQ(dnnl_isa_for(IsaCap::kAvx2Vnni), ci::avx2_vnni);
  EXPECT_EQ(dnnl_isa_for(IsaCap::kAvx512), ci::avx512_core);
  EXPECT_EQ(dnnl_isa_for(IsaCap::kAvx512Vnni), ci::avx512_core_vnni);
  EXPECT_EQ(dnnl_isa_for(IsaCap::kAvx512Bf16), ci::avx512_core_bf16);
  EXPECT_EQ(dnnl_isa_for(IsaCap::kNative), ci::all);
  EXPECT_STREQ(dnnl_isa_name(ci::avx512_core_bf16), "avx512_core_bf16");
  EXPECT_STREQ(dnnl_isa_name(ci::avx2), "avx2");
}

TEST(DnnlIsa, OneDnnAndOurKernelsTakeTheSamePath) {
  ci isa = dnnl_effective_isa();
  bool dnnl_vnni = isa == ci::avx2_vnni || isa == ci::avx512_core_vnni || isa == ci::avx512_core_bf16 ||
                   isa == ci::avx512_core_amx;
  bool dnnl_avx512 = isa == ci::avx512_core || isa == ci::avx512_core_vnni || isa == ci::avx512_core_bf16 ||
                     isa == ci::avx512_core_amx;
  const CpuFeatures& f = cpu_features();
  EXPECT_EQ(dnnl_vnni, f.vnni()) << dnnl_isa_name(isa) << " vs " << cpu_isa_name(f);
  EXPECT_EQ(dnnl_avx512, f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq) << dnnl_isa_name(isa);
  EXPECT_EQ(Int8Gemm::weight_limit(), dnnl_vnni ? 127 : 63);
  EXPECT_EQ(Int8Conv::weight_limit(), dnnl_vnni ? 127 : 63);
  const char* env = std::getenv("MMINFER_ISA");
  if (env && std::string(env) == "avx2") {
    EXPECT_EQ(isa, ci::avx2) << dnnl_isa_name(isa);
  }
}

}  // namespace
