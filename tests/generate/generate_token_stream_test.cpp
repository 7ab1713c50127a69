// Streaming text: decoders that split UTF-8 characters across tokens, stop strings across token
// boundaries, stop tokens and length limits, with what each callback receives.
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "generate/incremental_decoder.h"
#include "generate/stop_strings.h"
#include "generate/token_stream.h"

namespace mminfer::generate {
namespace {

// A byte-level vocabulary: token i is pieces[i], any bytes at all.
struct ByteVocab {
  std::vector<std::string> pieces;
  // Raw bytes, incomplete characters left as they are.
  DecodeFn raw() const {
    return [this](std::span<const TokenId> ids) {
      std::string out;
      for (TokenId id : ids) out += pieces.at(static_cast<size_t>(id));
      return out;
    };
  }
  // Like Hugging Face's byte-level decoders: bytes that do not form a character become U+FFFD.
  DecodeFn replacing() const {
    return [this](std::span<const TokenId> ids) {
      std::string bytes = raw()(ids), out;
      for (size_t i = 0; i < bytes.size();) {
        const auto lead = static_cast<unsigned char>(bytes[i]);
        size_t n = lead < 0x80 ? 1 : (lead & 0xE0) == 0xC0 ? 2 : (lead & 0xF0) == 0xE0 ? 3 : (lead & 0xF8) == 0xF0 ? 4 : 0;
        bool ok = n > 0 && i + n <= bytes.size();
        for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(bytes[i + k]) & 0xC0) == 0x80;
        if (ok) {
          out += bytes.substr(i, n);
          i += n;
        } else {
          out += "\xEF\xBF\xBD";
          ++i;
        }
      }
      return out;
    };
  }
};

// Splits `text` into pieces of 1 and 2 bytes, alternating, so most characters break apart.
ByteVocab split_bytes(const std::string& text) {
  ByteVocab v;
  for (size_t i = 0, n = 1; i < text.size(); i += n, n = 3 - n) v.pieces.push_back(text.substr(i, n));
  return v;
}

bool is_whole_utf8(const std::string& s) {
  if (s.empty()) return true;
  if ((static_cast<unsigned char>(s[0]) & 0xC0) == 0x80) return false;
  return !ends_with_incomplete_utf8(s);
}

using Events = std::vector<std::pair<TokenId, std::string>>;

Events run(TokenStream& stream, const std::vector<TokenId>& tokens, StopReason& reason) {
  reason = StopReason::kNone;
  for (TokenId t : tokens) {
    reason = stream.push(t);
    if (reason != StopReason::kNone) break;
  }
  if (reason == StopReason::kNone) {
    stream.finish();
    reason = stream.reason();
  }
  return {};
}

const std::string kMixed = "h\xC3\xA9llo \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x99\x82!";  // héllo 中文 🙂!

void expect_whole_characters(const ByteVocab& vocab, const DecodeFn& decode) {
  Events events;
  TokenStream stream(decode, {}, 0, [&](TokenId t, std::string_view text) { events.emplace_back(t, std::string(text)); });
  std::vector<TokenId> ids;
  for (size_t i = 0; i < vocab.pieces.size(); ++i) ids.push_back(static_cast<TokenId>(i));
  StopReason reason;
  run(stream, ids, reason);
  EXPECT_EQ(reason, StopReason::kFinished);
  std::string joined;
  for (const auto& [token, text] : events) {
    EXPECT_TRUE(is_whole_utf8(text)) << "token " << token << " printed a broken character";
    joined += text;
  }
  EXPECT_EQ(joined, kMixed);
  EXPECT_EQ(stream.text(), kMixed);
  EXPECT_EQ(events.size(), ids.size());  // one callback per token, nothing left for finish()
}

TEST(TokenStream, NeverSplitsACharacterWithARawByteDecoder) {
  const ByteVocab vocab = split_bytes(kMixed);
  expect_whole_characters(vocab, vocab.raw());
}

TEST(TokenStream, NeverSplitsACharacterWithAReplacingDecoder) {
  const ByteVocab vocab = split_bytes(kMixed);
  expect_whole_characters(vocab, vocab.replacing());
}

TEST(TokenStream, StopStringAcrossTokensIsHeldBackAndNeverPrinted) {
  ByteVocab vocab{{"Hello", " wor", "ld<", "/s", ">tail", "x"}};
  Events events;
  StopRules rules;
  rules.stop_strings = {"</s>"};
  TokenStream stream(vocab.raw(), rules, 0, [&](TokenId t, std::string_view text) { events.emplace_back(t, std::string(text)); });
  StopReason reason;
  run(stream, {0, 1, 2, 3, 4, 5}, reason);
  EXPECT_EQ(reason, StopReason::kStopString);
  EXPECT_EQ(events, (Events{{0, "Hello"}, {1, " wor"}, {2, "ld"}, {3, ""}, {4, ""}}));
  EXPECT_EQ(stream.text(), "Hello world");
  EXPECT_EQ(stream.tokens(), (std::vector<TokenId>{0, 1, 2, 3, 4}));
}

TEST(TokenStream, AFalseStartIsReleasedWhenTheNextTokenRulesItOut) {
  ByteVocab vocab{{"a<", "/b", "c"}};
  Events events;
  StopRules rules;
  rules.stop_strings = {"</s>", "STOP"};
  TokenStream stream(vocab.raw(), rules, 0, [&](TokenId t, std::string_view text) { events.emplace_back(t, std::string(text)); });
  StopReason reason;
  run(stream, {0, 1, 2}, reason);
  EXPECT_EQ(reason, StopReason::kFinished);
  EXPECT_EQ(events, (Events{{0, "a"}, {1, "</b"}, {2, "c"}}));
}

TEST(TokenStream, StopTokenFlushesHeldTextAndAddsNone) {
  ByteVocab vocab{{"x", "y<", "<eos>"}};
  Events events;
  StopRules rules;
  rules.stop_token_ids = {2};
  rules.stop_strings = {"<|end|>"};
  TokenStream stream(vocab.raw(), rules, 4, [&](TokenId t, std::string_view text) { events.emplace_back(t, std::string(text)); });
  StopReason reason;
  run(stream, {0, 1, 2, 0}, reason);
  EXPECT_EQ(reason, StopReason::kStopToken);
  EXPECT_EQ(events, (Events{{0, "x"}, {1, "y"}, {2, "<"}}));
  EXPECT_EQ(stream.tokens(), (std::vector<TokenId>{0, 1, 2}));
  EXPECT_THROW(stream.push(0), std::logic_error);
}

TEST(TokenStream, LengthLimitsStopAndFlushAnOpenCharacter) {
  ByteVocab vocab{{"a", "\xE4\xB8", "\xAD"}};
  StopRules by_new;
  by_new.max_new_tokens = 2;
  Events events;
  TokenStream a(vocab.raw(), by_new, 3, [&](TokenId t, std::string_view text) { events.emplace_back(t, std::string(text)); });
  StopReason reason;
  run(a, {0, 1, 2}, reason);
  EXPECT_EQ(reason, StopReason::kMaxNewTokens);
  EXPECT_EQ(events, (Events{{0, "a"}, {1, "\xE4\xB8"}}));  // the end: the open bytes go out as they are
  StopRules by_length;
  by_length.max_length = 6;
  TokenStream b(vocab.raw(), by_length, 3, {});
  run(b, {0, 1, 2, 0}, reason);
  EXPECT_EQ(reason, StopReason::kMaxLength);
  EXPECT_EQ(b.text(), "a\xE4\xB8\xAD");
  EXPECT_THROW(TokenStream(vocab.raw(), by_length, 6, {}), std::invalid_argument);
}

TEST(TokenStream, StopStringInsideAMultiByteCharacterSplitAcrossTokens) {
  ByteVocab vocab{{"ok ", "\xE4", "\xB8", "\xAD", "!"}};  // 中 in three tokens
  StopRules rules;
  rules.stop_strings = {"\xE4\xB8\xAD"};
  TokenStream stream(vocab.replacing(), rules, 0, {});
  StopReason reason;
  run(stream, {0, 1, 2, 3, 4}, reason);
  EXPECT_EQ(reason, StopReason::kStopString);
  EXPECT_EQ(stream.text(), "ok ");
  EXPECT_EQ(stream.tokens().size(), 4u);
}

TEST(StopStringMatcher, EarliestMatchWinsAndEmptyStringsAreRejected) {
  StopStringMatcher m({"cd", "bcx", "b"});
  const auto r = m.push("abcd");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "a");
  EXPECT_THROW(StopStringMatcher({"ok", ""}), std::invalid_argument);
}

// A decoder that drops a token's leading space unless a neighbour precedes it (SentencePiece):
// the window keeps the space between words.
TEST(IncrementalDecoder, KeepsSpacesThatDependOnTheLeftNeighbour) {
  const std::vector<std::string> words{"Hello", "world", "again"};
  IncrementalDecoder decoder([&](std::span<const TokenId> ids) {
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) out += (i ? " " : "") + words.at(static_cast<size_t>(ids[i]));
    return out;
  });
  std::string text;
  for (TokenId t : {0, 1, 2}) text += decoder.push(t);
  text += decoder.flush();
  EXPECT_EQ(text, "Hello world again");
}

}  // namespace
}  // namespace mminfer::generate
