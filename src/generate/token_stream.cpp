#include "generate/token_stream.h"

#include <algorithm>
#include <stdexcept>

namespace mminfer::generate {

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::kNone: return "none";
    case StopReason::kStopToken: return "stop_token";
    case StopReason::kStopString: return "stop_string";
    case StopReason::kMaxNewTokens: return "max_new_tokens";
    case StopReason::kMaxLength: return "max_length";
    case StopReason::kFinished: return "finished";
  }
  return "unknown";
}

StopRules StopRules::from_config(const GenerationConfig& config) {
  StopRules rules;
  rules.stop_token_ids = config.eos_token_ids;
  rules.stop_strings = config.stop_strings;
  if (config.max_new_tokens) rules.max_new_tokens = *config.max_new_tokens;
  else rules.max_length = config.max_length;
  return rules;
}

TokenStream::TokenStream(DecodeFn decode, StopRules rules, size_t prompt_length, StreamCallback callback)
    : decoder_(std::move(decode)), matcher_(rules.stop_strings), rules_(std::move(rules)),
      prompt_length_(prompt_length), callback_(std::move(callback)) {
  if (rules_.max_new_tokens == 0) throw std::invalid_argument("max_new_tokens must be at least 1");
  if (rules_.max_length <= prompt_length_) {
    throw std::invalid_argument("the prompt (" + std::to_string(prompt_length_) + " tokens) already fills max_length " +
                                std::to_string(rules_.max_length));
  }
}

void TokenStream::emit(TokenId token, const std::string& text) {
  text_ += text;
  if (callback_) callback_(token, text);
}

std::string TokenStream::final_text(bool& stopped_on_string) {
  StopStringMatcher::Result last = matcher_.push(decoder_.flush());
  stopped_on_string = last.stopped;
  return last.stopped ? last.text : last.text + matcher_.flush();
}

StopReason TokenStream::push(TokenId token) {
  if (stopped()) throw std::logic_error("token stream: push() after it stopped (" + std::string(stop_reason_name(reason_)) + ")");
  tokens_.push_back(token);
  if (std::find(rules_.stop_token_ids.begin(), rules_.stop_token_ids.end(), token) != rules_.stop_token_ids.end()) {
    bool on_string = false;
    const std::string text = final_text(on_string);
    reason_ = on_string ? StopReason::kStopString : StopReason::kStopToken;
    emit(token, text);
    return reason_;
  }
  StopStringMatcher::Result piece = matcher_.push(decoder_.push(token));
  if (piece.stopped) {
    reason_ = StopReason::kStopString;
    emit(token, piece.text);
    return reason_;
  }
  const bool out_of_new = tokens_.size() >= rules_.max_new_tokens;
  const bool out_of_length = prompt_length_ + tokens_.size() >= rules_.max_length;
  if (out_of_new || out_of_length) {
    bool on_string = false;
    piece.text += final_text(on_string);
    reason_ = on_string ? StopReason::kStopString : out_of_new ? StopReason::kMaxNewTokens : StopReason::kMaxLength;
  }
  emit(token, piece.text);
  return reason_;
}

void TokenStream::finish() {
  if (stopped()) return;
  bool on_string = false;
  const std::string text = final_text(on_string);
  reason_ = on_string ? StopReason::kStopString : StopReason::kFinished;
  if (!text.empty()) emit(kNoToken, text);
}

}  // namespace mminfer::generate
