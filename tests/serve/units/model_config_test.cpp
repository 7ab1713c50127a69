#include "serve/model_config.h"

#include <gtest/gtest.h>

namespace mminfer::serve {
namespace {

TEST(ModelConfig, ReadsEveryKeyAndWritesItBack) {
  auto j = nlohmann::json::parse(R"({"max_batch_size": 16, "max_queue_delay_us": 5000, "preferred_batch_size": [8, 16],
    "queue_capacity": 64, "latency_target_ms": 40, "cache": false, "threads": 2, "opt_level": 1,
    "precision": "vision=int8,text=bf16", "keep_fp32": "proj", "min_cosine": 0.995, "instances": 2, "prune_image_tokens": 0.25,
    "max_audio_seconds": 90.5, "max_image_pixels": 4000000, "max_text_bytes": 2048,
    "max_sequences": 12, "context": 1024, "prefill_chunk": 64, "kv_cache": "fp16", "kv_cache_bytes": 1000000,
    "kv_block_size": 32, "merge_tokens": 3})");
  ModelConfig c = ModelConfig::from_json(j, "m/config.json");
  EXPECT_EQ(c.batching.max_batch_size, 16);
  EXPECT_EQ(c.batching.max_queue_delay.count(), 5000);
  EXPECT_EQ(c.batching.capacity, 64u);
  EXPECT_FALSE(c.cache);
  EXPECT_EQ(c.session.threads, 2);
  EXPECT_EQ(c.session.opt_level, 1);
  EXPECT_EQ(c.session.precision.of(Modality::kVision), Precision::kInt8);
  EXPECT_EQ(c.session.precision.of(Modality::kText), Precision::kBf16);
  EXPECT_EQ(c.session.precision.of(Modality::kAudio), Precision::kFp32);
  EXPECT_EQ(c.session.precision.keep_fp32, "proj");
  EXPECT_EQ(c.instances, 2);
  EXPECT_EQ(c.min_cosine, 0.995);
  EXPECT_EQ(c.prune_image_tokens, 0.25);
  EXPECT_EQ(c.session.merge_tokens, 3);
  EXPECT_EQ(c.limits.max_audio_seconds, 90.5);
  EXPECT_EQ(c.limits.max_image_pixels, 4000000);
  EXPECT_EQ(c.limits.max_text_bytes, 2048u);
  EXPECT_EQ(c.generation.max_sequences, 12);
  EXPECT_EQ(c.generation.context, 1024);
  EXPECT_EQ(c.generation.prefill_chunk, 64);
  EXPECT_EQ(c.generation.kv_cache, DType::kFloat16);
  EXPECT_EQ(c.generation.kv_cache_bytes, 1000000);
  EXPECT_EQ(c.generation.kv_block_size, 32);
  ModelConfig again = ModelConfig::from_json(c.to_json(), "again");
  EXPECT_EQ(again.to_json(), c.to_json());
  EXPECT_EQ(again.session.precision.of(Modality::kText), Precision::kBf16);
}

TEST(ModelConfig, DefaultsAreFp32AndEmptyObjectsAreFine) {
  ModelConfig c = ModelConfig::from_json(nlohmann::json::object(), "m/config.json");
  EXPECT_FALSE(c.session.precision.any_below_fp32());
  EXPECT_EQ(c.to_json()["precision"], "fp32");
  EXPECT_EQ(c.min_cosine, 0);
  // Generous for real inputs: ten minutes of audio, 50 megapixels, 100,000 bytes of text.
  EXPECT_EQ(c.limits.max_audio_seconds, 600);
  EXPECT_EQ(c.limits.max_image_pixels, 50'000'000);
  EXPECT_EQ(c.limits.max_text_bytes, 100'000u);
}

TEST(ModelConfig, BadValuesNameTheFileAndTheKey) {
  struct Bad {
    const char* json;
    const char* says;
  } bad[] = {{R"({"precision": "fp8"})", "unknown precision 'fp8'"},
             {R"({"precision": "face=int8"})", "unknown modality 'face'"},
             {R"({"precision": 8})", "precision must be a string"},
             {R"({"keep_fp32": "proj("})", "--keep-fp32: bad regular expression"},
             {R"({"keep_fp32": true})", "keep_fp32 must be a string"},
             {R"({"max_batch_size": 0})", "max_batch_size must be between 1 and 1024"},
             {R"({"max_batch_size": 4, "preferred_batch_size": [8]})", "preferred_batch_size 8 is above max_batch_size"},
             {R"({"opt_level": 3})", "opt_level must be between 0 and 2"},
             {R"({"instances": 0})", "instances must be between 1 and 16"},
             {R"({"min_cosine": 1.5})", "min_cosine must be a number between 0 and 1"},
             {R"({"prune_image_tokens": 1})", "prune_image_tokens must be the share of image tokens dropped"},
             {R"({"prune_image_tokens": -0.5})", "prune_image_tokens must be the share of image tokens dropped"},
             {R"({"min_cosine": "0.99"})", "min_cosine must be a number between 0 and 1"},
             {R"({"precison": "int8"})", "unknown key 'precison'"},
             {R"({"max_audio_seconds": 0})", "max_audio_seconds must be a number of seconds above 0"},
             {R"({"max_audio_seconds": "60"})", "max_audio_seconds must be a number of seconds above 0"},
             {R"({"max_image_pixels": 0})", "max_image_pixels must be between 1 and"},
             {R"({"max_text_bytes": 1.5})", "max_text_bytes must be an integer"},
             {R"({"max_sequences": 0})", "max_sequences must be between 1 and 4096"},
             {R"({"context": 1})", "context must be between 2 and"},
             {R"({"prefill_chunk": -4})", "prefill_chunk must be between 1 and"},
             {R"({"kv_cache_bytes": 0})", "kv_cache_bytes must be between 1 and"},
             {R"({"kv_block_size": 0})", "kv_block_size must be between 1 and 4096"},
             {R"({"merge_tokens": -1})", "merge_tokens must be between 0 and 1024"},
             {R"({"kv_cache": "int4"})", "kv_cache must be \"fp32\", \"fp16\" or \"int8\""},
             {R"([1, 2])", "expected a JSON object"}};
  for (const Bad& b : bad) {
    try {
      ModelConfig::from_json(nlohmann::json::parse(b.json), "m/config.json");
      ADD_FAILURE() << b.json << " was accepted";
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_EQ(msg.rfind("m/config.json: ", 0), 0u) << msg;
      EXPECT_NE(msg.find(b.says), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
}

}  // namespace
}  // namespace mminfer::serve
