// The timed segments of one Whisper window decoded in timestamp mode: a timestamp token opens a
// segment, the next one closes it; text with no open segment starts one at the last timestamp (or
// the window's start); a segment still open when the window's tokens end closes at `window_close`
// (the window's end, or the audio's when that comes first), never before its own start. Segments
// holding no token besides their timestamps are dropped. Times are seconds from the audio's start.
#pragma once
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

// [hh:]mm:ss.mmm, hours only when there are any.
std::string format_timestamp(double seconds);

}  // namespace mminfer::pipelines
