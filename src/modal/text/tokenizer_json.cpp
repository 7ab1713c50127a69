#include "modal/text/tokenizer_json.h"

#include <nlohmann/json.hpp>

#include "core/one_line.h"
#include "modal/text/bpe_model.h"
#include "modal/text/wordpiece_model.h"
#include "mminfer/status.h"

namespace mminfer::text {

namespace {

using nlohmann::json;

// A JSON value with the path that reached it, so every error can say where it is.
class Node {
 public:
  // Components nest (Sequence in Sequence ...) and are read recursively, so depth is capped
  // well below what would exhaust the stack; real files nest two or three levels.
  static constexpr int kMaxDepth = 64;
  Node(const json& value, std::string path, int depth = 0) : v_(value), path_(std::move(path)), depth_(depth) {
    if (depth_ > kMaxDepth) fail("nested more than " + std::to_string(kMaxDepth) + " levels deep");
  }

  [[noreturn]] void fail(const std::string& problem) const {
    throw Error(one_line("tokenizer.json: " + (path_.empty() ? std::string("top level") : path_) + ": " + problem));
  }
  const std::string& path() const { return path_; }
  bool is_null() const { return v_.is_null(); }

  // A present, non-null member; `required` fails when it is absent.
  std::optional<Node> get(const std::string& key) const {
    expect(v_.is_object(), "an object");
    auto it = v_.find(key);
    if (it == v_.end() || it->is_null()) return std::nullopt;
    return Node(*it, path_.empty() ? key : path_ + "." + key, depth_ + 1);
  }
  Node required(const std::string& key) const {
    auto n = get(key);
    if (!n) fail("missing '" + key + "'");
    return *n;
  }

  std::string str() const {
    expect(v_.is_string(), "a string");
    return v_.get<std::string>();
  }
  bool boolean() const {
    expect(v_.is_boolean(), "true or false");
    return v_.get<bool>();
  }
  int64_t integer(int64_t lo, int64_t hi) const {
    expect(v_.is_number_integer(), "an integer");
    int64_t x = v_.is_number_unsigned() && v_.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : v_.get<int64_t>();
    if (x < lo || x > hi) fail("expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(x));
    return x;
  }
  double number() const {
    expect(v_.is_number(), "a number");
    return v_.get<double>();
  }
  std::vector<Node> items() const {
    expect(v_.is_array(), "an array");
    std::vector<Node> out;
    out.reserve(v_.size());
    for (size_t i = 0; i < v_.size(); ++i) out.emplace_back(v_[i], path_ + "[" + std::to_string(i) + "]", depth_ + 1);
    return out;
  }
  const json& raw() const { return v_; }

  // Optional members with defaults.
  std::string str_or(const std::string& key, std::string fallback) const {
    auto n = get(key);
    return n ? n->str() : fallback;
  }
  bool bool_or(const std::string& key, bool fallback) const {
    auto n = get(key);
    return n ? n->boolean() : fallback;
  }
  std::string type() const { return required("type").str(); }

 private:
  void expect(bool ok, const char* what) const {
    if (!ok) fail(std::string("expected ") + what + ", got " + v_.type_name());
  }
  const json& v_;
  std::string path_;
  int depth_;
};

constexpr int64_t kMaxId = (1 << 24) - 1;

[[noreturn]] void unsupported(const Node& n, const std::string& kind, const std::string& type, const char* supported) {
  n.fail(kind + " type '" + type + "' is not supported (supported: " + supported + ")");
}

// {"String": "..."} or {"Regex": "..."} as Split and Replace write their patterns.
struct Pattern {
  std::string text;
  bool is_regex;
};
Pattern parse_pattern(const Node& n) {
  if (auto s = n.get("String")) return {s->str(), false};
  if (auto r = n.get("Regex")) return {r->str(), true};
  n.fail("expected {\"String\": ...} or {\"Regex\": ...}");
}

// Regex compile errors name the pattern but not where it sits in the file.
template <typename F>
auto with_path(const Node& n, F&& make) {
  try {
    return make();
  } catch (const Error& e) {
    n.fail(e.what());
  }
}

std::unique_ptr<Normalizer> parse_normalizer(const Node& n) {
  const std::string type = n.type();
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::kNFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::kNFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::kNFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::kNFKD);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
  if (type == "Strip") return std::make_unique<StripNormalizer>(n.bool_or("strip_left", true), n.bool_or("strip_right", true));
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(n.required("prepend").str());
  if (type == "Replace") {
    Pattern p = parse_pattern(n.required("pattern"));
    std::string content = n.required("content").str();
    if (!p.is_regex) return ReplaceNormalizer::literal(p.text, content);
    return with_path(n, [&] { return ReplaceNormalizer::regex(p.text, content); });
  }
  if (type == "BertNormalizer") {
    BertNormalizerOptions o;
    o.clean_text = n.bool_or("clean_text", true);
    o.handle_chinese_chars = n.bool_or("handle_chinese_chars", true);
    o.lowercase = n.bool_or("lowercase", true);
    o.strip_accents = n.bool_or("strip_accents", o.lowercase);  // null: follow lowercase
    return std::make_unique<BertNormalizer>(o);
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (const Node& s : n.required("normalizers").items()) steps.push_back(parse_normalizer(s));
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  unsupported(n, "normalizer", type, "NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, Strip, Prepend, Replace, BertNormalizer, Sequence");
}

SplitBehavior parse_behavior(const Node& n) {
  const std::string b = n.str();
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  n.fail("unknown split behavior '" + b + "'");
}

std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const Node& n) {
  const std::string type = n.type();
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelPreTokenizer>(n.bool_or("add_prefix_space", true), n.bool_or("use_regex", true));
  if (type == "Split") {
    Pattern p = parse_pattern(n.required("pattern"));
    SplitBehavior behavior = parse_behavior(n.required("behavior"));
    bool invert = n.bool_or("invert", false);
    if (!p.is_regex) return SplitPreTokenizer::literal(p.text, behavior, invert);
    return with_path(n, [&] { return SplitPreTokenizer::regex(p.text, behavior, invert); });
  }
  if (type == "BertPreTokenizer") return CharClassPreTokenizer::bert();
  if (type == "Whitespace") return make_whitespace_pre_tokenizer();
  if (type == "WhitespaceSplit") return CharClassPreTokenizer::whitespace_split();
  if (type == "Punctuation") {
    auto b = n.get("behavior");
    return CharClassPreTokenizer::punctuation(b ? parse_behavior(*b) : SplitBehavior::kIsolated);
  }
  if (type == "Digits") return CharClassPreTokenizer::digits(n.bool_or("individual_digits", false));
  if (type == "CharDelimiterSplit") return SplitPreTokenizer::literal(n.required("delimiter").str(), SplitBehavior::kRemoved, false);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (const Node& s : n.required("pretokenizers").items()) steps.push_back(parse_pre_tokenizer(s));
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  unsupported(n, "pre_tokenizer", type,
              "ByteLevel, Split, BertPreTokenizer, Whitespace, WhitespaceSplit, Punctuation, Digits, CharDelimiterSplit, Sequence");
}

Vocab parse_vocab(const Node& n) {
  if (!n.raw().is_object()) n.fail(std::string("expected an object of token: id, got ") + n.raw().type_name());
  Vocab vocab;
  vocab.reserve(n.raw().size());
  for (auto it = n.raw().begin(); it != n.raw().end(); ++it) {
    Node id(it.value(), n.path() + "[\"" + it.key() + "\"]");
    vocab.add(it.key(), static_cast<int32_t>(id.integer(0, kMaxId)));
  }
  return vocab;
}

std::vector<std::pair<std::string, std::string>> parse_merges(const Node& n) {
  std::vector<std::pair<std::string, std::string>> merges;
  for (const Node& m : n.items()) {
    if (m.raw().is_array()) {  // newer files: ["a", "b"]
      auto parts = m.items();
      if (parts.size() != 2) m.fail("expected a pair of tokens, got " + std::to_string(parts.size()) + " items");
      merges.emplace_back(parts[0].str(), parts[1].str());
      continue;
    }
    std::string s = m.str();  // older files: "a b"
    size_t space = s.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == s.size() || s.find(' ', space + 1) != std::string::npos)
      m.fail("merge '" + s + "' is not two tokens separated by one space");
    merges.emplace_back(s.substr(0, space), s.substr(space + 1));
  }
  return merges;
}

std::unique_ptr<Model> parse_model(const Node& n) {
  std::string type;
  if (auto t = n.get("type")) type = t->str();
  else if (n.get("merges")) type = "BPE";  // files from before "type" was written
  else if (n.get("max_input_chars_per_word")) type = "WordPiece";
  else n.fail("missing 'type'");
  if (type == "BPE") {
    if (auto dropout = n.get("dropout"); dropout && dropout->number() > 0)
      dropout->fail("BPE dropout is random at inference time and is not supported");
    BpeOptions o;
    if (auto unk = n.get("unk_token")) o.unk_token = unk->str();
    o.continuing_subword_prefix = n.str_or("continuing_subword_prefix", "");
    o.end_of_word_suffix = n.str_or("end_of_word_suffix", "");
    o.fuse_unk = n.bool_or("fuse_unk", false);
    o.byte_fallback = n.bool_or("byte_fallback", false);
    o.ignore_merges = n.bool_or("ignore_merges", false);
    Vocab vocab = parse_vocab(n.required("vocab"));
    auto merges = parse_merges(n.required("merges"));
    return with_path(n, [&] { return std::make_unique<BpeModel>(std::move(vocab), merges, std::move(o)); });
  }
  if (type == "WordPiece") {
    WordPieceOptions o;
    o.unk_token = n.str_or("unk_token", o.unk_token);
    o.continuing_subword_prefix = n.str_or("continuing_subword_prefix", o.continuing_subword_prefix);
    if (auto m = n.get("max_input_chars_per_word")) o.max_input_chars_per_word = static_cast<size_t>(m->integer(0, INT64_MAX));
    Vocab vocab = parse_vocab(n.required("vocab"));
    return with_path(n, [&] { return std::make_unique<WordPieceModel>(std::move(vocab), std::move(o)); });
  }
  unsupported(n, "model", type, "BPE, WordPiece");
}

// ["[CLS]", 101] as BertProcessing and RobertaProcessing write their tokens.
int32_t parse_token_pair(const Node& n) {
  auto items = n.items();
  if (items.size() != 2) n.fail("expected [token, id]");
  items[0].str();
  return static_cast<int32_t>(items[1].integer(0, kMaxId));
}

std::vector<TemplateProcessor::Piece> parse_template(const Node& n, const Node& specials) {
  std::vector<TemplateProcessor::Piece> pieces;
  for (const Node& item : n.items()) {
    using P = TemplateProcessor::Piece;
    if (auto s = item.get("SpecialToken")) {
      std::string name = s->required("id").str();
      auto entry = specials.get(name);
      if (!entry) s->fail("special token '" + name + "' is not in special_tokens");
      P p{P::kSpecial, {}, s->get("type_id") ? s->required("type_id").integer(0, kMaxId) : 0};
      for (const Node& id : entry->required("ids").items()) p.special_ids.push_back(static_cast<int32_t>(id.integer(0, kMaxId)));
      pieces.push_back(std::move(p));
    } else if (auto q = item.get("Sequence")) {
      std::string which = q->required("id").str();
      if (which != "A" && which != "B") q->fail("sequence id must be A or B, got '" + which + "'");
      pieces.push_back({which == "A" ? P::kFirst : P::kSecond, {}, q->get("type_id") ? q->required("type_id").integer(0, kMaxId) : 0});
    } else {
      item.fail("expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    }
  }
  return pieces;
}

std::unique_ptr<PostProcessor> parse_post_processor(const Node& n) {
  const std::string type = n.type();
  if (type == "TemplateProcessing") {
    Node specials = n.required("special_tokens");
    auto single = parse_template(n.required("single"), specials);
    auto pair = n.get("pair") ? parse_template(n.required("pair"), specials) : single;
    return std::make_unique<TemplateProcessor>(std::move(single), std::move(pair));
  }
  if (type == "BertProcessing") return TemplateProcessor::bert(parse_token_pair(n.required("cls")), parse_token_pair(n.required("sep")));
  if (type == "RobertaProcessing")
    return TemplateProcessor::roberta(parse_token_pair(n.required("cls")), parse_token_pair(n.required("sep")));
  if (type == "ByteLevel") return std::make_unique<PassThroughProcessor>();
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (const Node& s : n.required("processors").items()) steps.push_back(parse_post_processor(s));
    return with_path(n, [&] { return std::make_unique<SequenceProcessor>(std::move(steps)); });
  }
  unsupported(n, "post_processor", type, "TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence");
}

std::unique_ptr<Decoder> parse_decoder(const Node& n) {
  const std::string type = n.type();
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "WordPiece") return std::make_unique<WordPieceDecoder>(n.str_or("prefix", "##"), n.bool_or("cleanup", true));
  if (type == "BPEDecoder") return std::make_unique<BpeSuffixDecoder>(n.str_or("suffix", "</w>"));
  if (type == "Replace") {
    Pattern p = parse_pattern(n.required("pattern"));
    if (p.is_regex) n.fail("Replace decoder with a Regex pattern is not supported");
    return std::make_unique<ReplaceDecoder>(p.text, n.required("content").str());
  }
  if (type == "Strip")
    return std::make_unique<StripDecoder>(n.required("content").str(), static_cast<size_t>(n.required("start").integer(0, 1 << 20)),
                                          static_cast<size_t>(n.required("stop").integer(0, 1 << 20)));
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> steps;
    for (const Node& s : n.required("decoders").items()) steps.push_back(parse_decoder(s));
    return std::make_unique<SequenceDecoder>(std::move(steps));
  }
  unsupported(n, "decoder", type, "ByteLevel, WordPiece, BPEDecoder, Replace, Strip, Fuse, ByteFallback, Sequence");
}

AddedVocabulary parse_added_tokens(const Node& n) {
  std::vector<AddedToken> tokens;
  for (const Node& t : n.items()) {
    AddedToken a;
    a.id = static_cast<int32_t>(t.required("id").integer(0, kMaxId));
    a.content = t.required("content").str();
    if (a.content.empty()) t.fail("empty content");
    a.single_word = t.bool_or("single_word", false);
    a.lstrip = t.bool_or("lstrip", false);
    a.rstrip = t.bool_or("rstrip", false);
    a.special = t.bool_or("special", false);
    a.normalized = t.bool_or("normalized", !a.special);
    tokens.push_back(std::move(a));
  }
  return AddedVocabulary(std::move(tokens));
}

Side parse_side(const Node& n) {
  const std::string s = n.str();
  if (s == "Right") return Side::kRight;
  if (s == "Left") return Side::kLeft;
  n.fail("expected Right or Left, got '" + s + "'");
}

Truncation parse_truncation(const Node& n) {
  Truncation t;
  t.max_length = static_cast<size_t>(n.required("max_length").integer(0, INT64_MAX));
  if (auto d = n.get("direction")) t.direction = parse_side(*d);
  if (auto s = n.get("strategy")) {
    const std::string name = s->str();
    if (name == "LongestFirst") t.strategy = TruncationStrategy::kLongestFirst;
    else if (name == "OnlyFirst") t.strategy = TruncationStrategy::kOnlyFirst;
    else if (name == "OnlySecond") t.strategy = TruncationStrategy::kOnlySecond;
    else s->fail("unknown truncation strategy '" + name + "'");
  }
  return t;
}

Padding parse_padding(const Node& n) {
  Padding p;
  if (auto s = n.get("strategy")) {
    if (s->raw().is_string()) {
      if (s->str() != "BatchLongest") s->fail("expected \"BatchLongest\" or {\"Fixed\": n}");
    } else {
      p.to_fixed_length = true;
      p.length = static_cast<size_t>(s->required("Fixed").integer(1, 1 << 30));
    }
  }
  if (auto d = n.get("direction")) p.direction = parse_side(*d);
  if (auto m = n.get("pad_to_multiple_of")) p.multiple_of = static_cast<size_t>(m->integer(0, 1 << 20));
  if (auto id = n.get("pad_id")) p.pad_id = id->integer(0, kMaxId);
  if (auto id = n.get("pad_type_id")) p.pad_type_id = id->integer(0, kMaxId);
  p.pad_token = n.str_or("pad_token", p.pad_token);
  return p;
}

}  // namespace

TokenizerParts parse_tokenizer_json(std::string_view text) {
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw Error(one_line(std::string("tokenizer.json is not valid JSON: ") + e.what()));
  }
  try {
    Node root(doc, "");
    TokenizerParts parts;
    parts.model = parse_model(root.required("model"));
    if (auto n = root.get("normalizer")) parts.normalizer = parse_normalizer(*n);
    if (auto n = root.get("pre_tokenizer")) parts.pre_tokenizer = parse_pre_tokenizer(*n);
    if (auto n = root.get("post_processor")) parts.post_processor = parse_post_processor(*n);
    if (auto n = root.get("decoder")) parts.decoder = parse_decoder(*n);
    if (auto n = root.get("added_tokens")) parts.added_tokens = parse_added_tokens(*n);
    if (auto n = root.get("truncation")) parts.truncation = parse_truncation(*n);
    if (auto n = root.get("padding")) parts.padding = parse_padding(*n);
    return parts;
  } catch (const json::exception& e) {  // a case the checks above missed still gives one line
    throw Error(one_line(std::string("tokenizer.json: ") + e.what()));
  }
}

}  // namespace mminfer::text
