#include "onnx/contrib_schemas.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <mutex>

namespace mminfer::onnx_io {

namespace {

using onnx::AttributeProto;
using onnx::InferenceContext;
using onnx::OpSchema;

const char* const kMicrosoft = "com.microsoft";
const std::vector<std::string> kFloats = {"tensor(float)", "tensor(float16)", "tensor(double)", "tensor(bfloat16)"};

// Output `o` gets input 0's shape with the dims from `axis` on set to 1 (per-row statistics).
void row_stat_output(InferenceContext& ctx, size_t o, int64_t axis) {
  if (ctx.getNumOutputs() <= o) return;
  onnx::updateOutputElemType(ctx, o, onnx::TensorProto::FLOAT);
  if (!onnx::hasInputShape(ctx, 0)) return;
  const auto& in = ctx.getInputType(0)->tensor_type().shape();
  int64_t rank = in.dim_size();
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return;  // the kernel reports a bad axis
  auto* shape = ctx.getOutputType(o)->mutable_tensor_type()->mutable_shape();
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis)
      *shape->add_dim() = in.dim(static_cast<int>(d));
    else
      shape->add_dim()->set_dim_value(1);
  }
}

void like_input(InferenceContext& ctx, size_t input, size_t o) {
  if (ctx.getNumOutputs() <= o) return;
  onnx::propagateElemTypeFromInputToOutput(ctx, input, o);
  if (onnx::hasInputShape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, o);
}

OpSchema simplified_layer_norm() {
  OpSchema s("SimplifiedLayerNormalization", __FILE__, __LINE__);
  s.SetDomain("").SinceVersion(1)
      .Attr("axis", "first normalized axis", AttributeProto::INT, static_cast<int64_t>(-1))
      .Attr("epsilon", "added to the mean square", AttributeProto::FLOAT, 1e-5f)
      .Attr("stash_type", "statistics type", AttributeProto::INT, static_cast<int64_t>(1))
      .Input(0, "X", "", "T")
      .Input(1, "scale", "", "V")
      .Output(0, "Y", "", "V")
      .Output(1, "inv_std_var", "", "U", OpSchema::Optional)
      .TypeConstraint("T", kFloats, "")
      .TypeConstraint("U", {"tensor(float)", "tensor(double)"}, "")
      .TypeConstraint("V", kFloats, "")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
        // Y takes scale's dtype and X's shape.
        onnx::propagateElemTypeFromInputToOutput(ctx, 1, 0);
        if (onnx::hasInputShape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
        row_stat_output(ctx, 1, onnx::getAttribute(ctx, "axis", static_cast<int64_t>(-1)));
      });
  return s;
}

OpSchema skip_layer_norm(bool simplified) {
  OpSchema s(simplified ? "SkipSimplifiedLayerNormalization" : "SkipLayerNormalization", __FILE__, __LINE__);
  s.SetDomain(kMicrosoft).SinceVersion(1)
      .Attr("epsilon", "added to the variance", AttributeProto::FLOAT, 1e-12f)
      .Input(0, "input", "", "T")
      .Input(1, "skip", "", "T")
      .Input(2, "gamma", "", "T");
  if (simplified) {
    s.Input(3, "bias", "", "T", OpSchema::Optional);
  } else {
    s.Input(3, "beta", "", "T", OpSchema::Optional).Input(4, "bias", "", "T", OpSchema::Optional);
  }
  s.Output(0, "output", "", "T")
      .Output(1, "mean", "", "U", OpSchema::Optional)
      .Output(2, "inv_std_var", "", "U", OpSchema::Optional)
      .Output(3, "input_skip_bias_sum", "", "T", OpSchema::Optional)
      .TypeConstraint("T", kFloats, "")
      .TypeConstraint("U", {"tensor(float)"}, "")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
        like_input(ctx, 0, 0);
        row_stat_output(ctx, 1, -1);
        row_stat_output(ctx, 2, -1);
        like_input(ctx, 0, 3);
      });
  return s;
}

OpSchema rotary_embedding() {
  OpSchema s("RotaryEmbedding", __FILE__, __LINE__);
  s.SetDomain(kMicrosoft).SinceVersion(1)
      .Attr("interleaved", "pairs are adjacent channels", AttributeProto::INT, static_cast<int64_t>(0))
      .Attr("num_heads", "heads of a 3D input", AttributeProto::INT, static_cast<int64_t>(0))
      .Attr("rotary_embedding_dim", "rotated channels per head", AttributeProto::INT, static_cast<int64_t>(0))
      .Attr("scale", "cache scale", AttributeProto::FLOAT, 1.0f)
      .Attr("is_packed_batching", "packed sequences", AttributeProto::INT, static_cast<int64_t>(0))
      .Input(0, "input", "", "T")
      .Input(1, "position_ids", "", "M")
      .Input(2, "cos_cache", "", "T")
      .Input(3, "sin_cache", "", "T")
      .Output(0, "output", "", "T")
      .TypeConstraint("T", kFloats, "")
      .TypeConstraint("M", {"tensor(int64)"}, "")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { like_input(ctx, 0, 0); });
  return s;
}

// Weight-only quantized MatMul: Y is A's dtype, A's shape with the last dimension N. Typing it here
// lets ONNX's inference (and its data propagation) carry on through the layers after it.
OpSchema matmul_nbits() {
  OpSchema s("MatMulNBits", __FILE__, __LINE__);
  s.SetDomain(kMicrosoft).SinceVersion(1)
      .Attr("K", "input features", AttributeProto::INT)
      .Attr("N", "output features", AttributeProto::INT)
      .Attr("bits", "bits per weight", AttributeProto::INT, static_cast<int64_t>(4))
      .Attr("block_size", "weights per scale", AttributeProto::INT)
      .Attr("accuracy_level", "activation precision allowed", AttributeProto::INT, static_cast<int64_t>(0))
      .Input(0, "A", "", "T1")
      .Input(1, "B", "", "T2")
      .Input(2, "scales", "", "T1")
      .Input(3, "zero_points", "", "T3", OpSchema::Optional)
      .Input(4, "g_idx", "", "T4", OpSchema::Optional)
      .Input(5, "bias", "", "T1", OpSchema::Optional)
      .Output(0, "Y", "", "T1")
      .TypeConstraint("T1", kFloats, "")
      .TypeConstraint("T2", {"tensor(uint8)", "tensor(int32)"}, "")
      .TypeConstraint("T3", {"tensor(uint8)", "tensor(int32)", "tensor(float)", "tensor(float16)", "tensor(bfloat16)"}, "")
      .TypeConstraint("T4", {"tensor(int32)"}, "")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
        onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
        if (!onnx::hasInputShape(ctx, 0)) return;
        const auto& a = ctx.getInputType(0)->tensor_type().shape();
        if (a.dim_size() == 0) return;
        auto* y = ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape();
        for (int d = 0; d + 1 < a.dim_size(); ++d) *y->add_dim() = a.dim(d);
        y->add_dim()->set_dim_value(onnx::getAttribute(ctx, "N", static_cast<int64_t>(0)));
      });
  return s;
}

// Attention over a KV cache with grouped heads (onnxruntime-genai's decoders). Typed here so that
// ONNX's inference carries dtypes and shapes on through the layers after the first attention:
// output is [B, S, num_heads * head_size] in the query's dtype; the presents take its dtype.
OpSchema group_query_attention() {
  OpSchema s("GroupQueryAttention", __FILE__, __LINE__);
  s.SetDomain(kMicrosoft).SinceVersion(1)
      .AllowUncheckedAttributes()
      .Attr("num_heads", "query heads", AttributeProto::INT)
      .Attr("kv_num_heads", "key and value heads", AttributeProto::INT)
      .Input(0, "query", "", "T")
      .Input(1, "key", "", "T", OpSchema::Optional)
      .Input(2, "value", "", "T", OpSchema::Optional)
      .Input(3, "past_key", "", "T", OpSchema::Optional)
      .Input(4, "past_value", "", "T", OpSchema::Optional)
      .Input(5, "seqlens_k", "", "M")
      .Input(6, "total_sequence_length", "", "M")
      .Input(7, "cos_cache", "", "T", OpSchema::Optional)
      .Input(8, "sin_cache", "", "T", OpSchema::Optional)
      .Input(9, "position_ids", "", "P", OpSchema::Optional)
      .Input(10, "attention_bias", "", "T", OpSchema::Optional)
      .Input(11, "head_sink", "", "T", OpSchema::Optional)
      .Output(0, "output", "", "T")
      .Output(1, "present_key", "", "T", OpSchema::Optional)
      .Output(2, "present_value", "", "T", OpSchema::Optional)
      .Output(3, "output_qk", "", "T", OpSchema::Optional)
      .TypeConstraint("T", kFloats, "")
      .TypeConstraint("M", {"tensor(int32)"}, "")
      .TypeConstraint("P", {"tensor(int64)"}, "")
      .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
        for (size_t o = 0; o < ctx.getNumOutputs() && o < 3; ++o) onnx::propagateElemTypeFromInputToOutput(ctx, 0, o);
        if (!onnx::hasInputShape(ctx, 0)) return;
        const auto& q = ctx.getInputType(0)->tensor_type().shape();
        if (q.dim_size() != 3 || !q.dim(2).has_dim_value()) return;
        const int64_t heads = onnx::getAttribute(ctx, "num_heads", static_cast<int64_t>(0));
        const int64_t kv_heads = onnx::getAttribute(ctx, "kv_num_heads", static_cast<int64_t>(0));
        const int64_t width = q.dim(2).dim_value();
        const bool packed = ctx.getNumInputs() < 2 || ctx.getInputType(1) == nullptr;  // query holds q, k and v side by side
        const int64_t parts = packed ? heads + 2 * kv_heads : heads;
        if (heads <= 0 || kv_heads <= 0 || width % parts != 0) return;  // the kernel reports it
        auto* y = ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape();
        *y->add_dim() = q.dim(0);
        *y->add_dim() = q.dim(1);
        y->add_dim()->set_dim_value(width / parts * heads);
      });
  return s;
}

}  // namespace

void register_contrib_schemas() {
  static std::once_flag once;
  std::call_once(once, [] {
    onnx::OpSchemaRegistry::Instance();  // the standard schemas first
    auto& ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance();
    if (!ranges.Map().count(kMicrosoft)) ranges.AddDomainToVersion(kMicrosoft, 1, 1);
    for (OpSchema s : {simplified_layer_norm(), skip_layer_norm(false), skip_layer_norm(true), rotary_embedding(),
                        matmul_nbits(), group_query_attention()}) {
      if (onnx::OpSchemaRegistry::Schema(s.Name(), s.domain())) continue;  // a newer onnx knows it
      onnx::OpSchemaRegistry::OpSchemaRegisterOnce reg(s);
    }
  });
}

}  // namespace mminfer::onnx_io
