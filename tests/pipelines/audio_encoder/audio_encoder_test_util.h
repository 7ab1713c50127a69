// Shared by the audio-encoder tests: where the generated pipeline lives, its reference arrays,
// cosines, and checks that a call fails with one line naming the problem.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/npy.h"
#include "mminfer/status.h"
#include "mminfer/session.h"
#include "pipelines/audio_encoder/audio_encoder_config.h"

namespace mminfer::audio_encoder::testing {

inline const std::string kDir = MMINFER_AUDIO_ENCODER_DIR;  // the audio_encoder_generate test writes it
inline std::string reference(const std::string& name) { return kDir + "/reference/" + name; }

inline std::vector<float> read_floats(const std::string& path) {
  Tensor t = read_npy(path);
  EXPECT_EQ(t.dtype(), DType::kFloat32) << path;
  return {t.data<float>(), t.data<float>() + t.numel()};
}

inline double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return ab / std::sqrt(aa * bb);
}

inline float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

// The config of the generated pipeline, as pipeline.json gives it.
AudioEncoderConfig generated_config();

inline SessionOptions two_threads() {
  SessionOptions o;
  o.threads = 2;
  return o;
}

// `call` must throw mminfer::Error whose one-line message contains `expected`.
inline void expect_error(const std::function<void()>& call, const std::string& expected) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one containing: " << expected;
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(expected), std::string::npos) << "message: " << m << "\nexpected to contain: " << expected;
    EXPECT_EQ(m.find('\n'), std::string::npos) << "not one line: " << m;
  }
}

}  // namespace mminfer::audio_encoder::testing
