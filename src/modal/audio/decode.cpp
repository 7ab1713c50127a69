#include "modal/audio/decode.h"

#include <sndfile.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>

#include "mminfer/status.h"

namespace mminfer::audio {

namespace {

constexpr int kMinRate = 1000, kMaxRate = 768000;
constexpr sf_count_t kChunkFrames = 16384;

// libsndfile reads a memory buffer through callbacks on this cursor.
struct MemoryFile {
  std::span<const uint8_t> bytes;
  sf_count_t pos = 0;
};

sf_count_t mem_length(void* user) { return static_cast<sf_count_t>(static_cast<MemoryFile*>(user)->bytes.size()); }

sf_count_t mem_seek(sf_count_t offset, int whence, void* user) {
  auto* f = static_cast<MemoryFile*>(user);
  const sf_count_t size = static_cast<sf_count_t>(f->bytes.size());
  sf_count_t base = whence == SEEK_CUR ? f->pos : whence == SEEK_END ? size : 0;
  f->pos = std::clamp<sf_count_t>(base + offset, 0, size);
  return f->pos;
}

sf_count_t mem_read(void* dst, sf_count_t count, void* user) {
  auto* f = static_cast<MemoryFile*>(user);
  const sf_count_t n = std::clamp<sf_count_t>(static_cast<sf_count_t>(f->bytes.size()) - f->pos, 0, count);
  if (n > 0) std::memcpy(dst, f->bytes.data() + f->pos, static_cast<size_t>(n));
  f->pos += n;
  return n;
}

sf_count_t mem_write(const void*, sf_count_t, void*) { return 0; }
sf_count_t mem_tell(void* user) { return static_cast<MemoryFile*>(user)->pos; }

struct Closer {
  void operator()(SNDFILE* f) const { sf_close(f); }
};
using SndFile = std::unique_ptr<SNDFILE, Closer>;

// libsndfile's messages may start with "Error : " and end with a period or newline; ours are
// one line.
std::string sndfile_message(SNDFILE* f) {
  std::string m = sf_strerror(f);
  if (m.starts_with("Error : ")) m.erase(0, 8);
  while (!m.empty() && (m.back() == '.' || m.back() == '\n' || m.back() == ' ')) m.pop_back();
  std::replace(m.begin(), m.end(), '\n', ' ');
  return m;
}

std::string seconds(double s) {
  std::ostringstream o;
  o.precision(1);
  o << std::fixed << s << " s";
  return o.str();
}

Audio read_mono(SNDFILE* file, const SF_INFO& info, const DecodeOptions& options, const std::string& what) {
  if (info.samplerate < kMinRate || info.samplerate > kMaxRate)
    throw Error(what + ": sample rate " + std::to_string(info.samplerate) + " Hz is outside " +
                std::to_string(kMinRate) + "-" + std::to_string(kMaxRate) + " Hz");
  if (info.channels < 1) throw Error(what + ": no audio channels");
  // An Ogg stream cut short has no final page, so its length is unknown (SF_COUNT_MAX): it
  // decodes up to the cut. MP3 lengths are estimates. Other formats state the exact length.
  const bool length_known = info.frames != SF_COUNT_MAX;
  const bool length_exact = length_known && (info.format & SF_FORMAT_TYPEMASK) != SF_FORMAT_MPEG;
  if (length_known && info.frames <= 0) throw Error(what + ": no audio samples");
  const double duration = static_cast<double>(info.frames) / info.samplerate;
  if (length_known && duration > options.max_seconds)
    throw Error(what + ": audio is " + seconds(duration) + " long, over the " + seconds(options.max_seconds) +
                " limit");

  Audio audio;
  audio.sample_rate = info.samplerate;
  // Capped: a header may claim far more samples than the data holds.
  audio.samples.reserve(static_cast<size_t>(std::min<sf_count_t>(length_known ? info.frames : 0, 1 << 24)));
  const int channels = info.channels;
  std::vector<float> chunk(static_cast<size_t>(kChunkFrames) * channels);
  for (;;) {
    const sf_count_t got = sf_readf_float(file, chunk.data(), kChunkFrames);
    for (sf_count_t i = 0; i < got; ++i) {
      const float* frame = chunk.data() + i * channels;
      float sum = 0;
      for (int c = 0; c < channels; ++c) sum += frame[c];
      if (!std::isfinite(sum))
        throw Error(what + ": sample " + std::to_string(audio.samples.size()) + " is NaN or infinite");
      audio.samples.push_back(sum / channels);
    }
    if (got < kChunkFrames) break;
    if (static_cast<double>(audio.samples.size()) / info.samplerate > options.max_seconds)
      throw Error(what + ": audio is over the " + seconds(options.max_seconds) + " limit");
  }
  if (sf_error(file) != SF_ERR_NO_ERROR) throw Error(what + ": truncated or corrupt audio: " + sndfile_message(file));
  if (audio.samples.empty()) throw Error(what + ": no audio samples");
  const auto decoded = static_cast<sf_count_t>(audio.samples.size());
  if (length_exact && decoded < info.frames)
    throw Error(what + ": truncated or corrupt audio: the header promises " + std::to_string(info.frames) +
                " samples, only " + std::to_string(decoded) + " decode");
  return audio;
}

}  // namespace

// Known cost: libsndfile 1.2.0 leaks ~6 KB (a vorbis_info) for an Ogg stream whose headers
// fail to parse; tests/modal/audio_test.cpp's mutation test shows it under LeakSanitizer.
Audio decode_audio(std::span<const uint8_t> bytes, const DecodeOptions& options) {
  const std::string what = "audio (" + std::to_string(bytes.size()) + " bytes)";
  if (bytes.empty()) throw Error("audio: empty input (0 bytes)");
  MemoryFile mem{bytes};
  SF_VIRTUAL_IO io{mem_length, mem_seek, mem_read, mem_write, mem_tell};
  SF_INFO info{};
  SndFile file(sf_open_virtual(&io, SFM_READ, &info, &mem));
  if (!file) throw Error(what + ": cannot decode: " + sndfile_message(nullptr));
  return read_mono(file.get(), info, options, what);
}

std::optional<AudioHeader> read_audio_header(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return std::nullopt;
  MemoryFile mem{bytes};
  SF_VIRTUAL_IO io{mem_length, mem_seek, mem_read, mem_write, mem_tell};
  SF_INFO info{};
  SndFile file(sf_open_virtual(&io, SFM_READ, &info, &mem));
  if (!file) return std::nullopt;
  AudioHeader h;
  h.sample_rate = info.samplerate;
  // SF_COUNT_MAX: an Ogg stream cut short, whose length nobody knows before decoding it.
  if (info.frames != SF_COUNT_MAX) h.frames = info.frames;
  return h;
}

Audio decode_audio_file(const std::string& path, const DecodeOptions& options) {
  const std::string what = "audio file " + path;
  SF_INFO info{};
  SndFile file(sf_open(path.c_str(), SFM_READ, &info));
  if (!file) throw Error(what + ": cannot decode: " + sndfile_message(nullptr));
  return read_mono(file.get(), info, options, what);
}

}  // namespace mminfer::audio
