// A Whisper-style speech-to-text folder as Optimum exports it: encoder_model.onnx,
// decoder_model.onnx and decoder_with_past_model.onnx (also under onnx/), config.json,
// generation_config.json (forced prompt, lang_to_id, task_to_id, suppressed tokens),
// preprocessor_config.json (log-mel settings and the window length) and tokenizer.json.
// Audio is cut into windows of the model's length (30 s for Whisper); the windows decode together
// as the rows of one batch and their texts are joined. With timestamps the prompt leaves out
// <|notimestamps|>, Whisper's timestamp rules shape each step, and the windows decode one after
// another as Whisper's long-form transcription does: a window's complete segments end at its last
// pair of timestamps and the next window starts there (window_cut in whisper_segments.h), so a
// segment cut by the window's end is decoded again whole. Segments are offset by their window's start.
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "generate/decode_loop.h"
#include "generate/encoder_decoder_model.h"
#include "modal/audio/logmel.h"
#include "modal/text/tokenizer.h"
#include "pipelines/generation/feature_cache.h"
#include "mminfer/session.h"
#include "pipelines/generation/whisper_segments.h"

namespace mminfer::pipelines {

struct TranscribeOptions {
  std::string language;  // "en", "<|en|>" or empty: the folder's forced language, else detected
  std::string task;  // "transcribe" or "translate"; empty: the folder's forced task, else transcribe
  size_t max_new_tokens = 0;        // 0: the folder's generation_config
  size_t windows_per_batch = 8;     // windows decoded together without timestamps (bounds the cache's memory)
  size_t beams = 0;                 // > 1: beam search; 0: the folder's num_beams
  bool timestamps = false;          // timed segments (needs the folder's timestamp tokens)
};

struct Transcript {
  std::string text;
  std::string language;  // the language token used, e.g. "<|en|>"
  size_t windows = 0;
  std::vector<generate::TokenId> tokens;  // every window's new tokens, in order
  std::vector<TimedSegment> segments;     // with timestamps: every window's, in order
  // With timestamps: each window decoded, its start (seconds from the audio's start) and new tokens.
  std::vector<double> window_starts;
  std::vector<std::vector<generate::TokenId>> window_tokens;
  generate::DecodeTimings timings;        // summed over the batches
  double encoder_ms = 0;
};

class SpeechToText {
 public:
  // Throws Error naming the folder and what is missing or wrong.
  SpeechToText(const std::filesystem::path& dir, const SessionOptions& options, DType kv_cache = DType::kFloat32);

  int sample_rate() const { return logmel_->options().sample_rate; }
  // Throws Error (one line) unless the folder has Whisper's timestamp tokens.
  void require_timestamps() const;
  // Mono samples at sample_rate(). Throws Error for an empty clip.
  // Windows whose samples the feature cache holds (or repeated in the clip) skip the encoder.
  Transcript transcribe(const std::vector<float>& samples, const TranscribeOptions& options);
  // The encoder outputs' cache, by window (one per pipeline unless shared; null: none), and its counts.
  EncoderFeatures& features() { return cached_; }
  const EncoderFeatures& features() const { return cached_; }
  // The decoder's per-step time per op type (SessionOptions::profile).
  std::vector<OpTime> decoder_op_times() { return decoder_->op_times(); }

 private:
  std::vector<generate::TokenId> prompt(const std::string& language, const std::string& task, bool timestamps) const;
  std::string detect_language(size_t rows);
  // The window of audio from sample `begin` (shorter at the clip's end).
  std::span<const float> window(const std::vector<float>& samples, size_t begin) const;
  Tensor features(const std::vector<float>& samples, const std::vector<size_t>& begins) const;
  // Encodes and decodes the windows starting at `begins` as one batch; detects the language on
  // the first call when `language` is empty. Adds the times to `out`.
  std::vector<generate::DecodedSequence> decode_windows(const std::vector<float>& samples, const std::vector<size_t>& begins,
                                                        std::string& language, const std::string& task,
                                                        const TranscribeOptions& options, Transcript& out);

  std::filesystem::path dir_;
  std::unique_ptr<audio::LogMel> logmel_;
  int64_t window_samples_ = 0;
  generate::GenerationConfig config_;
  std::map<std::string, generate::TokenId> languages_, tasks_;
  std::optional<generate::TokenId> no_timestamps_;
  std::optional<generate::TimestampRules> timestamp_rules_;  // when tokenizer.json has the timestamps
  generate::TokenId start_ = 0;
  std::optional<generate::TokenId> forced_language_, forced_task_;
  int64_t context_ = 0;  // max_target_positions
  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<Session> encoder_;
  std::unique_ptr<generate::EncoderDecoderModel> decoder_;
  EncoderFeatures cached_{""};
};

}  // namespace mminfer::pipelines
