#include "modal/text/pre_tokenizer.h"

#include <algorithm>

#include "modal/text/byte_level.h"
#include "modal/text/unicode.h"

namespace mminfer::text {

namespace {

// GPT-2's pattern, which ByteLevel applies itself when use_regex is set.
const char kGpt2Pattern[] = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Segment {
  size_t begin, end;
  bool is_match;
};

// Turns the matches found in `text` into segments that cover all of it.
class SegmentBuilder {
 public:
  explicit SegmentBuilder(size_t size) : size_(size) {}
  void add_match(size_t begin, size_t end) {
    if (begin > done_) segments_.push_back({done_, begin, false});
    segments_.push_back({begin, end, true});
    done_ = end;
  }
  std::vector<Segment> finish() {
    if (done_ < size_) segments_.push_back({done_, size_, false});
    return std::move(segments_);
  }

 private:
  size_t size_, done_ = 0;
  std::vector<Segment> segments_;
};

// Applies a delimiter behavior to covering segments and appends the resulting pieces.
void emit_pieces(std::string_view text, std::vector<Segment> segments, SplitBehavior behavior, bool invert,
                 std::vector<std::string>& out) {
  if (invert)
    for (auto& s : segments) s.is_match = !s.is_match;
  std::vector<Segment> merged;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const auto& s : segments)
        if (!s.is_match) merged.push_back(s);
      break;
    case SplitBehavior::kIsolated:
      merged = std::move(segments);
      break;
    case SplitBehavior::kMergedWithPrevious:  // a delimiter ends the piece before it
      for (const auto& s : segments) {
        if (s.is_match && !previous_match && !merged.empty()) merged.back().end = s.end;
        else merged.push_back(s);
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:  // a delimiter starts the piece after it
      for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
        if (it->is_match && !previous_match && !merged.empty()) merged.back().begin = it->begin;
        else merged.push_back(*it);
        previous_match = it->is_match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    case SplitBehavior::kContiguous:  // runs of delimiters become one piece
      for (const auto& s : segments) {
        if (s.is_match && previous_match && !merged.empty()) merged.back().end = s.end;
        else merged.push_back(s);
        previous_match = s.is_match;
      }
      break;
  }
  for (const auto& s : merged)
    if (s.end > s.begin) out.emplace_back(text.substr(s.begin, s.end - s.begin));
}

template <typename SplitOne>
void split_each(std::vector<std::string>& pieces, SplitOne&& split_one) {
  std::vector<std::string> out;
  out.reserve(pieces.size());
  for (const auto& piece : pieces) split_one(std::string_view(piece), out);
  pieces = std::move(out);
}

std::vector<Segment> regex_segments(const Regex& regex, std::string_view text) {
  SegmentBuilder b(text.size());
  regex.for_each_match(text, [&](size_t begin, size_t end) { b.add_match(begin, end); });
  return b.finish();
}

}  // namespace

std::unique_ptr<SplitPreTokenizer> SplitPreTokenizer::literal(std::string pattern, SplitBehavior behavior, bool invert) {
  auto p = std::unique_ptr<SplitPreTokenizer>(new SplitPreTokenizer());
  p->literal_ = std::move(pattern);
  p->behavior_ = behavior;
  p->invert_ = invert;
  return p;
}

std::unique_ptr<SplitPreTokenizer> SplitPreTokenizer::regex(const std::string& pattern, SplitBehavior behavior, bool invert) {
  auto p = std::unique_ptr<SplitPreTokenizer>(new SplitPreTokenizer());
  p->regex_ = std::make_unique<Regex>(pattern);
  p->behavior_ = behavior;
  p->invert_ = invert;
  return p;
}

void SplitPreTokenizer::pre_tokenize(std::vector<std::string>& pieces) const {
  split_each(pieces, [&](std::string_view text, std::vector<std::string>& out) {
    if (regex_) {
      emit_pieces(text, regex_segments(*regex_, text), behavior_, invert_, out);
      return;
    }
    SegmentBuilder b(text.size());
    if (!literal_.empty())
      for (size_t at = text.find(literal_); at != std::string_view::npos; at = text.find(literal_, at + literal_.size()))
        b.add_match(at, at + literal_.size());
    emit_pieces(text, b.finish(), behavior_, invert_, out);
  });
}

ByteLevelPreTokenizer::ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
  if (use_regex) regex_ = std::make_unique<Regex>(kGpt2Pattern);
}

void ByteLevelPreTokenizer::pre_tokenize(std::vector<std::string>& pieces) const {
  std::vector<std::string> out;
  out.reserve(pieces.size());
  std::vector<std::string> split;
  for (auto& piece : pieces) {
    if (add_prefix_space_ && !piece.empty() && piece.front() != ' ') piece.insert(piece.begin(), ' ');
    split.clear();
    if (regex_) emit_pieces(piece, regex_segments(*regex_, piece), SplitBehavior::kIsolated, false, split);
    else split.push_back(std::move(piece));
    for (const auto& s : split) out.push_back(to_byte_level(s));
  }
  pieces = std::move(out);
}

void CharClassPreTokenizer::pre_tokenize(std::vector<std::string>& pieces) const {
  for (const auto& rule : rules_) {
    split_each(pieces, [&](std::string_view text, std::vector<std::string>& out) {
      SegmentBuilder b(text.size());
      for (size_t pos = 0; pos < text.size();) {
        size_t start = pos;
        if (rule.matches(next_code_point(text, pos))) b.add_match(start, pos);
      }
      emit_pieces(text, b.finish(), rule.behavior, false, out);
    });
  }
}

namespace {

bool is_bert_punctuation(char32_t cp) {
  bool ascii = (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126);
  return ascii || is_punctuation(cp);
}

}  // namespace

std::unique_ptr<PreTokenizer> CharClassPreTokenizer::bert() {
  return std::make_unique<CharClassPreTokenizer>(std::vector<Rule>{{is_whitespace, SplitBehavior::kRemoved},
                                                                   {is_bert_punctuation, SplitBehavior::kIsolated}});
}

std::unique_ptr<PreTokenizer> CharClassPreTokenizer::whitespace_split() {
  return std::make_unique<CharClassPreTokenizer>(std::vector<Rule>{{is_whitespace, SplitBehavior::kRemoved}});
}

std::unique_ptr<PreTokenizer> CharClassPreTokenizer::punctuation(SplitBehavior behavior) {
  return std::make_unique<CharClassPreTokenizer>(std::vector<Rule>{{is_bert_punctuation, behavior}});
}

std::unique_ptr<PreTokenizer> CharClassPreTokenizer::digits(bool individual) {
  return std::make_unique<CharClassPreTokenizer>(
      std::vector<Rule>{{is_numeric, individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous}});
}

std::unique_ptr<PreTokenizer> make_whitespace_pre_tokenizer() {
  // Hugging Face writes \w+|[^\w\s]+ for Rust's regex crate, whose \w also takes marks and
  // joiners; PCRE2's \w does not, so the class is spelled out.
  const std::string word = R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}])";
  const std::string other = R"([^\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}\s])";
  return SplitPreTokenizer::regex(word + "+|" + other + "+", SplitBehavior::kRemoved, true);
}

void SequencePreTokenizer::pre_tokenize(std::vector<std::string>& pieces) const {
  for (const auto& step : steps_) step->pre_tokenize(pieces);
}

}  // namespace mminfer::text
