// One sequence's output as it is generated: applies the stop rules (stop tokens, stop strings,
// max_new_tokens, max total length) and hands each new token with its newly printable text to a
// callback. Text never splits a UTF-8 character, never shows a stop string or any part of one,
// and the stop token itself adds no text.
#pragma once
#include <cstddef>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "generate/generation_config.h"
#include "generate/incremental_decoder.h"
#include "generate/stop_strings.h"
#include "generate/token.h"

namespace mminfer::generate {

enum class StopReason { kNone, kStopToken, kStopString, kMaxNewTokens, kMaxLength, kFinished };
const char* stop_reason_name(StopReason reason);

struct StopRules {
  std::vector<TokenId> stop_token_ids;  // EOS ids and any others
  std::vector<std::string> stop_strings;
  size_t max_new_tokens = std::numeric_limits<size_t>::max();
  size_t max_length = std::numeric_limits<size_t>::max();  // prompt included

  static StopRules from_config(const GenerationConfig& config);
};

// token: the id just made (kNoToken for the text flushed by finish()); text: what it made printable.
using StreamCallback = std::function<void(TokenId token, std::string_view text)>;

class TokenStream {
 public:
  TokenStream(DecodeFn decode, StopRules rules, size_t prompt_length, StreamCallback callback = {});

  // Takes the next token; returns why the stream stopped, or kNone to go on.
  StopReason push(TokenId token);
  // Ends a stream the caller stops for its own reasons: prints what was held back.
  void finish();

  bool stopped() const { return reason_ != StopReason::kNone; }
  StopReason reason() const { return reason_; }
  const std::vector<TokenId>& tokens() const { return tokens_; }  // the new tokens, a stop token included
  const std::string& text() const { return text_; }               // all text printed so far

 private:
  // Flushes the decoder and the matcher at the end; may still find a stop string there.
  std::string final_text(bool& stopped_on_string);
  void emit(TokenId token, const std::string& text);

  IncrementalDecoder decoder_;
  StopStringMatcher matcher_;
  StopRules rules_;
  size_t prompt_length_;
  StreamCallback callback_;
  std::vector<TokenId> tokens_;
  std::string text_;
  StopReason reason_ = StopReason::kNone;
};

}  // namespace mminfer::generate
