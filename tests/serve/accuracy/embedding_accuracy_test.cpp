// The accuracy bound on a served pipeline's precision: probe inputs embedded below FP32 and in
// FP32, compared tower by tower, and a model whose tower falls below config's min_cosine refused.
#include "pipelines/embedding_accuracy.h"

#include <gtest/gtest.h>

#include "modal/audio/decode.h"
#include "pipelines/manifest.h"
#include "serve/served_model.h"

namespace mminfer {
namespace {

using pipelines::Modality;

SessionOptions with_precision(const std::string& spec) {
  SessionOptions o;
  EXPECT_TRUE(parse_precision(spec, &o.precision));
  return o;
}

const pipelines::TowerAccuracy& tower(const std::vector<pipelines::TowerAccuracy>& all, Modality m) {
  for (const auto& t : all)
    if (t.modality == m) return t;
  throw Error(std::string("no ") + pipelines::modality_name(m) + " tower measured");
}

TEST(EmbeddingAccuracy, Int8ClipTowersLandCloseToFp32ButNotOnIt) {
  pipelines::Manifest m = pipelines::read_manifest(MMINFER_CLIP_PIPELINE);
  auto int8 = pipelines::open_embedder(m, with_precision("int8"));
  auto measured = pipelines::measure_embedding_accuracy(m, *int8, SessionOptions{}, {"a hand-written receipt"});
  ASSERT_EQ(measured.size(), 2u);
  const auto& image = tower(measured, Modality::kImage);
  EXPECT_EQ(image.probes, pipelines::probe_images().size());
  const auto& text = tower(measured, Modality::kText);
  EXPECT_GE(text.probes, 5u);  // the fixed sentences and the extra one at least
  for (const auto& t : measured) {
    EXPECT_GT(t.min_cosine, 0.99) << pipelines::modality_name(t.modality);
    EXPECT_LT(t.min_cosine, 1.0) << pipelines::modality_name(t.modality) << ": INT8 changed nothing";
  }
}

TEST(EmbeddingAccuracy, Fp32AgainstItselfIsExact) {
  pipelines::Manifest m = pipelines::read_manifest(MMINFER_CLIP_PIPELINE);
  auto fp32 = pipelines::open_embedder(m, SessionOptions{});
  for (const auto& t : pipelines::measure_embedding_accuracy(m, *fp32, SessionOptions{}, {}))
    EXPECT_NEAR(t.min_cosine, 1.0, 1e-12) << pipelines::modality_name(t.modality);
}

TEST(EmbeddingAccuracy, AudioProbesDecodeAndAreMeasured) {
  for (const auto& wav : pipelines::probe_wavs()) {
    audio::Audio a = audio::decode_audio(wav);
    EXPECT_EQ(a.sample_rate, 16000);
    EXPECT_GE(a.samples.size(), 16000u);
  }
  pipelines::Manifest m = pipelines::read_manifest(MMINFER_AUDIO_PIPELINE);
  auto int8 = pipelines::open_embedder(m, with_precision("int8"));
  auto measured = pipelines::measure_embedding_accuracy(m, *int8, SessionOptions{}, {});
  ASSERT_EQ(measured.size(), 1u);
  EXPECT_EQ(measured[0].modality, Modality::kAudio);
  EXPECT_EQ(measured[0].probes, 2u);
  EXPECT_GT(measured[0].min_cosine, 0.9);
  EXPECT_LE(measured[0].min_cosine, 1.0);
}

TEST(EmbeddingAccuracy, RequireNamesTheTowerTheFigureAndTheBound) {
  std::vector<pipelines::TowerAccuracy> measured = {{Modality::kText, 9, 0.99999}, {Modality::kImage, 4, 0.9981}};
  EXPECT_NO_THROW(pipelines::require_accuracy(measured, 0.998, "model 'm'", "int8"));
  try {
    pipelines::require_accuracy(measured, 0.999, "model 'm'", "vision=int8");
    ADD_FAILURE() << "0.9981 passed a bound of 0.999";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "model 'm': image embeddings in vision=int8 reach cosine 0.998100 to FP32 on 4 probe inputs, below "
                 "min_cosine 0.999");
  }
}

serve::ModelConfig config(const std::string& json) {
  return serve::ModelConfig::from_json(nlohmann::json::parse(json), "config.json");
}

TEST(ServedAccuracy, ABoundTheTowersMeetLoadsAndTheMetadataGivesTheFigures) {
  serve::ServedModel model("clip", 1, MMINFER_CLIP_PIPELINE,
                           config(R"({"precision": "vision=int8", "min_cosine": 0.99})"), nullptr);
  nlohmann::json meta = model.metadata();
  EXPECT_EQ(meta["precision"], "vision=int8,text=fp32,audio=fp32,other=fp32");
  EXPECT_EQ(meta["accuracy"]["image"]["probes"], pipelines::probe_images().size());
  EXPECT_GT(meta["accuracy"]["image"]["min_cosine_to_fp32"].get<double>(), 0.99);
  EXPECT_NEAR(meta["accuracy"]["text"]["min_cosine_to_fp32"].get<double>(), 1.0, 1e-12);  // text stayed FP32
}

TEST(ServedAccuracy, ABoundATowerMissesKeepsTheModelFromLoading) {
  try {
    serve::ServedModel model("clip", 1, MMINFER_CLIP_PIPELINE, config(R"({"precision": "int8", "min_cosine": 1})"),
                             nullptr);
    ADD_FAILURE() << "INT8 towers met a bound of cosine 1";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind("model 'clip' version 1: ", 0), 0u) << msg;
    EXPECT_NE(msg.find("embeddings in int8 reach cosine"), std::string::npos) << msg;
    EXPECT_NE(msg.find("below min_cosine 1"), std::string::npos) << msg;
  }
}

TEST(ServedAccuracy, ABoundOnAModelWithoutEmbeddingsIsRefused) {
  try {
    serve::ServedModel model("ocr", 1, MMINFER_OCR_MODELS, config(R"({"min_cosine": 0.99})"), nullptr);
    ADD_FAILURE() << "min_cosine accepted on an ocr model";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "model 'ocr': min_cosine bounds embedding pipelines (clip, audio-encoder) only; this is an ocr model");
  }
}

}  // namespace
}  // namespace mminfer
