// Which numeric precision the parts of a model run in: a choice per modality (which graph
// inputs a node depends on), a regex over node names that keeps nodes in FP32, and default
// exclusions for the layers that quantization hurts most.
#pragma once
#include <array>
#include <string>

#include "mminfer/status.h"

namespace mminfer {

// Modalities are recognised from graph input names (see ir/modality.h); kOther is what no
// recognised input reaches.
enum class Modality { kVision, kText, kAudio, kOther };
constexpr int kNumModalities = 4;
const char* modality_name(Modality m);

// kBf16: weights and activations rounded to bfloat16, float32 accumulation; chosen only where
// the CPU multiplies bfloat16 natively (elsewhere those nodes stay FP32).
// kFp16: weights stored as IEEE half (half the bytes), widened to float32 inside the GEMM;
// activations and accumulation float32.
enum class Precision { kFp32, kInt8, kBf16, kFp16 };
const char* precision_name(Precision p);  // "fp32", "int8", "bf16", "fp16"

struct PrecisionPolicy {
  std::array<Precision, kNumModalities> by_modality{Precision::kFp32, Precision::kFp32, Precision::kFp32,
                                                    Precision::kFp32};
  // ECMAScript regex searched in node names (original names: fused nodes keep them as a prefix)
  // and op types; matching nodes stay FP32. Empty: none.
  std::string keep_fp32;
  // Keep in FP32 the first and the last quantizable layer of each modality and the projection
  // layers (quantizable nodes after which no other one of their modality follows, such as
  // CLIP's visual and text projections).
  bool keep_edges_fp32 = true;
  // Quantize INT8 activations as one tensor (ONNX Runtime's choice) instead of row by row.
  bool int8_per_tensor = false;
  // Weight-only quantization of a generative pipeline's language decoder as it loads: 0 (off), 4
  // or 8 bits. Its constant MatMul weights become MatMulNBits (blocks of decoder_weight_block
  // values along K, a scale and zero point each), except nodes keep_fp32 matches. Only the
  // decoders the generation pipelines load read these; other sessions ignore them.
  int decoder_weight_bits = 0;
  int decoder_weight_block = 32;

  Precision of(Modality m) const { return by_modality[static_cast<int>(m)]; }
  bool any_int8() const;
  bool any_below_fp32() const;  // some modality asks for INT8, BF16 or FP16
};

// Reads "int8" / "bf16" / "fp32" (every modality) or a list such as "vision=int8,text=bf16"
// (modalities: vision, text, audio, other, all); later entries override earlier ones. "fp16"
// is recognised and refused as not available yet. Errors are one line.
Status parse_precision(const std::string& spec, PrecisionPolicy* policy);
// The per-modality choice written back as parse_precision reads it: one word when every modality
// agrees ("fp32"), else "vision=int8,text=bf16,audio=fp32,other=fp32".
std::string precision_spec(const PrecisionPolicy& policy);
// Sets keep_fp32 after checking that `regex` compiles.
Status set_keep_fp32(const std::string& regex, PrecisionPolicy* policy);

}  // namespace mminfer
