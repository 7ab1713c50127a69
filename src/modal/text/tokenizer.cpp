#include "modal/text/tokenizer.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "modal/text/unicode.h"
#include "mminfer/status.h"

namespace mminfer::text {

namespace {

void require_utf8(std::string_view text) {
  size_t bad = find_invalid_utf8(text);
  if (bad == std::string_view::npos) return;
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(text[bad]));
  throw Error("text is not valid UTF-8: byte " + std::string(byte) + " at offset " + std::to_string(bad) +
              " starts no valid sequence");
}

}  // namespace

Tokenizer::Tokenizer(TokenizerParts parts) : parts_(std::move(parts)) {
  if (!parts_.model) throw Error("tokenizer has no model");
  truncation_ = parts_.truncation;
  padding_ = parts_.padding;
}

Tokenizer Tokenizer::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open tokenizer file '" + path + "'");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  try {
    return from_json(buffer.str());
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

// One stretch of text with no un-normalized added token in it.
void Tokenizer::append_ids(std::string_view segment, std::vector<int32_t>& ids) const {
  std::string normalized = parts_.normalizer ? parts_.normalizer->normalize(segment) : std::string(segment);
  std::vector<AddedVocabulary::Segment> parts;
  parts_.added_tokens.split(normalized, true, parts);
  std::vector<std::string> pieces;
  for (const auto& part : parts) {
    if (part.id >= 0) {
      ids.push_back(part.id);
      continue;
    }
    pieces.assign(1, std::string(part.text));
    if (parts_.pre_tokenizer) parts_.pre_tokenizer->pre_tokenize(pieces);
    for (const auto& piece : pieces)
      if (!piece.empty()) parts_.model->tokenize(piece, ids);
  }
}

std::vector<int32_t> Tokenizer::tokenize(std::string_view text) const {
  require_utf8(text);
  std::vector<int32_t> ids;
  std::vector<AddedVocabulary::Segment> segments;
  parts_.added_tokens.split(text, false, segments);
  for (const auto& s : segments) {
    if (s.id >= 0) ids.push_back(s.id);
    else append_ids(s.text, ids);
  }
  return ids;
}

Encoding Tokenizer::finish(std::vector<int32_t> first, std::vector<int32_t>* second, bool add_special_tokens) const {
  const PostProcessor* pp = add_special_tokens ? parts_.post_processor.get() : nullptr;
  if (truncation_) truncate(first, second, pp ? pp->added_tokens(second != nullptr) : 0, *truncation_);
  Encoding e = pp ? pp->process(first, second) : join_plain(first, second);
  if (padding_ && padding_->to_fixed_length) pad(e, padding_->length, *padding_);
  return e;
}

Encoding Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return finish(tokenize(text), nullptr, add_special_tokens);
}

Encoding Tokenizer::encode_pair(std::string_view first, std::string_view second, bool add_special_tokens) const {
  std::vector<int32_t> b = tokenize(second);
  return finish(tokenize(first), &b, add_special_tokens);
}

std::vector<Encoding> Tokenizer::encode_batch(const std::vector<std::string>& texts, bool add_special_tokens) const {
  std::vector<Encoding> out;
  out.reserve(texts.size());
  size_t longest = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    try {
      out.push_back(encode(texts[i], add_special_tokens));
    } catch (const Error& e) {
      throw Error("batch item " + std::to_string(i) + ": " + e.what());
    }
    longest = std::max(longest, out.back().ids.size());
  }
  if (padding_ && !padding_->to_fixed_length)
    for (auto& e : out) pad(e, longest, *padding_);
  return out;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int64_t id : ids) {
    const bool in_range = id >= 0 && id <= INT32_MAX;
    const auto id32 = static_cast<int32_t>(id);
    const std::string* token = in_range ? parts_.added_tokens.token(id32) : nullptr;
    if (token) {
      if (skip_special_tokens && parts_.added_tokens.is_special(id32)) continue;
    } else if (in_range) {
      token = parts_.model->vocab().token(id32);
    }
    if (!token) throw Error("cannot decode id " + std::to_string(id) + ": not in the vocabulary");
    tokens.push_back(*token);
  }
  std::string text;
  if (parts_.decoder) {
    parts_.decoder->decode(tokens);
    for (const auto& t : tokens) text += t;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) text += (i ? " " : "") + tokens[i];
  }
  return replace_invalid_utf8(text);
}

std::optional<int64_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto id = parts_.added_tokens.find(token)) return *id;
  if (auto id = parts_.model->vocab().find(token)) return *id;
  return std::nullopt;
}

std::optional<std::string> Tokenizer::id_to_token(int64_t id) const {
  if (id < 0 || id > INT32_MAX) return std::nullopt;
  if (const std::string* t = parts_.added_tokens.token(static_cast<int32_t>(id))) return *t;
  if (const std::string* t = parts_.model->vocab().token(static_cast<int32_t>(id))) return *t;
  return std::nullopt;
}

int64_t Tokenizer::vocab_end() const {
  int64_t end = parts_.model->vocab().end_id();
  for (const auto& t : parts_.added_tokens.tokens()) end = std::max<int64_t>(end, t.id + 1);
  return end;
}

}  // namespace mminfer::text
