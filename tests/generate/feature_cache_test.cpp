// The encoder-feature cache: a repeated input goes through the encoder once, within a call and
// across calls; the cache stays within its bytes; a Whisper clip's repeated window is encoded once
// and transcribes as it does without the cache.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "pipelines/generation/feature_cache.h"
#include "pipelines/generation/speech_to_text.h"

namespace mminfer::pipelines {
namespace {

// A fake encoder: row r of its batch holds the item's index times 10, in 4 floats.
Tensor fake_encode(const std::vector<size_t>& items, std::vector<size_t>* seen) {
  Tensor batch = Tensor::empty(DType::kFloat32, {static_cast<int64_t>(items.size()), 2, 2});
  for (size_t r = 0; r < items.size(); ++r) {
    for (int k = 0; k < 4; ++k) batch.data<float>()[r * 4 + k] = static_cast<float>(items[r] * 10 + k);
    seen->push_back(items[r]);
  }
  return batch;
}

TEST(FeatureCache, RepeatedInputsEncodeOnce) {
  EncoderFeatures f("model-a");
  std::vector<size_t> seen;
  auto encode = [&](const std::vector<size_t>& items) { return fake_encode(items, &seen); };
  std::vector<Tensor> rows = f.rows("image", {"x", "y", "x"}, encode);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(seen, (std::vector<size_t>{0, 1}));  // "x" once, "y" once
  EXPECT_EQ(rows[0].shape(), (Shape{1, 2, 2}));
  EXPECT_EQ(rows[1].data<float>()[0], 10.0f);
  EXPECT_EQ(rows[2].data<float>()[3], rows[0].data<float>()[3]);
  EXPECT_EQ(f.counts().encoded, 2u);
  EXPECT_EQ(f.counts().reused, 1u);

  // A later call: "y" from the cache, "z" encoded alone, as item 1 of this call.
  seen.clear();
  rows = f.rows("image", {"y", "z"}, encode);
  EXPECT_EQ(seen, (std::vector<size_t>{1}));
  EXPECT_EQ(rows[0].data<float>()[0], 10.0f);
  EXPECT_EQ(rows[1].data<float>()[0], 10.0f);
  EXPECT_EQ(f.counts().encoded, 3u);
  EXPECT_EQ(f.counts().reused, 2u);
  Tensor batch = stack_rows(rows);
  EXPECT_EQ(batch.shape(), (Shape{2, 2, 2}));
}

TEST(FeatureCache, SharedCacheKeysByModelAndModality) {
  auto shared = std::make_shared<FeatureCache>();
  EncoderFeatures a("model-a"), b("model-b"), a2("model-a");
  for (EncoderFeatures* f : {&a, &b, &a2}) f->set_cache(shared);
  std::vector<size_t> seen;
  auto encode = [&](const std::vector<size_t>& items) { return fake_encode(items, &seen); };
  a.rows("image", {"x"}, encode);
  b.rows("image", {"x"}, encode);   // another model: encoded again
  a2.rows("image", {"x"}, encode);  // the same model's cache entry
  a2.rows("audio", {"x"}, encode);  // another modality: encoded again
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ(a2.counts().encoded, 1u);
  EXPECT_EQ(a2.counts().reused, 1u);
}

TEST(FeatureCache, WithoutCacheEveryCallEncodes) {
  EncoderFeatures f("m");
  f.set_cache_bytes(0);
  std::vector<size_t> seen;
  auto encode = [&](const std::vector<size_t>& items) { return fake_encode(items, &seen); };
  f.rows("image", {"x", "x"}, encode);
  f.rows("image", {"x"}, encode);
  EXPECT_EQ(f.counts().encoded, 3u);
}

TEST(FeatureCache, StaysWithinItsBytes) {
  auto cache = std::make_shared<FeatureCache>(1000);  // two 400-byte tensors with keys do not fit
  Tensor t = Tensor::empty(DType::kFloat32, {1, 100});
  for (int i = 0; i < 100; ++i) t.data<float>()[i] = static_cast<float>(i);
  for (std::string d : {"a", "b", "c"}) cache->put(serve::CacheKey{d, "image", "m", "", "feature"}, t);
  serve::CacheStats s = cache->stats();
  EXPECT_LE(s.bytes, 1000u);
  EXPECT_GE(s.evictions, 1u);
  EXPECT_FALSE(cache->get(serve::CacheKey{"a", "image", "m", "", "feature"}).has_value());  // least recently used
  auto c = cache->get(serve::CacheKey{"c", "image", "m", "", "feature"});
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->shape(), t.shape());
  EXPECT_EQ(c->data<float>()[99], 99.0f);
}

TEST(FeatureCache, DigestsNameContentAndShape) {
  Tensor a = Tensor::empty(DType::kFloat32, {1, 4}), b = Tensor::empty(DType::kFloat32, {2, 2});
  for (int i = 0; i < 4; ++i) a.data<float>()[i] = b.data<float>()[i] = static_cast<float>(i);
  EXPECT_NE(content_digest(a), content_digest(b));
  std::vector<float> s = {1, 2, 3};
  EXPECT_EQ(content_digest(std::span<const float>(s)), content_digest(std::span<const float>(s)));
  EXPECT_NE(content_digest(std::span<const float>(s)), content_digest(std::span<const float>(s.data(), 2)));
  EXPECT_EQ(content_digest(a).size(), 64u);
}

// whisper-tiny-test (tools/make_generative_models.py): windows of 1 s at 16 kHz.
TEST(FeatureCacheOnModels, WhisperRepeatedWindowEncodedOnce) {
  const std::string dir = std::string(MMINFER_GENERATIVE_MODELS) + "/whisper-tiny-test";
  SpeechToText cached(dir, SessionOptions{}), plain(dir, SessionOptions{});
  plain.features().set_cache_bytes(0);
  const size_t window = static_cast<size_t>(cached.sample_rate());  // the model's 1 s window
  std::vector<float> clip(3 * window);
  for (size_t i = 0; i < window; ++i) clip[i] = clip[i + window] = 0.3f * std::sin(0.05f * static_cast<float>(i));
  for (size_t i = 2 * window; i < clip.size(); ++i) clip[i] = 0.2f * std::sin(0.11f * static_cast<float>(i));
  TranscribeOptions options;
  options.max_new_tokens = 6;
  options.windows_per_batch = 2;  // the repeat comes within a batch; the third window in the next
  Transcript a = cached.transcribe(clip, options);
  EXPECT_EQ(cached.features().counts().encoded, 2u);
  EXPECT_EQ(cached.features().counts().reused, 1u);
  Transcript b = plain.transcribe(clip, options);
  EXPECT_EQ(plain.features().counts().encoded, 3u);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.text, b.text);
  Transcript again = cached.transcribe(clip, options);  // every window from the cache
  EXPECT_EQ(cached.features().counts().encoded, 2u);
  EXPECT_EQ(again.tokens, a.tokens);
}

}  // namespace
}  // namespace mminfer::pipelines
