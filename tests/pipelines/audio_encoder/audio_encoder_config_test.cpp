// pipeline.json for the audio-encoder type: what it sets, what it defaults, and one-line errors
// naming the key at fault.
#include <nlohmann/json.hpp>

#include "audio_encoder_test_util.h"

namespace mminfer::audio_encoder::testing {
namespace {

using nlohmann::json;

json whisper_manifest() {
  return json::parse(R"({"type": "audio-encoder",
    "files": {"encoder": "encoder.onnx"},
    "preprocess": {"sample_rate": 16000, "n_mels": 80, "n_fft": 400, "hop": 160, "chunk_seconds": 30},
    "outputs": {"hidden": "last_hidden_state"},
    "pooling": "mean"})");
}

TEST(AudioEncoderConfig, ReadsEveryKey) {
  json m = whisper_manifest();
  m["preprocess"] = {{"sample_rate", 24000}, {"n_mels", 128}, {"n_fft", 512}, {"hop", 240},
                     {"chunk_seconds", 10.5}, {"fmin", 20}, {"fmax", 11000}};
  m["outputs"]["hidden"] = "hidden";
  m["pooling"] = "first";
  m["max_batch"] = 3;
  const AudioEncoderConfig c = AudioEncoderConfig::from_json(m, "/models/speech");
  EXPECT_EQ(c.encoder_path, "/models/speech/encoder.onnx");
  EXPECT_EQ(c.logmel.sample_rate, 24000);
  EXPECT_EQ(c.logmel.n_mels, 128);
  EXPECT_EQ(c.logmel.n_fft, 512);
  EXPECT_EQ(c.logmel.hop, 240);
  EXPECT_EQ(c.logmel.fmin, 20);
  EXPECT_EQ(c.logmel.fmax, 11000);
  EXPECT_EQ(c.chunk_samples, 252000);
  EXPECT_EQ(c.logmel.pad_or_trim, 252000);
  EXPECT_EQ(c.hidden_output, "hidden");
  EXPECT_EQ(c.pooling, Pooling::kFirst);
  EXPECT_EQ(c.max_batch, 3);
}

TEST(AudioEncoderConfig, MissingKeysKeepWhisperDefaults) {
  const AudioEncoderConfig c = AudioEncoderConfig::from_json(json::parse(R"({"files": {"encoder": "e.onnx"}})"), "d");
  EXPECT_EQ(c.encoder_path, "d/e.onnx");
  EXPECT_EQ(c.logmel.sample_rate, 16000);
  EXPECT_EQ(c.logmel.n_mels, 80);
  EXPECT_EQ(c.logmel.n_fft, 400);
  EXPECT_EQ(c.logmel.hop, 160);
  EXPECT_EQ(c.logmel.fmin, 0);
  EXPECT_EQ(c.logmel.fmax, 8000);
  EXPECT_EQ(c.chunk_samples, 480000);
  EXPECT_EQ(c.hidden_output, "last_hidden_state");
  EXPECT_EQ(c.pooling, Pooling::kMean);
  EXPECT_EQ(c.max_batch, 8);
  // fmax follows the sample rate when not given.
  EXPECT_EQ(AudioEncoderConfig::from_json(json::parse(R"({"files": {"encoder": "e.onnx"}, "preprocess": {"sample_rate": 22050}})"), "d")
                .logmel.fmax,
            11025);
}

void expect_config_error(const std::function<void(json&)>& edit, const std::string& expected) {
  json m = whisper_manifest();
  edit(m);
  expect_error([&] { AudioEncoderConfig::from_json(m, "models/a"); }, "models/a/pipeline.json: " + expected);
}

TEST(AudioEncoderConfig, ErrorsNameTheKey) {
  expect_config_error([](json& m) { m = json::array({1}); }, "must be a JSON object, got [1]");
  expect_config_error([](json& m) { m["type"] = "clip"; }, "type is \"clip\", not \"audio-encoder\"");
  expect_config_error([](json& m) { m.erase("files"); }, "files is missing");
  expect_config_error([](json& m) { m["files"] = "encoder.onnx"; }, "files must be a JSON object, got \"encoder.onnx\"");
  expect_config_error([](json& m) { m["files"].erase("encoder"); }, "files.encoder is missing");
  expect_config_error([](json& m) { m["files"]["encoder"] = 7; }, "files.encoder must be a non-empty string, got 7");
  expect_config_error([](json& m) { m["preprocess"]["n_mels"] = "80"; },
                      "preprocess.n_mels must be an integer in [1, 1024], got \"80\"");
  expect_config_error([](json& m) { m["preprocess"]["n_mels"] = 80.5; }, "preprocess.n_mels must be an integer");
  expect_config_error([](json& m) { m["preprocess"]["n_mels"] = 0; }, "preprocess.n_mels must be an integer in [1, 1024], got 0");
  expect_config_error([](json& m) { m["preprocess"]["sample_rate"] = 18446744073709551615ull; },
                      "preprocess.sample_rate must be an integer in [1000, 768000]");
  expect_config_error([](json& m) { m["preprocess"]["hop"] = 500; }, "preprocess.hop must be an integer in [1, 400], got 500");
  expect_config_error([](json& m) { m["preprocess"]["n_mel"] = 80; }, "preprocess.n_mel is not a known key");
  expect_config_error([](json& m) { m["preprocess"]["fmax"] = 9000; },
                      "preprocess.fmax must be above fmin and at most half the sample rate (8000 Hz)");
  expect_config_error([](json& m) { m["preprocess"]["fmin"] = -1; }, "preprocess.fmin must be in [0, 8000 Hz)");
  expect_config_error([](json& m) { m["preprocess"]["chunk_seconds"] = 0; }, "preprocess.chunk_seconds must be in (0, 3600]");
  expect_config_error([](json& m) { m["preprocess"]["chunk_seconds"] = 0.001; },
                      "preprocess.chunk_seconds gives fewer samples than one hop");
  expect_config_error([](json& m) { m["preprocess"]["chunk_seconds"] = "30"; }, "preprocess.chunk_seconds must be a number, got \"30\"");
  expect_config_error([](json& m) { m["outputs"]["hidden"] = ""; }, "outputs.hidden must be a non-empty string, got \"\"");
  expect_config_error([](json& m) { m["pooling"] = "max"; }, "pooling is \"max\"; it must be \"mean\" or \"first\"");
  expect_config_error([](json& m) { m["max_batch"] = 0; }, "max_batch must be an integer in [1, 1024], got 0");
}

TEST(AudioEncoderConfig, LongValuesAreCutAndControlBytesEscaped) {
  json m = whisper_manifest();
  m["files"]["encoder"] = json::array();
  for (int i = 0; i < 50; ++i) m["files"]["encoder"].push_back(i);
  expect_error([&] { AudioEncoderConfig::from_json(m, "d"); }, "got [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,1...");
  m = whisper_manifest();
  m["pooling"] = "me\nan";
  expect_error([&] { AudioEncoderConfig::from_json(m, "d"); }, "pooling is \"me\\nan\"");
}

}  // namespace
}  // namespace mminfer::audio_encoder::testing
