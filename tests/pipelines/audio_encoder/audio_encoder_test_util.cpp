#include "audio_encoder_test_util.h"

#include <fstream>
#include <nlohmann/json.hpp>

namespace mminfer::audio_encoder::testing {

AudioEncoderConfig generated_config() {
  std::ifstream f(kDir + "/pipeline.json");
  EXPECT_TRUE(f) << "missing " << kDir << "/pipeline.json (the audio_encoder_generate test makes it)";
  return AudioEncoderConfig::from_json(nlohmann::json::parse(f), kDir);
}

}  // namespace mminfer::audio_encoder::testing
