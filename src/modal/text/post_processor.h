// Post-processors wrap the model's ids in the special tokens a model expects:
// [CLS] A [SEP] for BERT, <|startoftext|> A <|endoftext|> for CLIP, and set the type ids.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "modal/text/encoding.h"

namespace mminfer::text {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // How many tokens process() adds, so truncation can leave room for them.
  virtual size_t added_tokens(bool pair) const = 0;
  // Builds the encoding of one sequence or a pair (second may be null).
  virtual Encoding process(const std::vector<int32_t>& first, const std::vector<int32_t>* second) const = 0;
};

// Joins the sequences with no special tokens: type id 0 for the first, 1 for the second.
// Used when a tokenizer has no post-processor or add_special_tokens is off.
Encoding join_plain(const std::vector<int32_t>& first, const std::vector<int32_t>* second);

// A template of pieces: special tokens (each may stand for several ids) and the sequences.
class TemplateProcessor : public PostProcessor {
 public:
  struct Piece {
    enum Kind { kSpecial, kFirst, kSecond } kind;
    std::vector<int32_t> special_ids;  // for kSpecial
    int64_t type_id = 0;
  };
  TemplateProcessor(std::vector<Piece> single, std::vector<Piece> pair)
      : single_(std::move(single)), pair_(std::move(pair)) {}
  // BertProcessing: [CLS] A [SEP] and [CLS] A [SEP] B [SEP] with type ids 0 then 1.
  static std::unique_ptr<TemplateProcessor> bert(int32_t cls, int32_t sep);
  // RobertaProcessing (CLIP): <s> A </s> and <s> A </s> </s> B </s>.
  static std::unique_ptr<TemplateProcessor> roberta(int32_t cls, int32_t sep);

  size_t added_tokens(bool pair) const override;
  Encoding process(const std::vector<int32_t>& first, const std::vector<int32_t>* second) const override;

 private:
  std::vector<Piece> single_, pair_;
};

// Post-processors that only touch offsets (ByteLevel) leave ids alone.
class PassThroughProcessor : public PostProcessor {
 public:
  size_t added_tokens(bool) const override { return 0; }
  Encoding process(const std::vector<int32_t>& first, const std::vector<int32_t>* second) const override {
    return join_plain(first, second);
  }
};

// Several processors; only the one that adds special tokens changes ids.
class SequenceProcessor : public PostProcessor {
 public:
  // Throws Error when more than one step adds tokens: composing two templates would need
  // offsets we do not keep, and real files pair ByteLevel with one template.
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> steps);
  size_t added_tokens(bool pair) const override { return adding_ ? adding_->added_tokens(pair) : 0; }
  Encoding process(const std::vector<int32_t>& first, const std::vector<int32_t>* second) const override;

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
  const PostProcessor* adding_ = nullptr;
};

}  // namespace mminfer::text
