// The runtime-owned KV cache against torch's own generation loop (tools/make_generative_models.py
// writes each case's prompts, greedy tokens and every step's logits): teacher-forced on torch's
// tokens, each step's logits within 1e-4 of the largest, and their argmax is torch's token. Batch 2
// decodes sequences of different lengths in one step. Then the whole loop (generate::decode) makes
// torch's tokens by itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "generate/decode_loop.h"
#include "generate/encoder_decoder_model.h"
#include "runtime/cached_decoder.h"

namespace mminfer {
namespace {

const std::string kModels = MMINFER_GENERATIVE_MODELS;

nlohmann::json reference(const std::string& model) {
  std::ifstream in(kModels + "/" + model + "/reference/reference.json");
  return nlohmann::json::parse(in);
}

// max |a - b| over the row, relative to max |b|.
double relative_error(const float* a, const float* b, int64_t n) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return diff / scale;
}

// Teacher-forced on torch's tokens: the worst step's relative logit error over every case.
// `argmax_misses`, when given, counts the steps whose argmax is not torch's token.
double worst_logit_error(runtime::CachedDecoder& decoder, bool check_argmax, int* argmax_misses = nullptr) {
  double worst = 0;
  const auto ref = reference("llama-tiny");  // kept alive for the loop (a temporary's member would dangle)
  for (const auto& c : ref["cases"]) {
    SCOPED_TRACE(c["case"].get<std::string>());
    auto prompts = c["prompt_ids"].get<std::vector<std::vector<int64_t>>>();
    auto tokens = c["tokens"].get<std::vector<std::vector<int64_t>>>();
    Tensor logits_ref = read_npy(kModels + "/llama-tiny/reference/" + c["files"]["logits"].get<std::string>());
    const int64_t n = static_cast<int64_t>(prompts.size()), steps = logits_ref.dim(0), vocab = logits_ref.dim(2);
    runtime::KvCache cache = decoder.make_cache(n, 128);
    for (int64_t step = 0; step < steps; ++step) {
      Tensor logits = Tensor::empty(DType::kFloat32, {n, vocab});
      if (step == 0) {  // each prompt prefilled in its own row
        for (int64_t r = 0; r < n; ++r) {
          Tensor ids = Tensor::empty(DType::kInt64, {1, static_cast<int64_t>(prompts[r].size())});
          std::copy(prompts[r].begin(), prompts[r].end(), ids.data<int64_t>());
          Tensor row = decoder.step(cache, r, "input_ids", ids);
          std::copy(row.data<float>(), row.data<float>() + vocab, logits.data<float>() + r * vocab);
        }
      } else {
        Tensor ids = Tensor::empty(DType::kInt64, {n, 1});
        for (int64_t r = 0; r < n; ++r) ids.data<int64_t>()[r] = tokens[r][step - 1];
        logits = decoder.step(cache, 0, "input_ids", ids);
      }
      for (int64_t r = 0; r < n; ++r) {
        const float* got = logits.data<float>() + r * vocab;
        const float* want = logits_ref.data<float>() + (step * n + r) * vocab;
        worst = std::max(worst, relative_error(got, want, vocab));
        if (check_argmax) {
          EXPECT_EQ(std::max_element(got, got + vocab) - got, tokens[r][step]) << "row " << r << " step " << step;
        }
        if (argmax_misses) *argmax_misses += std::max_element(got, got + vocab) - got != tokens[r][step];
      }
    }
    for (int64_t r = 0; r < n; ++r) EXPECT_EQ(cache.length(r), static_cast<int64_t>(prompts[r].size()) + steps - 1);
  }
  return worst;
}

TEST(CachedDecoderVsTorch, LlamaTinyLogitsEveryStep) {
  SessionOptions options;
  options.threads = 1;
  runtime::CachedDecoder decoder(kModels + "/llama-tiny/model.onnx", options);
  double err = worst_logit_error(decoder, true);
  RecordProperty("worst_relative_logit_error", std::to_string(err));
  EXPECT_LE(err, 1e-4);
}

// A float16 cache: half the bytes, keys and values rounded to 11 bits. Against torch's float32
// logits the error stays near float16's resolution (measured 2.5e-3 relative at worst; FP32: 2e-6).
TEST(CachedDecoderVsTorch, LlamaTinyHalfCache) {
  SessionOptions options;
  options.threads = 1;
  runtime::CachedDecoder full(kModels + "/llama-tiny/model.onnx", options);
  runtime::CachedDecoder half(kModels + "/llama-tiny/model.onnx", options, DType::kFloat16);
  EXPECT_EQ(half.make_cache(2, 128).bytes() * 2, full.make_cache(2, 128).bytes());
  double err = worst_logit_error(half, false);
  RecordProperty("worst_relative_logit_error", std::to_string(err));
  EXPECT_GT(err, 1e-6);  // the cache really is rounded
  EXPECT_LE(err, 5e-3);
}

// An int8 cache: codes and a scale per position and KV head, 5/16 of the float32 cache's bytes
// (head size 16 here: 20 bytes a row against 64). Against torch's float32 logits the worst step
// measured 4.3e-2 relative (the float16 cache: 2.5e-3; this random model's logits are flat, so
// its relative errors are large), and 6 of the 256 teacher-forced steps' argmax differ from torch's.
TEST(CachedDecoderVsTorch, LlamaTinyInt8Cache) {
  SessionOptions options;
  options.threads = 1;
  runtime::CachedDecoder full(kModels + "/llama-tiny/model.onnx", options);
  runtime::CachedDecoder int8(kModels + "/llama-tiny/model.onnx", options, DType::kInt8);
  EXPECT_EQ(int8.make_cache(2, 128).bytes() * 16, full.make_cache(2, 128).bytes() * 5);
  int misses = 0;
  double err = worst_logit_error(int8, false, &misses);
  RecordProperty("worst_relative_logit_error", std::to_string(err));
  RecordProperty("argmax_misses", misses);
  std::printf("int8 KV cache: worst relative logit error %.3g, %d argmax misses\n", err, misses);
  EXPECT_GT(err, 1e-4);  // the cache really is quantized
  EXPECT_LE(err, 1e-1);
}

// The same weights in onnxruntime-genai's form (GroupQueryAttention bound in place, rotary keys
// written after rotation): every cache precision, against torch's logits. Measured: float32
// 2.4e-6, float16 2.5e-3, int8 4.3e-2 relative at worst (as the Optimum form's).
TEST(CachedDecoderVsTorch, GroupQueryAttentionFolderTakesEveryCachePrecision) {
  SessionOptions options;
  options.threads = 1;
  const std::string path = kModels + "/llama-tiny-contrib-fp32/model.onnx";
  const std::pair<DType, double> bounds[] = {{DType::kFloat32, 1e-4}, {DType::kFloat16, 1e-2}, {DType::kInt8, 1e-1}};
  size_t full_bytes = 0;
  for (const auto& [dtype, bound] : bounds) {
    SCOPED_TRACE(dtype_name(dtype));
    runtime::CachedDecoder decoder(path, options, dtype);
    size_t bytes = decoder.make_cache(2, 128).bytes();
    if (dtype == DType::kFloat32) full_bytes = bytes;
    else EXPECT_EQ(bytes * 16, full_bytes * (dtype == DType::kFloat16 ? 8 : 5));  // head size 16: 32 or 20 bytes a row, not 64
    int misses = 0;
    double err = worst_logit_error(decoder, dtype == DType::kFloat32, &misses);
    std::printf("GroupQueryAttention, %s KV cache: worst relative logit error %.3g, %d argmax misses\n", dtype_name(dtype), err, misses);
    EXPECT_LE(err, bound);
    if (dtype != DType::kFloat32) {
      EXPECT_GT(err, 1e-5);  // the cache really is narrowed
    }
  }
}

TEST(CachedDecoderVsTorch, LlamaTinyGreedyLoop) {
  SessionOptions options;
  options.threads = 2;
  runtime::CachedDecoder decoder(kModels + "/llama-tiny/model.onnx", options);
  const auto ref = reference("llama-tiny");
  const auto& c = ref["cases"][1];  // two prompts of different lengths
  generate::DecodeRequest request;
  request.prompts = c["prompt_ids"].get<std::vector<std::vector<int64_t>>>();
  request.config.max_new_tokens = 64;
  auto detok = [](std::span<const generate::TokenId> ids) { return std::string(ids.size(), 'x'); };
  generate::DecodeTimings t;
  generate::DecoderOnlyModel model(decoder);
  auto out = generate::decode(model, request, detok, &t);
  auto tokens = c["tokens"].get<std::vector<std::vector<int64_t>>>();
  ASSERT_EQ(out.size(), 2u);
  for (size_t r = 0; r < 2; ++r) EXPECT_EQ(out[r].tokens, tokens[r]);
  EXPECT_EQ(t.decode_steps, 63u);
  EXPECT_EQ(t.new_tokens, 128u);
  // The output projection ran in the runtime's greedy form for every token (two prefills, 63
  // steps of two rows), reading few FP32 logits: torch's tokens above came from its bounds.
  ASSERT_TRUE(decoder.runs_logits_head());
  const int64_t vocab = 659;  // llama-tiny's
  EXPECT_EQ(decoder.greedy_rows(), 128);
  std::printf("greedy head: %lld exact logits over %lld rows of %lld\n", static_cast<long long>(decoder.greedy_exact_logits()),
              static_cast<long long>(decoder.greedy_rows()), static_cast<long long>(vocab));
  EXPECT_LT(decoder.greedy_exact_logits(), decoder.greedy_rows() * vocab / 10);
}

// Whisper-shaped: the encoder once, decoder_model.onnx for the forced prompt, then
// decoder_with_past_model.onnx with the cache bound (its positions come from the past's length).
// Teacher-forced Whisper steps with a cache of `dtype`: the worst relative logit error over every
// case; float32 also checks each step's argmax and then the greedy loop's tokens.
double whisper_worst_logit_error(DType dtype) {
  const bool exact = dtype == DType::kFloat32;
  const std::string dir = kModels + "/whisper-tiny-test";
  SessionOptions options;
  options.threads = 1;
  std::unique_ptr<Session> encoder;
  EXPECT_TRUE(Session::load(dir + "/encoder_model.onnx", options, &encoder).is_ok());
  generate::EncoderDecoderModel model(dir + "/decoder_model.onnx", dir + "/decoder_with_past_model.onnx", options, dtype);
  const auto ref = reference("whisper-tiny-test");
  double worst = 0;
  const auto prompt = ref["prompt_ids"].get<std::vector<int64_t>>();
  for (const auto& c : ref["cases"]) {
    SCOPED_TRACE(c["case"].get<std::string>());
    Tensor features = read_npy(dir + "/reference/" + c["files"]["input_features"].get<std::string>());
    std::vector<Tensor> states;
    EXPECT_TRUE(encoder->run({{"input_features", features}}, &states).is_ok());
    auto tokens = c["tokens"].get<std::vector<std::vector<int64_t>>>();
    Tensor logits_ref = read_npy(dir + "/reference/" + c["files"]["logits"].get<std::string>());
    const int64_t n = features.dim(0), steps = logits_ref.dim(0), vocab = logits_ref.dim(2);
    model.set_encoder_states(states[0]);
    model.start(n, 128);
    for (int64_t step = 0; step < steps; ++step) {
      Tensor logits = Tensor::empty(DType::kFloat32, {n, vocab});
      if (step == 0) {
        for (int64_t r = 0; r < n; ++r) {
          Tensor row = model.prefill(r, prompt);
          std::copy(row.data<float>(), row.data<float>() + vocab, logits.data<float>() + r * vocab);
        }
      } else {
        Tensor ids = Tensor::empty(DType::kInt64, {n, 1});
        for (int64_t r = 0; r < n; ++r) ids.data<int64_t>()[r] = tokens[r][step - 1];
        logits = model.step(0, ids);
      }
      for (int64_t r = 0; r < n; ++r) {
        const float* got = logits.data<float>() + r * vocab;
        const float* want = logits_ref.data<float>() + (step * n + r) * vocab;
        worst = std::max(worst, relative_error(got, want, vocab));
        if (exact) {
          EXPECT_EQ(std::max_element(got, got + vocab) - got, tokens[r][step]) << "row " << r << " step " << step;
        }
      }
    }
    if (!exact) continue;
    generate::DecodeRequest request;
    request.prompts.assign(n, prompt);
    request.config.max_new_tokens = 64;
    auto detok = [](std::span<const generate::TokenId> ids) { return std::string(ids.size(), 'x'); };
    auto out = generate::decode(model, request, detok);
    for (int64_t r = 0; r < n; ++r) EXPECT_EQ(out[r].tokens, tokens[r]);
  }
  return worst;
}

TEST(CachedDecoderVsTorch, WhisperTestLogitsAndGreedyLoop) { EXPECT_LE(whisper_worst_logit_error(DType::kFloat32), 1e-4); }

// The int8 cache on the Whisper-shaped replica (the self-attention cache; the first step's
// present rows quantized as they are written): measured 3.4e-2 relative at worst.
TEST(CachedDecoderVsTorch, WhisperTestInt8Cache) {
  double err = whisper_worst_logit_error(DType::kInt8);
  RecordProperty("worst_relative_logit_error", std::to_string(err));
  std::printf("int8 KV cache: worst relative logit error %.3g\n", err);
  EXPECT_GT(err, 1e-4);
  EXPECT_LE(err, 1e-1);
}

TEST(CachedDecoderVsTorch, ContextOverflowIsAnError) {
  SessionOptions options;
  runtime::CachedDecoder decoder(kModels + "/llama-tiny/model.onnx", options);
  runtime::KvCache cache = decoder.make_cache(1, 8);
  Tensor ids = Tensor::empty(DType::kInt64, {1, 9});
  try {
    decoder.step(cache, 0, "input_ids", ids);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "the sequence needs 9 positions, more than the context of 8");
  }
  EXPECT_EQ(cache.length(0), 0);
}

}  // namespace
}  // namespace mminfer
