// Whisper's timestamp mode as a logits processor, following the rules of openai/whisper's decoder
// (Hugging Face's WhisperTimeStampLogitsProcessor is the same). The generated part of a sequence
// (what follows the prompt) is checked and the step's logits masked so that:
//   - <|notimestamps|> is never chosen;
//   - timestamps come in pairs: after two timestamps in a row (or one at the start) text follows;
//     after text and one timestamp, only a timestamp or a special token such as the end (no text);
//   - timestamps never decrease, and a segment has a nonzero length: right after a closing
//     timestamp the next may equal it, otherwise it must be later than the last one;
//   - the first generated token is a timestamp no later than max_initial_index;
//   - when the timestamps' summed probability exceeds the likeliest text token's, a timestamp is
//     forced (every token below timestamp_begin masked).
// Token layout as in Whisper's vocabulary: text below eot, specials from eot, timestamps from
// timestamp_begin (<|0.00|>) to the end of the vocabulary, one per 0.02 s.
#pragma once
#include <cstddef>
#include <optional>
#include <span>

#include "generate/token.h"

namespace mminfer::generate {

struct TimestampRules {
  TokenId eot = 0;
  TokenId no_timestamps = 0;
  TokenId timestamp_begin = 0;
  std::optional<size_t> max_initial_index = 50;  // 1.0 s; none: any first timestamp
};

// Rewrites one row of logits (raw or log-probabilities); `sequence` holds the prompt's
// `prompt_length` tokens and then the generated ones. Throws std::invalid_argument when the
// token layout does not fit the vocabulary.
void apply_timestamp_rules(std::span<float> logits, std::span<const TokenId> sequence, size_t prompt_length,
                           const TimestampRules& rules);

}  // namespace mminfer::generate
