#include "pipelines/embedding_accuracy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>

#include "core/cosine.h"

namespace mminfer::pipelines {

namespace {

// A fixed pseudo-random stream (64-bit LCG, top bits), so the probes are the same every load.
struct Lcg {
  uint64_t state;
  uint32_t next() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<uint32_t>(state >> 33);
  }
  double unit() { return next() / 2147483648.0; }  // [0, 1)
};

uint8_t clamp_byte(double v) { return static_cast<uint8_t>(std::clamp(v, 0.0, 255.0)); }

template <class F>
image::Image paint(int w, int h, F rgb) {
  image::Image im = image::Image::blank(w, h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      auto [r, g, b] = rgb(x, y);
      uint8_t* p = im.row(y) + 3 * x;
      p[0] = clamp_byte(r), p[1] = clamp_byte(g), p[2] = clamp_byte(b);
    }
  return im;
}

void put_tag(std::vector<uint8_t>& out, const char* tag) {
  for (const char* c = tag; *c; ++c) out.push_back(static_cast<uint8_t>(*c));
}

void put_le(std::vector<uint8_t>& out, uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// 16-bit mono PCM WAV.
std::vector<uint8_t> wav(const std::vector<float>& samples, int rate) {
  std::vector<uint8_t> out;
  const uint32_t data_bytes = static_cast<uint32_t>(samples.size() * 2);
  put_tag(out, "RIFF");
  put_le(out, 36 + data_bytes, 4);
  put_tag(out, "WAVEfmt ");
  put_le(out, 16, 4);
  put_le(out, 1, 2);  // PCM
  put_le(out, 1, 2);  // mono
  put_le(out, static_cast<uint32_t>(rate), 4);
  put_le(out, static_cast<uint32_t>(rate * 2), 4);
  put_le(out, 2, 2);
  put_le(out, 16, 2);
  put_tag(out, "data");
  put_le(out, data_bytes, 4);
  for (float s : samples)
    put_le(out, static_cast<uint16_t>(static_cast<int16_t>(std::lround(std::clamp(s, -1.0f, 1.0f) * 32767))), 2);
  return out;
}

std::vector<std::string> probe_texts(const Manifest& manifest, const Embedder& embedder,
                                     const std::vector<std::string>& extra) {
  std::vector<std::string> candidates = {"a photo of a dog on the grass", "Invoice no. 4417, due 12 March",
                                         "the quick brown fox jumps over the lazy dog", "a"};
  candidates.insert(candidates.end(), extra.begin(), extra.end());
  std::vector<std::string> templates = manifest.templates.value_or(std::vector<std::string>{"{}"});
  for (const std::string& label : manifest.labels.value_or(std::vector<std::string>{}))
    for (const std::string& t : templates) {
      std::string filled = t;
      if (size_t at = filled.find("{}"); at != std::string::npos) filled.replace(at, 2, label);
      candidates.push_back(filled);
    }
  constexpr size_t kMaxTexts = 16;  // enough to see the tower's error; loads stay quick
  std::vector<std::string> texts;
  for (const std::string& t : candidates) {
    if (texts.size() == kMaxTexts) break;
    try {
      embedder.check_text(t);
      texts.push_back(t);
    } catch (const std::exception&) {
    }
  }
  return texts;
}

}  // namespace

std::vector<image::Image> probe_images() {
  std::vector<image::Image> images;
  // A photo-like gradient with a disc.
  images.push_back(paint(224, 224, [](int x, int y) {
    bool disc = (x - 140) * (x - 140) + (y - 90) * (y - 90) < 40 * 40;
    return std::tuple{disc ? 230.0 : x * 1.1, disc ? 40.0 : y * 1.1, disc ? 60.0 : 120.0 + (x - y) * 0.3};
  }));
  // A line of dark strokes on white, as OCR crops are.
  images.push_back(paint(301, 64, [](int x, int y) {
    bool ink = y > 16 && y < 48 && (x / 3) % 4 != 0 && (x / 23) % 5 != 4;
    double v = ink ? 25.0 : 245.0;
    return std::tuple{v, v, v};
  }));
  // A wide, smoothly varying colour pattern.
  images.push_back(paint(640, 427, [](int x, int y) {
    double s = std::sin(x * 0.031) * std::cos(y * 0.047);
    return std::tuple{128 + 110 * s, 128 - 90 * std::sin(y * 0.02), 128 + 70 * std::cos((x + y) * 0.013)};
  }));
  // A tall image of noise.
  Lcg rng{20261203};
  images.push_back(paint(97, 311, [&rng](int, int) {
    return std::tuple{rng.unit() * 255, rng.unit() * 255, rng.unit() * 255};
  }));
  return images;
}

std::vector<std::vector<uint8_t>> probe_wavs() {
  constexpr int kRate = 16000;
  const double two_pi = 2 * std::numbers::pi;
  std::vector<float> sweep(kRate * 3 / 2), tones(kRate * 3);
  double phase = 0;
  for (size_t i = 0; i < sweep.size(); ++i) {  // 200 -> 2000 Hz with its second harmonic
    double t = static_cast<double>(i) / sweep.size();
    phase += two_pi * (200 + 1800 * t) / kRate;
    sweep[i] = static_cast<float>(0.5 * std::sin(phase) + 0.2 * std::sin(2 * phase));
  }
  Lcg rng{42};
  for (size_t i = 0; i < tones.size(); ++i) {  // notes of 0.25 s over quiet noise
    double f = 220.0 * std::pow(2.0, static_cast<double>((i / (kRate / 4)) % 7) / 12);
    tones[i] = static_cast<float>(0.4 * std::sin(two_pi * f * i / kRate) + 0.05 * (rng.unit() - 0.5));
  }
  return {wav(sweep, kRate), wav(tones, kRate)};
}

ProbeEmbeddings embed_probes(const Manifest& manifest, Embedder& embedder, const std::vector<std::string>& texts) {
  ProbeEmbeddings out;
  if (embedder.has_tower(Modality::kImage)) out.image = embedder.embed_images(probe_images());
  if (embedder.has_tower(Modality::kText)) {
    std::vector<std::string> probes = probe_texts(manifest, embedder, texts);
    out.text = probes.empty() ? std::vector<Embedding>{} : embedder.embed_texts(probes);
  }
  if (embedder.has_tower(Modality::kAudio)) {
    out.audio.emplace();
    for (const std::vector<uint8_t>& clip : probe_wavs())  // one at a time, as the server runs audio
      out.audio->push_back(std::move(embedder.embed_audio(std::span<const std::vector<uint8_t>>(&clip, 1)).at(0)));
  }
  return out;
}

std::vector<TowerAccuracy> compare_probes(const ProbeEmbeddings& lowered, const ProbeEmbeddings& fp32) {
  std::vector<TowerAccuracy> measured;
  auto tower = [&](Modality m, const std::optional<std::vector<Embedding>>& a,
                   const std::optional<std::vector<Embedding>>& b) {
    if (!a || !b || a->empty()) return;
    if (a->size() != b->size()) throw Error(std::string("the ") + modality_name(m) + " probes differ in number");
    TowerAccuracy t{m, a->size(), 1};
    for (size_t i = 0; i < a->size(); ++i) t.min_cosine = std::min(t.min_cosine, cosine_similarity((*a)[i], (*b)[i]));
    measured.push_back(t);
  };
  tower(Modality::kImage, lowered.image, fp32.image);
  tower(Modality::kText, lowered.text, fp32.text);
  tower(Modality::kAudio, lowered.audio, fp32.audio);
  return measured;
}

std::vector<TowerAccuracy> measure_embedding_accuracy(const Manifest& manifest, Embedder& lowered,
                                                      const SessionOptions& fp32_session,
                                                      const std::vector<std::string>& texts) {
  ProbeEmbeddings reference = embed_probes(manifest, *open_embedder(manifest, fp32_session), texts);
  return compare_probes(embed_probes(manifest, lowered, texts), reference);
}

void require_accuracy(const std::vector<TowerAccuracy>& measured, double min_cosine, const std::string& what,
                      const std::string& precision) {
  for (const TowerAccuracy& t : measured)
    if (t.min_cosine < min_cosine) {
      char buf[256];
      std::snprintf(buf, sizeof buf,
                    ": %s embeddings in %s reach cosine %.6f to FP32 on %zu probe inputs, below min_cosine %g",
                    modality_name(t.modality), precision.c_str(), t.min_cosine, t.probes, min_cosine);
      throw Error(what + buf);
    }
}

}  // namespace mminfer::pipelines
