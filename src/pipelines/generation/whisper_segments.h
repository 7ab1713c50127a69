// The timed segments of one Whisper window decoded in timestamp mode: a timestamp token opens a
// segment, the next one closes it; text with no open segment starts one at the last timestamp (or
// the window's start); a segment still open when the window's tokens end closes at `window_close`
// (the window's end, or the audio's when that comes first), never before its own start. Segments
// holding no token besides their timestamps are dropped. Times are seconds from the audio's start.
#pragma once
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "generate/token.h"
#include "generate/token_stream.h"

namespace mminfer::pipelines {

inline constexpr double kSecondsPerTimestamp = 0.02;  // Whisper's <|0.00|>, <|0.02|>, ... <|30.00|>

struct TimedSegment {
  double start = 0, end = 0;
  std::string text;                        // the tokens between the timestamps, decoded
  std::vector<generate::TokenId> tokens;   // as generated, its timestamps included
};

// `tokens`: the window's new tokens (the end token, if any, and whatever follows it are ignored).
std::vector<TimedSegment> timestamp_segments(std::span<const generate::TokenId> tokens, generate::TokenId timestamp_begin,
                                             generate::TokenId eot, double window_start, double window_close,
                                             const generate::DecodeFn& decode);

// Where one window of sequential (long-form) decoding stops, as openai/whisper's transcribe()
// decides: when the tokens (up to the end token) hold two timestamps in a row and do not end with
// text then a single timestamp, the window's complete segments end at the last such pair's first
// timestamp: `kept` counts the tokens through it and `timestamp` is its index (token -
// timestamp_begin), where the next window starts. Else every token before the end token is kept
// and the next window starts after this one.
struct WindowCut {
  size_t kept = 0;
  std::optional<int64_t> timestamp;
};
WindowCut window_cut(std::span<const generate::TokenId> tokens, generate::TokenId timestamp_begin, generate::TokenId eot);

// Samples from one window's start to the next's: the cut's timestamp, never under one timestamp
// step (no endless loop on <|0.00|>) nor over the window (a model whose window is shorter than
// Whisper's 30 s may name a time past it); the whole window without a timestamp.
size_t seek_advance(const WindowCut& cut, size_t window_samples, int sample_rate);

// [hh:]mm:ss.mmm, hours only when there are any.
std::string format_timestamp(double seconds);

}  // namespace mminfer::pipelines
