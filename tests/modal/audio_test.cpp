// Audio preprocessing against references made at test time by tools/logmel_reference.py: clips
// from espeak-ng and sox, and Whisper log-mel features computed with numpy and torch.stft.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numbers>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "mminfer/status.h"
#include "modal/audio/batch.h"
#include "modal/audio/decode.h"
#include "modal/audio/fft.h"
#include "modal/audio/load.h"
#include "modal/audio/logmel.h"
#include "modal/audio/mel.h"
#include "modal/audio/resample.h"
#include "modal/audio/stft.h"

// Debian's libsndfile 1.2.0 leaks its vorbis_info (5784 bytes) when an Ogg stream fails while
// its headers are read; the mutation test below hits that, and LeakSanitizer (asan preset)
// would fail it for a leak that is not ours. Read only by sanitizer builds.
extern "C" const char* __lsan_default_suppressions() { return "leak:vorbis_info_init\n"; }

namespace mminfer::audio {
namespace {

const std::string kCases = MMINFER_AUDIO_CASES;
std::string case_path(const std::string& name) { return kCases + "/" + name; }

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f) << "missing " << path << " (the audio_cases_generate test makes it)";
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// A float32, C-order .npy file as numpy.save writes it.
struct Npy {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

Npy read_npy(const std::string& path) {
  const std::vector<uint8_t> b = read_bytes(path);
  Npy npy;
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0) {
    ADD_FAILURE() << path << " is not a .npy file";
    return npy;
  }
  const bool v1 = b[6] == 1;
  const size_t header_len = v1 ? b[8] | (b[9] << 8) : b[8] | (b[9] << 8) | (b[10] << 16) | (size_t(b[11]) << 24);
  const size_t start = (v1 ? 10 : 12) + header_len;
  const std::string header(b.begin() + (v1 ? 10 : 12), b.begin() + start);
  EXPECT_NE(header.find("'<f4'"), std::string::npos) << path;
  EXPECT_NE(header.find("'fortran_order': False"), std::string::npos) << path;
  const size_t open = header.find('(', header.find("'shape'")), close = header.find(')', open);
  std::string dims = header.substr(open + 1, close - open - 1);
  for (size_t pos = 0; pos < dims.size();) {
    size_t comma = dims.find(',', pos);
    if (comma == std::string::npos) comma = dims.size();
    const std::string d = dims.substr(pos, comma - pos);
    if (d.find_first_of("0123456789") != std::string::npos) npy.shape.push_back(std::stoll(d));
    pos = comma + 1;
  }
  npy.data.resize((b.size() - start) / sizeof(float));
  std::memcpy(npy.data.data(), b.data() + start, npy.data.size() * sizeof(float));
  return npy;
}

float max_abs_diff(const float* a, const float* b, size_t n) {
  float d = 0;
  for (size_t i = 0; i < n; ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

// Throws mminfer::Error whose message is one line containing `needle`.
template <typename Fn>
void expect_error(Fn&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(needle), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

// --- FFT against the plain DFT -----------------------------------------------------------------

std::vector<Complex> naive_dft(const std::vector<Complex>& x) {
  const size_t n = x.size();
  std::vector<Complex> out(n);
  for (size_t k = 0; k < n; ++k) {
    Complex s = 0;
    for (size_t j = 0; j < n; ++j) s += x[j] * std::polar(1.0, -2.0 * std::numbers::pi * double((j * k) % n) / n);
    out[k] = s;
  }
  return out;
}

TEST(AudioFft, ComplexAndRealMatchThePlainDft) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 25, 30, 97, 194, 200, 210, 400, 512, 1000, 2310}) {
    std::vector<Complex> x(n);
    std::vector<double> re(n);
    for (int j = 0; j < n; ++j) {
      x[j] = Complex(u(rng), u(rng));
      re[j] = u(rng);
    }
    const std::vector<Complex> want = naive_dft(x);
    std::vector<Complex> got(n);
    ComplexFft(n).forward(x.data(), got.data());
    for (int k = 0; k < n; ++k) ASSERT_LT(std::abs(got[k] - want[k]), 1e-10 * n) << "n=" << n << " k=" << k;

    std::vector<Complex> real_in(re.begin(), re.end());
    const std::vector<Complex> real_want = naive_dft(real_in);
    RealFft rfft(n);
    std::vector<Complex> bins(rfft.bins()), work(rfft.workspace_size());
    rfft.forward(re.data(), bins.data(), work.data());
    ASSERT_EQ(rfft.bins(), n / 2 + 1);
    for (int k = 0; k < rfft.bins(); ++k)
      ASSERT_LT(std::abs(bins[k] - real_want[k]), 1e-10 * n) << "real n=" << n << " k=" << k;
  }
}

TEST(AudioStft, ReflectIndexBouncesLikeNumpyPad) {
  // numpy.pad(arange(4), 7, 'reflect') = 1 0 1 2 3 2 1 | 0 1 2 3 | 2 1 0 1 2 3 2
  const std::vector<int64_t> want = {1, 0, 1, 2, 3, 2, 1, 0, 1, 2, 3, 2, 1, 0, 1, 2, 3, 2};
  for (int64_t i = -7; i < 11; ++i) EXPECT_EQ(reflect_index(i, 4), want[i + 7]) << i;
  EXPECT_EQ(reflect_index(-5, 1), 0);
}

TEST(AudioStft, PowerOfABinCentredToneIsAtItsBin) {
  // A cosine on bin 20 (800 Hz at 16 kHz, n_fft 400) with the Hann window puts
  // (A * n / 4)^2 in its bin and a quarter of that in each neighbour.
  std::vector<float> x(4000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f * std::cos(2 * std::numbers::pi * 20 * i / 400.0);
  PowerSpectrum stft(400, 160);
  auto work = stft.make_work();
  std::vector<double> p(stft.bins());
  stft.frame(x, 10, p.data(), work);
  const double peak = std::pow(0.5 * 400 / 4, 2);
  EXPECT_NEAR(p[20], peak, peak * 1e-5);
  EXPECT_NEAR(p[19], peak / 4, peak * 1e-5);
  EXPECT_LT(p[30], peak * 1e-10);
  EXPECT_EQ(stft.frames(480000), 3000);
}

// --- mel filterbank --------------------------------------------------------------------------

TEST(AudioMel, SlaneyScale) {
  EXPECT_DOUBLE_EQ(hz_to_mel(200.0 / 3), 1.0);
  EXPECT_DOUBLE_EQ(hz_to_mel(1000), 15.0);
  EXPECT_NEAR(hz_to_mel(6400), 42.0, 1e-12);  // 27 mels per factor 6.4 above 1 kHz
  for (double hz : {0.0, 10.0, 999.0, 1000.0, 1234.5, 8000.0}) EXPECT_NEAR(mel_to_hz(hz_to_mel(hz)), hz, 1e-9);
}

TEST(AudioMel, FilterbanksMatchTheReference) {
  for (int n_mels : {80, 128}) {
    const Npy ref = read_npy(case_path("mel" + std::to_string(n_mels) + "_filters.npy"));
    MelFilterbank fb(16000, 400, n_mels, 0, 8000);
    ASSERT_EQ(ref.shape, (std::vector<int64_t>{n_mels, 201}));
    for (int m = 0; m < n_mels; ++m)
      for (int b = 0; b < 201; ++b) ASSERT_NEAR(fb.weight(m, b), ref.data[m * 201 + b], 1e-8) << m << "," << b;
  }
  // Whisper's mel_filters.npz starts with 0.02486259 at bin 1 of the first of 80 filters.
  EXPECT_NEAR(MelFilterbank(16000, 400, 80, 0, 8000).weight(0, 1), 0.02486259, 1e-8);
}

// --- log-mel against numpy + torch.stft --------------------------------------------------------

struct FeatureCase {
  std::string clip;
  int n_mels;
  bool pad;
};

std::string case_name(const testing::TestParamInfo<FeatureCase>& info) {
  return info.param.clip + "_mel" + std::to_string(info.param.n_mels) + (info.param.pad ? "_pad30s" : "_nopad");
}

void PrintTo(const FeatureCase& c, std::ostream* os) {
  *os << c.clip << ", " << c.n_mels << " mels, " << (c.pad ? "padded to 30 s" : "own length");
}

class AudioLogMelReference : public testing::TestWithParam<FeatureCase> {};

TEST_P(AudioLogMelReference, MatchesTorchWithin1e4) {
  const FeatureCase& c = GetParam();
  const Audio audio = decode_audio_file(case_path(c.clip + ".wav"));
  ASSERT_EQ(audio.sample_rate, 16000);
  LogMelOptions options;
  options.n_mels = c.n_mels;
  options.pad_or_trim = c.pad ? 480000 : 0;
  const Tensor got = LogMel(options).compute(audio.samples);
  const Npy ref =
      read_npy(case_path(c.clip + ".mel" + std::to_string(c.n_mels) + (c.pad ? ".pad" : ".nopad") + ".npy"));
  ASSERT_EQ(got.shape(), ref.shape);
  if (c.pad) {
    EXPECT_EQ(got.dim(1), 3000);
  }
  const float diff = max_abs_diff(got.data<float>(), ref.data.data(), ref.data.size());
  EXPECT_LE(diff, 1e-4f);
  RecordProperty("max_abs_diff", std::to_string(diff));
  std::printf("max |mminfer - reference| = %.3g over %s\n", diff, shape_str(got.shape()).c_str());
}

std::vector<FeatureCase> feature_cases() {
  std::vector<FeatureCase> cases;
  for (const char* clip : {"speech_16k", "tone440_16k", "silence_16k", "short_16k", "short170_16k", "long_16k"})
    for (int n_mels : {80, 128})
      for (bool pad : {true, false})
        if (pad || std::string(clip) != "short_16k") cases.push_back({clip, n_mels, pad});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Clips, AudioLogMelReference, testing::ValuesIn(feature_cases()), case_name);

TEST(AudioLogMel, CloseToWhispersOwnFloat32Arithmetic) {
  const Tensor got = LogMel().compute(decode_audio_file(case_path("speech_16k.wav")).samples);
  const Npy ref = read_npy(case_path("speech_16k.mel80.pad.whisper_f32.npy"));
  ASSERT_EQ(got.shape(), ref.shape);
  EXPECT_LE(max_abs_diff(got.data<float>(), ref.data.data(), ref.data.size()), 1e-3f);
}

TEST(AudioLogMel, SilenceIsFlatAndShortAudioNeedsPadding) {
  const Tensor silence = LogMel().compute(std::vector<float>(1000, 0.0f));
  ASSERT_EQ(silence.shape(), (Shape{80, 3000}));
  for (int64_t i = 0; i < silence.numel(); ++i) ASSERT_EQ(silence.data<float>()[i], -1.5f);  // (log10(1e-10)+4)/4

  LogMelOptions no_pad;
  no_pad.pad_or_trim = 0;
  expect_error([&] { LogMel(no_pad).compute(std::vector<float>(100, 0.1f)); }, "shorter than one hop");
  expect_error([&] { LogMel(no_pad).compute(std::vector<float>()); }, "shorter than one hop");
  EXPECT_EQ(LogMel(no_pad).compute(std::vector<float>(160, 0.1f)).dim(1), 1);
  std::vector<float> bad(16000, 0.1f);
  bad[1234] = std::nanf("");
  expect_error([&] { LogMel().compute(bad); }, "sample 1234 is not a finite number");
}

// --- decoding ------------------------------------------------------------------------------------

void expect_samples(const std::vector<float>& got, const std::string& npy, float tol) {
  const Npy ref = read_npy(case_path(npy));
  ASSERT_EQ(got.size(), ref.data.size()) << npy;
  EXPECT_LE(max_abs_diff(got.data(), ref.data.data(), got.size()), tol) << npy;
}

TEST(AudioDecode, WavFlacAndOggFromBytesAndFiles) {
  const Audio wav = decode_audio(read_bytes(case_path("speech_16k.wav")));
  EXPECT_EQ(wav.sample_rate, 16000);
  expect_samples(wav.samples, "speech_16k.samples.npy", 0);
  EXPECT_EQ(decode_audio_file(case_path("speech_16k.wav")).samples, wav.samples);

  const Audio flac = decode_audio(read_bytes(case_path("speech_16k.flac")));  // lossless
  EXPECT_EQ(flac.sample_rate, 16000);
  EXPECT_EQ(flac.samples, wav.samples);

  // Vorbis is lossy and sox's decode went through 16-bit integers: a few LSBs apart.
  const Audio ogg = decode_audio(read_bytes(case_path("speech_16k.ogg")));
  EXPECT_EQ(ogg.sample_rate, 16000);
  expect_samples(ogg.samples, "speech_16k_ogg.samples.npy", 2e-4f);
  EXPECT_EQ(decode_audio_file(case_path("speech_16k.ogg")).samples, ogg.samples);
}

TEST(AudioDecode, StereoIsMixedToTheMeanOfItsChannels) {
  const Audio stereo = decode_audio_file(case_path("speech_22k_stereo.wav"));
  EXPECT_EQ(stereo.sample_rate, 22050);
  expect_samples(stereo.samples, "speech_22k_stereo.samples.npy", 0);
}

TEST(AudioDecode, OggCutShortDecodesUpToTheCut) {
  // Without its last page an Ogg stream does not say how long it is; what is there is real audio.
  std::vector<uint8_t> ogg = read_bytes(case_path("speech_16k.ogg"));
  const size_t full = decode_audio(ogg).samples.size();
  ogg.resize(ogg.size() / 2);
  const size_t cut = decode_audio(ogg).samples.size();
  EXPECT_GT(cut, full / 4);
  EXPECT_LT(cut, full);
}

TEST(AudioDecode, BadInputsGiveOneLineErrors) {
  expect_error([] { decode_audio({}); }, "empty input (0 bytes)");
  const std::string text = "This is a text file, not audio.\nSecond line.\n";
  expect_error([&] { decode_audio({reinterpret_cast<const uint8_t*>(text.data()), text.size()}); }, "cannot decode");
  std::vector<uint8_t> riff = {'R', 'I', 'F', 'F', 200, 0, 0, 0, 'W', 'A', 'V', 'E'};
  std::mt19937 rng(3);
  for (int i = 0; i < 200; ++i) riff.push_back(static_cast<uint8_t>(rng()));
  expect_error([&] { decode_audio(riff); }, "cannot decode");

  expect_error([] { decode_audio_file(case_path("not_audio.txt")); }, "not_audio.txt: cannot decode");

  std::vector<uint8_t> flac = read_bytes(case_path("speech_16k.flac"));
  std::vector<uint8_t> flipped = flac;
  for (size_t i = flac.size() / 3; i < flac.size() / 3 + 300; ++i) flipped[i] ^= 0x5a;
  expect_error([&] { decode_audio(flipped); }, "truncated or corrupt audio: flac decoder lost sync");
  flac.resize(flac.size() / 2);
  expect_error([&] { decode_audio(flac); }, "truncated or corrupt");
  std::vector<uint8_t> header_only = read_bytes(case_path("speech_16k.wav"));
  header_only.resize(44);
  expect_error([&] { decode_audio(header_only); }, "no audio samples");

  expect_error([] { decode_audio_file(case_path("no_such_file.wav")); }, "no_such_file.wav: cannot decode");
  expect_error([] { decode_audio_file(case_path("speech_16k.wav"), {.max_seconds = 1.0}); }, "over the 1.0 s limit");
  expect_error([] { decode_audio_file(case_path("silence_31min.flac")); },
               "audio is 1860.0 s long, over the 1800.0 s limit");
  expect_error([] { load_audio_file(case_path("silence_31min.flac")); }, "over the 1800.0 s limit");
}

TEST(AudioDecode, MutatedFilesDecodeOrGiveAnError) {
  // Flipped bytes and cuts anywhere in WAV, FLAC and Ogg: each gives samples or an Error, never
  // a crash or another exception (run under the asan preset, this also checks memory).
  std::mt19937 rng(11);
  int decoded = 0, refused = 0;
  for (const char* name : {"speech_16k.wav", "speech_16k.flac", "speech_16k.ogg", "speech_22k_stereo.wav"}) {
    const std::vector<uint8_t> original = read_bytes(case_path(name));
    for (int i = 0; i < 150; ++i) {
      std::vector<uint8_t> b = original;
      const int flips = 1 + static_cast<int>(rng() % 8);
      for (int f = 0; f < flips; ++f)
        b[rng() % std::min<size_t>(b.size(), i % 2 ? 128 : b.size())] = static_cast<uint8_t>(rng());
      if (i % 3 == 0) b.resize(rng() % b.size());
      try {
        const Audio a = decode_audio(b);
        ASSERT_FALSE(a.samples.empty());
        ++decoded;
      } catch (const Error& e) {
        ASSERT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
        ++refused;
      }
    }
  }
  RecordProperty("decoded", decoded);
  RecordProperty("refused", refused);
  EXPECT_GT(refused, 0);
}

// --- resampling ------------------------------------------------------------------------------------

// Frequency of the strongest DFT bin (1 Hz resolution over 1 s) and the tone's amplitude from
// its RMS, both over the middle of the clip so the ends' transients do not count.
struct ToneStats {
  double peak_hz, amplitude;
};

ToneStats tone_stats(const std::vector<float>& x, int rate) {
  const size_t start = x.size() / 4, n = static_cast<size_t>(rate) / 2;  // 0.5 s: 2 Hz bins
  std::vector<double> frame(x.begin() + start, x.begin() + start + n);
  RealFft fft(static_cast<int>(n));
  std::vector<Complex> bins(fft.bins()), work(fft.workspace_size());
  fft.forward(frame.data(), bins.data(), work.data());
  size_t best = 0;
  for (size_t k = 1; k < bins.size(); ++k)
    if (std::abs(bins[k]) > std::abs(bins[best])) best = k;
  double sq = 0;
  for (double v : frame) sq += v * v;
  return {best * static_cast<double>(rate) / n, std::sqrt(2 * sq / n)};
}

std::vector<float> sine(double hz, int rate, double seconds, double amplitude) {
  std::vector<float> x(static_cast<size_t>(rate * seconds));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(amplitude * std::sin(2 * std::numbers::pi * hz * i / rate));
  return x;
}

TEST(AudioResample, SineKeepsItsFrequencyAndAmplitude) {
  // kBest keeps 1% of the amplitude up to 7.4 kHz, kMedium up to 6 kHz (see resample.h).
  for (ResampleQuality q : {ResampleQuality::kBest, ResampleQuality::kMedium}) {
    const double flat_to = q == ResampleQuality::kBest ? 7400 : 6000;
    for (double hz : {440.0, 1000.0, 3000.0, 6000.0, 7000.0, 7400.0}) {
      if (hz > flat_to) continue;
      const std::vector<float> in = sine(hz, 44100, 2.0, 0.5);
      const std::vector<float> out = resample(in, 44100, 16000, q);
      ASSERT_EQ(out.size(), 32000u);
      const ToneStats s = tone_stats(out, 16000);
      EXPECT_EQ(s.peak_hz, hz) << "quality " << int(q);
      EXPECT_NEAR(s.amplitude, 0.5, 0.005) << hz << " Hz, quality " << int(q);
    }
    if (q == ResampleQuality::kMedium) {
      EXPECT_LT(tone_stats(resample(sine(7500, 44100, 2.0, 0.5), 44100, 16000, q), 16000).amplitude, 0.3);
    }
    // 10 kHz has no place below 16 kHz's 8 kHz Nyquist limit: it must be filtered, not aliased to 6 kHz.
    const std::vector<float> above = resample(sine(10000, 44100, 2.0, 0.5), 44100, 16000, q);
    EXPECT_LT(tone_stats(above, 16000).amplitude, 1e-4) << "quality " << int(q);
  }
  EXPECT_EQ(resample(std::vector<float>(123, 0.25f), 16000, 16000), std::vector<float>(123, 0.25f));
  expect_error([] { resample(std::vector<float>(10), 1000, 300000); }, "ratio");
}

TEST(AudioResample, FileAt44kLoadsAt16k) {
  const std::vector<float> x = load_audio_file(case_path("tone1k_44k.wav"));
  ASSERT_EQ(x.size(), 16000u);
  const ToneStats s = tone_stats(x, 16000);
  EXPECT_EQ(s.peak_hz, 1000.0);
  EXPECT_NEAR(s.amplitude, 0.5, 0.005);
}

TEST(AudioResample, StereoSpeechAgreesWithSox) {
  // Both are band-limited resamplers, sox's passband ending at 95% of Nyquist and kBest's near 97%,
  // so they differ near 8 kHz only: 41 dB apart here (summing the channels would give 0 dB).
  const std::vector<float> ours = load_audio(read_bytes(case_path("speech_22k_stereo.wav")));
  const Audio sox = decode_audio_file(case_path("speech_16k_sox.wav"));
  ASSERT_EQ(sox.sample_rate, 16000);
  ASSERT_EQ(ours.size(), sox.samples.size());
  double err = 0, sig = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    err += std::pow(ours[i] - sox.samples[i], 2);
    sig += std::pow(sox.samples[i], 2);
  }
  const double snr_db = 10 * std::log10(sig / err);
  RecordProperty("snr_db", std::to_string(snr_db));
  EXPECT_GT(snr_db, 35.0);
}

// --- batches -----------------------------------------------------------------------------------------

TEST(AudioBatch, PadsToTheLongestClipAndMasksThePadding) {
  const std::vector<float> speech = decode_audio_file(case_path("speech_16k.wav")).samples;
  const std::vector<std::vector<float>> clips = {sine(440, 16000, 0.5, 0.3), speech, std::vector<float>(1000, 0.0f)};
  LogMelOptions options;
  options.pad_or_trim = 0;
  const LogMel logmel(options);
  const LogMelBatch batch = log_mel_batch(logmel, clips);
  const int64_t frames = static_cast<int64_t>(speech.size()) / 160;
  ASSERT_EQ(batch.features.shape(), (Shape{3, 80, frames}));
  ASSERT_EQ(batch.mask.shape(), (Shape{3, frames}));
  for (int64_t i = 0; i < 3; ++i) {
    const Tensor alone = logmel.compute(clips[i]);
    const int64_t own = alone.dim(1);
    // Silence sits at the clamp, 8 log10 units (2 after scaling) below the top, or at log10(1e-10).
    const float top = *std::max_element(alone.data<float>(), alone.data<float>() + alone.numel());
    const float silence = std::max(top - 2.0f, -1.5f);
    const float* feats = batch.features.data<float>() + i * 80 * frames;
    for (int64_t m = 0; m < 80; ++m) {
      for (int64_t t = 0; t < own; ++t) ASSERT_EQ(feats[m * frames + t], alone.data<float>()[m * own + t]);
      for (int64_t t = own; t < frames; ++t) ASSERT_NEAR(feats[m * frames + t], silence, 1e-6f) << i;
    }
    const int64_t* mask = batch.mask.data<int64_t>() + i * frames;
    EXPECT_EQ(std::count(mask, mask + frames, 1), own) << i;
    EXPECT_TRUE(std::all_of(mask, mask + own, [](int64_t v) { return v == 1; }));
  }

  // Whisper's 30 s: every clip has 3000 frames, the mask covers the frames centred in real audio.
  const LogMelBatch whisper = log_mel_batch(LogMel(), clips);
  ASSERT_EQ(whisper.features.shape(), (Shape{3, 80, 3000}));
  const int64_t* mask = whisper.mask.data<int64_t>();
  EXPECT_EQ(std::count(mask, mask + 3000, 1), 50);  // 8000 samples
  EXPECT_EQ(std::count(mask + 3000, mask + 6000, 1), (static_cast<int64_t>(speech.size()) + 159) / 160);
  EXPECT_EQ(std::count(mask + 6000, mask + 9000, 1), 7);  // 1000 samples: frames at 0, 160, ..., 960

  expect_error(
      [&] {
        log_mel_batch(logmel, std::vector<std::vector<float>>{speech, std::vector<float>(10)});
      },
      "clip 1: log-mel: 10 samples are shorter than one hop");
  expect_error([&] { log_mel_batch(logmel, std::vector<std::vector<float>>{}); }, "no clips");
}

}  // namespace
}  // namespace mminfer::audio
