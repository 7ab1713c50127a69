#include "pipelines/audio_encoder/audio_encoder_pipeline.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "mminfer/status.h"
#include "modal/audio/load.h"
#include "pipelines/audio_encoder/pooling.h"

namespace mminfer::audio_encoder {

namespace {

audio::LogMelOptions padded_to_chunk(audio::LogMelOptions options, int64_t chunk_samples) {
  options.pad_or_trim = chunk_samples;
  return options;
}

std::string dims_str(const ValueInfo& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.dims.size(); ++i) {
    if (i) s += ", ";
    s += v.dims[i] >= 0 ? std::to_string(v.dims[i]) : v.symbols[i].empty() ? "?" : v.symbols[i];
  }
  return s + "]";
}

// Checked before any work, so one bad clip in a batch costs nothing and names itself.
void check_samples(std::span<const float> samples, const std::string& which) {
  if (samples.empty()) throw Error("audio-encoder: " + which + "the audio is empty (0 samples)");
  for (size_t i = 0; i < samples.size(); ++i)
    if (!std::isfinite(samples[i]))
      throw Error("audio-encoder: " + which + "sample " + std::to_string(i) + " is NaN or infinite");
}

template <typename F>
auto prefixed(F&& load) {
  try {
    return load();
  } catch (const Error& e) {
    throw Error(std::string("audio-encoder: ") + e.what());
  }
}

}  // namespace

AudioEncoderPipeline::AudioEncoderPipeline(AudioEncoderConfig config, const SessionOptions& session)
    : config_(std::move(config)), logmel_(padded_to_chunk(config_.logmel, config_.chunk_samples)) {
  if (config_.chunk_samples < config_.logmel.hop)
    throw Error("audio-encoder: a chunk of " + std::to_string(config_.chunk_samples) + " samples is shorter than one hop (" +
                std::to_string(config_.logmel.hop) + ")");
  if (config_.max_batch < 1) throw Error("audio-encoder: max_batch must be at least 1");
  config_.logmel.pad_or_trim = config_.chunk_samples;
  frames_ = logmel_.frames(config_.chunk_samples);

  Status st = Session::load(config_.encoder_path, session, &session_);
  if (!st) throw Error("audio-encoder: " + st.message());
  const std::string what = "audio-encoder: the encoder " + config_.encoder_path;

  const auto& inputs = session_->inputs();
  if (inputs.size() != 1)
    throw Error(what + " has " + std::to_string(inputs.size()) +
                " inputs; an audio encoder takes one, log-mel features [batch, n_mels, frames]");
  const ValueInfo& in = inputs[0];
  input_name_ = in.name;
  if (in.dtype != DType::kFloat32)
    throw Error(what + " takes " + dtype_name(in.dtype) + " input \"" + in.name + "\"; log-mel features are float32");
  if (in.has_shape) {
    if (in.dims.size() != 3)
      throw Error(what + " input \"" + in.name + "\" is " + dims_str(in) + "; log-mel features are [batch, n_mels, frames]");
    if (in.dims[1] >= 0 && in.dims[1] != config_.logmel.n_mels)
      throw Error(what + " takes " + std::to_string(in.dims[1]) + " mel bins (input \"" + in.name + "\" is " + dims_str(in) +
                  ") but preprocess.n_mels is " + std::to_string(config_.logmel.n_mels));
    if (in.dims[2] >= 0 && in.dims[2] != frames_)
      throw Error(what + " takes " + std::to_string(in.dims[2]) + " frames (input \"" + in.name + "\" is " + dims_str(in) +
                  ") but a chunk of " + std::to_string(config_.chunk_samples) + " samples (preprocess.chunk_seconds) at hop " +
                  std::to_string(config_.logmel.hop) + " gives " + std::to_string(frames_));
    // A batch axis fixed at 1 still works, one chunk per run; other fixed sizes would need padding.
    if (in.dims[0] == 1) config_.max_batch = 1;
    if (in.dims[0] > 1)
      throw Error(what + " has a batch axis fixed at " + std::to_string(in.dims[0]) + "; export it dynamic (or 1)");
  }

  const auto& outputs = session_->outputs();
  std::string names;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].name == config_.hidden_output) output_index_ = i;
    names += (i ? ", \"" : "\"") + outputs[i].name + "\"";
  }
  if (outputs[output_index_].name != config_.hidden_output)
    throw Error(what + " has no output \"" + config_.hidden_output + "\" (outputs.hidden); it has " + names);
  const ValueInfo& out = outputs[output_index_];
  if (out.has_shape && out.dims.size() != 3)
    throw Error(what + " output \"" + out.name + "\" is " + dims_str(out) + "; hidden states are [batch, positions, width]");
  if (out.has_shape && out.dims[2] > 0) dimension_ = out.dims[2];
}

std::vector<float> AudioEncoderPipeline::decode(std::span<const uint8_t> bytes) const {
  return prefixed([&] { return audio::load_audio(bytes, {.sample_rate = config_.logmel.sample_rate}); });
}

std::vector<float> AudioEncoderPipeline::decode_file(const std::string& path) const {
  return prefixed([&] { return audio::load_audio_file(path, {.sample_rate = config_.logmel.sample_rate}); });
}

std::vector<float> AudioEncoderPipeline::embed(std::span<const float> samples) {
  const std::span<const float> one[1] = {samples};
  return std::move(run(one, false)[0]);
}

std::vector<float> AudioEncoderPipeline::embed_bytes(std::span<const uint8_t> bytes) { return embed(decode(bytes)); }

std::vector<float> AudioEncoderPipeline::embed_file(const std::string& path) { return embed(decode_file(path)); }

std::vector<std::vector<float>> AudioEncoderPipeline::embed_batch(std::span<const std::vector<float>> clips) {
  const std::vector<std::span<const float>> spans(clips.begin(), clips.end());
  return run(spans, true);
}

std::vector<std::vector<float>> AudioEncoderPipeline::run(std::span<const std::span<const float>> clips, bool name_clips) {
  const auto which = [&](size_t c) { return name_clips ? "clip " + std::to_string(c) + ": " : std::string(); };
  struct Chunk {
    size_t clip;
    std::span<const float> samples;
  };
  std::vector<Chunk> chunks;
  const size_t chunk_len = static_cast<size_t>(config_.chunk_samples);
  for (size_t c = 0; c < clips.size(); ++c) {
    check_samples(clips[c], which(c));
    const std::span<const float> all = clips[c];
    for (size_t start = 0; start < all.size(); start += chunk_len)
      chunks.push_back({c, all.subspan(start, std::min(chunk_len, all.size() - start))});
  }

  const int64_t n_mels = config_.logmel.n_mels;
  std::vector<EmbeddingPool> pools;
  for (size_t first = 0; first < chunks.size(); first += static_cast<size_t>(config_.max_batch)) {
    const size_t n = std::min(chunks.size() - first, static_cast<size_t>(config_.max_batch));
    Tensor features = Tensor::empty(DType::kFloat32, {static_cast<int64_t>(n), n_mels, frames_});
    for (size_t i = 0; i < n; ++i) logmel_.compute(chunks[first + i].samples, features.data<float>() + i * n_mels * frames_, frames_);

    std::vector<Tensor> outputs;
    Status st = session_->run({{input_name_, features}}, &outputs);
    if (!st) throw Error("audio-encoder: " + st.message());
    const Tensor& hidden = outputs[output_index_];
    if (hidden.dtype() != DType::kFloat32 || hidden.rank() != 3 || hidden.dim(0) != static_cast<int64_t>(n) ||
        hidden.dim(1) < 1 || hidden.dim(2) < 1 || (dimension_ && hidden.dim(2) != dimension_))
      throw Error("audio-encoder: for " + std::to_string(n) + " chunks the encoder returned " + dtype_name(hidden.dtype()) +
                  " " + shape_str(hidden.shape()) + "; expected float32 [batch, positions, " +
                  (dimension_ ? std::to_string(dimension_) : std::string("width")) + "]");
    const int64_t width = hidden.dim(2);
    if (pools.empty()) pools.assign(clips.size(), EmbeddingPool(config_.pooling, width));
    dimension_ = width;
    const int64_t positions = hidden.dim(1);
    for (size_t i = 0; i < n; ++i) {
      const Chunk& chunk = chunks[first + i];
      const int64_t valid_frames = logmel_.valid_frames(static_cast<int64_t>(chunk.samples.size()));
      pools[chunk.clip].add(hidden.data<float>() + i * positions * width, valid_positions(valid_frames, frames_, positions));
    }
  }

  std::vector<std::vector<float>> embeddings;
  for (size_t c = 0; c < pools.size(); ++c) {
    try {
      embeddings.push_back(pools[c].finish());
    } catch (const Error& e) {
      throw Error("audio-encoder: " + which(c) + e.what());
    }
  }
  return embeddings;
}

}  // namespace mminfer::audio_encoder
