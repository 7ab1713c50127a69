#include "modal/text/post_processor.h"

#include "mminfer/status.h"

namespace mminfer::text {

namespace {

void append(Encoding& e, const std::vector<int32_t>& ids, int64_t type_id, bool special) {
  for (int32_t id : ids) {
    e.ids.push_back(id);
    e.type_ids.push_back(type_id);
    e.attention_mask.push_back(1);
    e.special_tokens_mask.push_back(special ? 1 : 0);
  }
}

}  // namespace

Encoding join_plain(const std::vector<int32_t>& first, const std::vector<int32_t>* second) {
  Encoding e;
  append(e, first, 0, false);
  if (second) append(e, *second, 1, false);
  return e;
}

std::unique_ptr<TemplateProcessor> TemplateProcessor::bert(int32_t cls, int32_t sep) {
  using P = Piece;
  return std::make_unique<TemplateProcessor>(
      std::vector<P>{{P::kSpecial, {cls}, 0}, {P::kFirst, {}, 0}, {P::kSpecial, {sep}, 0}},
      std::vector<P>{{P::kSpecial, {cls}, 0}, {P::kFirst, {}, 0}, {P::kSpecial, {sep}, 0}, {P::kSecond, {}, 1},
                     {P::kSpecial, {sep}, 1}});
}

std::unique_ptr<TemplateProcessor> TemplateProcessor::roberta(int32_t cls, int32_t sep) {
  using P = Piece;
  return std::make_unique<TemplateProcessor>(
      std::vector<P>{{P::kSpecial, {cls}, 0}, {P::kFirst, {}, 0}, {P::kSpecial, {sep}, 0}},
      std::vector<P>{{P::kSpecial, {cls}, 0}, {P::kFirst, {}, 0}, {P::kSpecial, {sep}, 0}, {P::kSpecial, {sep}, 1},
                     {P::kSecond, {}, 1}, {P::kSpecial, {sep}, 1}});
}

size_t TemplateProcessor::added_tokens(bool pair) const {
  size_t n = 0;
  for (const auto& p : pair ? pair_ : single_) n += p.special_ids.size();
  return n;
}

Encoding TemplateProcessor::process(const std::vector<int32_t>& first, const std::vector<int32_t>* second) const {
  Encoding e;
  for (const auto& p : second ? pair_ : single_) {
    switch (p.kind) {
      case Piece::kSpecial: append(e, p.special_ids, p.type_id, true); break;
      case Piece::kFirst: append(e, first, p.type_id, false); break;
      case Piece::kSecond:
        if (second) append(e, *second, p.type_id, false);
        break;
    }
  }
  return e;
}

SequenceProcessor::SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> steps) : steps_(std::move(steps)) {
  for (const auto& s : steps_) {
    if (s->added_tokens(false) == 0 && s->added_tokens(true) == 0) continue;
    if (adding_) throw Error("post_processor Sequence: more than one step adds special tokens, which is not supported");
    adding_ = s.get();
  }
}

Encoding SequenceProcessor::process(const std::vector<int32_t>& first, const std::vector<int32_t>* second) const {
  return adding_ ? adding_->process(first, second) : join_plain(first, second);
}

}  // namespace mminfer::text
