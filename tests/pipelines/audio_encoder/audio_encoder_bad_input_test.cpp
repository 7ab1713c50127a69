// Bad audio and configs that do not fit the model: one-line errors that name the problem.
#include <cstring>
#include <limits>
#include <memory>
#include <random>

#include "audio_encoder_test_util.h"
#include "pipelines/audio_encoder/audio_encoder_pipeline.h"

namespace mminfer::audio_encoder::testing {
namespace {

AudioEncoderPipeline& shared_pipeline() {
  static std::unique_ptr<AudioEncoderPipeline> p = std::make_unique<AudioEncoderPipeline>(generated_config(), two_threads());
  return *p;
}

// A 16-bit mono PCM WAV header whose data chunk holds `data_bytes` (none follow).
std::vector<uint8_t> wav_header(uint32_t data_bytes) {
  std::vector<uint8_t> b(44);
  auto put = [&](size_t at, const void* v, size_t n) { std::memcpy(b.data() + at, v, n); };
  auto u32 = [&](size_t at, uint32_t v) { put(at, &v, 4); };
  auto u16 = [&](size_t at, uint16_t v) { put(at, &v, 2); };
  put(0, "RIFF", 4), u32(4, 36 + data_bytes), put(8, "WAVE", 4), put(12, "fmt ", 4), u32(16, 16);
  u16(20, 1), u16(22, 1), u32(24, 16000), u32(28, 32000), u16(32, 2), u16(34, 16);
  put(36, "data", 4), u32(40, data_bytes);
  return b;
}

TEST(AudioEncoderBadInput, ZeroLengthWav) {
  expect_error([] { shared_pipeline().embed_bytes(wav_header(0)); }, "audio-encoder: audio (44 bytes): no audio samples");
}

TEST(AudioEncoderBadInput, EmptyBytes) {
  expect_error([] { shared_pipeline().embed_bytes({}); }, "audio-encoder: audio: empty input (0 bytes)");
}

TEST(AudioEncoderBadInput, RandomBytes) {
  std::mt19937 rng(7);
  std::vector<uint8_t> noise(4096);
  for (uint8_t& v : noise) v = static_cast<uint8_t>(rng());
  expect_error([&] { shared_pipeline().embed_bytes(noise); }, "audio-encoder: audio (4096 bytes): cannot decode");
}

TEST(AudioEncoderBadInput, TextIsNotAudio) {
  const std::string text = "This is a text file, not audio.\n";
  expect_error([&] { shared_pipeline().embed_bytes({reinterpret_cast<const uint8_t*>(text.data()), text.size()}); },
               "cannot decode");
}

TEST(AudioEncoderBadInput, MissingFile) {
  expect_error([] { shared_pipeline().embed_file("/nonexistent/clip.wav"); },
               "audio-encoder: audio file /nonexistent/clip.wav: cannot decode");
}

TEST(AudioEncoderBadInput, NoSamples) {
  expect_error([] { shared_pipeline().embed(std::vector<float>{}); }, "audio-encoder: the audio is empty (0 samples)");
}

TEST(AudioEncoderBadInput, NaNAndInfiniteSamples) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expect_error([&] { shared_pipeline().embed(std::vector<float>(16000, nan)); }, "audio-encoder: sample 0 is NaN or infinite");
  std::vector<float> one_bad(16000, 0.1f);
  one_bad[12345] = -std::numeric_limits<float>::infinity();
  expect_error([&] { shared_pipeline().embed(one_bad); }, "audio-encoder: sample 12345 is NaN or infinite");
}

TEST(AudioEncoderBadInput, BatchNamesTheClip) {
  const std::vector<std::vector<float>> clips = {std::vector<float>(800, 0.1f), {}, {0.f, std::numeric_limits<float>::quiet_NaN()}};
  expect_error([&] { shared_pipeline().embed_batch(clips); }, "audio-encoder: clip 1: the audio is empty (0 samples)");
  const std::vector<std::vector<float>> nan_last = {std::vector<float>(800, 0.1f), {0.f, std::numeric_limits<float>::quiet_NaN()}};
  expect_error([&] { shared_pipeline().embed_batch(nan_last); }, "audio-encoder: clip 1: sample 1 is NaN or infinite");
}

TEST(AudioEncoderBadInput, MelBinsThatDoNotFitTheModel) {
  AudioEncoderConfig c = generated_config();
  c.logmel.n_mels = 128;
  expect_error([&] { AudioEncoderPipeline(c, two_threads()); },
               "takes 80 mel bins (input \"input_features\" is [batch, 80, 3000]) but preprocess.n_mels is 128");
}

TEST(AudioEncoderBadInput, ChunkThatDoesNotFitTheModel) {
  AudioEncoderConfig c = generated_config();
  c.chunk_samples = 20 * 16000;
  expect_error([&] { AudioEncoderPipeline(c, two_threads()); },
               "takes 3000 frames (input \"input_features\" is [batch, 80, 3000]) but a chunk of 320000 samples "
               "(preprocess.chunk_seconds) at hop 160 gives 2000");
}

TEST(AudioEncoderBadInput, UnknownOutput) {
  AudioEncoderConfig c = generated_config();
  c.hidden_output = "pooled";
  expect_error([&] { AudioEncoderPipeline(c, two_threads()); },
               "has no output \"pooled\" (outputs.hidden); it has \"last_hidden_state\"");
}

TEST(AudioEncoderBadInput, MissingOrBrokenEncoder) {
  AudioEncoderConfig c = generated_config();
  c.encoder_path = kDir + "/missing.onnx";
  expect_error([&] { AudioEncoderPipeline(c, two_threads()); }, "audio-encoder: ");
  c.encoder_path = reference("short_16k.wav");  // not a model
  expect_error([&] { AudioEncoderPipeline(c, two_threads()); }, "audio-encoder: ");
}

}  // namespace
}  // namespace mminfer::audio_encoder::testing
