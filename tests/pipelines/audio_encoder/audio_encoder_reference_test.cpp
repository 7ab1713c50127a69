// The audio-encoder pipeline against embeddings computed entirely in Python by
// tools/make_audio_encoder_pipeline.py: sox decodes and resamples, numpy + torch.stft make the
// log-mel features, torch runs the encoder, numpy pools. Cosines are printed for the record.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <ostream>
#include <memory>

#include "audio_encoder_test_util.h"
#include "modal/audio/logmel.h"
#include "pipelines/audio_encoder/audio_encoder_pipeline.h"
#include "pipelines/audio_encoder/pooling.h"

namespace mminfer::audio_encoder::testing {
namespace {

// Where the two sides feed the encoder the same samples only float rounding separates them
// (measured 1 - cosine ~1e-13); the resamplers differ (sox's `rate -v` against libsamplerate's
// SINC_BEST), measured 1 - cosine 5e-7 on the speech clip. The bounds leave room for other
// kernels and builds, yet playing the speech at 0.75x its loudness moves this model's embedding
// by 8e-5 (1 - cosine), more than kResampled allows.
constexpr double kSameSamples = 0.999999, kResampled = 0.99995;

struct Clip {
  const char* file;
  const char* stem;
  bool resampled;
};

const Clip kClips[] = {
    {"speech_22k.wav", "speech_22k", true},   // espeak-ng at 22050 Hz
    {"sweep_16k.flac", "sweep_16k", false},   // sine sweep and pink noise
    {"short_16k.wav", "short_16k", false},    // 0.5 s: 25 of 1500 positions hold audio
    {"stereo_16k.wav", "stereo_16k", false},  // mixdown
    {"long_16k.flac", "long_16k", false},     // 53 s: two chunks
};

AudioEncoderPipeline& pipeline(Pooling pooling) {
  static std::unique_ptr<AudioEncoderPipeline> mean, first;
  auto& p = pooling == Pooling::kMean ? mean : first;
  if (!p) {
    AudioEncoderConfig c = generated_config();
    c.pooling = pooling;
    p = std::make_unique<AudioEncoderPipeline>(c, two_threads());
  }
  return *p;
}

void PrintTo(const Clip& clip, std::ostream* os) { *os << clip.file; }

class AudioEncoderReference : public ::testing::TestWithParam<Clip> {};

TEST_P(AudioEncoderReference, FileMatchesTorch) {
  const Clip& clip = GetParam();
  const std::vector<float> ours = pipeline(Pooling::kMean).embed_file(reference(clip.file));
  const std::vector<float> torch = read_floats(reference(std::string(clip.stem) + ".mean.npy"));
  const double cos = cosine(ours, torch);
  std::printf("%s from the file (libsndfile%s): 1 - cosine %.2e, max |diff| %.2e\n", clip.file,
              clip.resampled ? ", libsamplerate" : "", 1 - cos, max_abs_diff(ours, torch));
  EXPECT_GE(cos, clip.resampled ? kResampled : kSameSamples) << clip.file;
}

TEST_P(AudioEncoderReference, SamplesMatchTorch) {
  const Clip& clip = GetParam();
  const std::vector<float> samples = read_floats(reference(std::string(clip.stem) + ".samples.npy"));
  for (Pooling pooling : {Pooling::kMean, Pooling::kFirst}) {
    const std::vector<float> ours = pipeline(pooling).embed(samples);
    const std::vector<float> torch = read_floats(reference(std::string(clip.stem) + "." + pooling_name(pooling) + ".npy"));
    const double cos = cosine(ours, torch);
    std::printf("%s, Python's samples, %s pooling: 1 - cosine %.2e, max |diff| %.2e\n", clip.file, pooling_name(pooling),
                1 - cos, max_abs_diff(ours, torch));
    EXPECT_GE(cos, kSameSamples) << clip.file << " " << pooling_name(pooling);
  }
}

// The premise of the tighter bound: for 16 kHz files both decoders give the same samples.
TEST_P(AudioEncoderReference, DecodedSamplesMatchSox) {
  const Clip& clip = GetParam();
  const std::vector<float> ours = pipeline(Pooling::kMean).decode_file(reference(clip.file));
  const std::vector<float> sox = read_floats(reference(std::string(clip.stem) + ".samples.npy"));
  if (clip.resampled) {
    std::printf("%s: %zu samples resampled by libsamplerate, %zu by sox\n", clip.file, ours.size(), sox.size());
    EXPECT_LE(std::abs(static_cast<long>(ours.size()) - static_cast<long>(sox.size())), 2);
    return;
  }
  ASSERT_EQ(ours.size(), sox.size());
  EXPECT_LE(max_abs_diff(ours, sox), 1e-7f);
}

INSTANTIATE_TEST_SUITE_P(Clips, AudioEncoderReference, ::testing::ValuesIn(kClips),
                         [](const ::testing::TestParamInfo<Clip>& info) { return std::string(info.param.stem); });

std::vector<std::vector<float>> all_samples() {
  std::vector<std::vector<float>> clips;
  for (const Clip& c : kClips) clips.push_back(read_floats(reference(std::string(c.stem) + ".samples.npy")));
  return clips;
}

TEST(AudioEncoderBatch, BatchEqualsOneByOne) {
  const std::vector<std::vector<float>> clips = all_samples();
  const std::vector<std::vector<float>> batch = pipeline(Pooling::kMean).embed_batch(clips);
  ASSERT_EQ(batch.size(), clips.size());
  for (size_t i = 0; i < clips.size(); ++i) {
    const float d = max_abs_diff(batch[i], pipeline(Pooling::kMean).embed(clips[i]));
    std::printf("%s: batch of 5 clips (6 chunks) against alone: max |diff| %.2e\n", kClips[i].file, d);
    EXPECT_LE(d, 1e-5f) << kClips[i].file;
  }
}

TEST(AudioEncoderBatch, ChunksSpreadOverSeveralRuns) {
  AudioEncoderConfig c = generated_config();
  c.max_batch = 4;  // 6 chunks: runs of 4 and 2, the long clip's two chunks in different runs
  AudioEncoderPipeline small(c, two_threads());
  std::vector<std::vector<float>> clips = all_samples();
  std::swap(clips[3], clips[4]);
  const std::vector<std::vector<float>> a = small.embed_batch(clips), b = pipeline(Pooling::kMean).embed_batch(clips);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_LE(max_abs_diff(a[i], b[i]), 1e-5f) << i;
  EXPECT_TRUE(small.embed_batch(std::vector<std::vector<float>>{}).empty());
}

TEST(AudioEncoderBatch, EmbeddingsHaveTheModelsWidthAndUnitLength) {
  AudioEncoderPipeline p(generated_config(), two_threads());
  EXPECT_EQ(p.dimension(), 0);  // torch's exporter leaves the output's width symbolic
  const std::vector<float> e = p.embed(std::vector<float>(1000, 0.25f));
  EXPECT_EQ(p.dimension(), 64);
  ASSERT_EQ(e.size(), 64u);
  double norm = 0;
  for (float v : e) norm += double(v) * v;
  EXPECT_NEAR(norm, 1.0, 1e-6);
}

// 8001 samples are 51 frames that hold audio, so 26 positions: the pipeline must pool exactly
// those, which the encoder's own output, pooled here by hand, tells apart from 25 or all 1500.
TEST(AudioEncoderBatch, PoolsExactlyTheValidPositions) {
  std::vector<float> clip = read_floats(reference("speech_22k.samples.npy"));
  clip.resize(8001);
  const AudioEncoderConfig c = generated_config();
  std::unique_ptr<Session> session;
  ASSERT_TRUE(Session::load(c.encoder_path, two_threads(), &session));
  const Tensor features = audio::LogMel(c.logmel).compute(clip);
  Tensor batch = Tensor::alias(features, DType::kFloat32, {1, features.dim(0), features.dim(1)},
                               const_cast<void*>(features.raw()));
  std::vector<Tensor> out;
  ASSERT_TRUE(session->run({{session->inputs()[0].name, batch}}, &out));
  const Tensor& hidden = out[0];
  ASSERT_EQ(hidden.shape(), (Shape{1, 1500, 64}));
  const auto pooled = [&](int64_t positions) {
    EmbeddingPool pool(Pooling::kMean, 64);
    pool.add(hidden.data<float>(), positions);
    return pool.finish();
  };
  const std::vector<float> ours = pipeline(Pooling::kMean).embed(clip);
  const float d26 = max_abs_diff(ours, pooled(26)), d25 = max_abs_diff(ours, pooled(25)), d1500 = max_abs_diff(ours, pooled(1500));
  std::printf("8001 samples: max |diff| against 26 positions %.2e, 25: %.2e, 1500: %.2e\n", d26, d25, d1500);
  EXPECT_LE(d26, 1e-6f);
  EXPECT_GT(d25, 1e-4f);
  EXPECT_GT(d1500, 1e-2f);
}

TEST(AudioEncoderBatch, BytesAndFileGiveTheSameEmbedding) {
  std::ifstream f(reference("sweep_16k.flac"), std::ios::binary);
  const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  AudioEncoderPipeline& p = pipeline(Pooling::kMean);
  EXPECT_EQ(p.embed_bytes(bytes), p.embed_file(reference("sweep_16k.flac")));
}

}  // namespace
}  // namespace mminfer::audio_encoder::testing
