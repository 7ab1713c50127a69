// Reads a Hugging Face tokenizer.json into the parts of a Tokenizer. Every problem (bad JSON,
// a missing field, a wrong type, an unsupported component) is one Error line that names the
// JSON path, e.g. "tokenizer.json: model.merges[12]: ...".
#pragma once
#include <memory>
#include <optional>
#include <string_view>

#include "modal/text/added_tokens.h"
#include "modal/text/decoder.h"
#include "modal/text/encoding.h"
#include "modal/text/model.h"
#include "modal/text/normalizer.h"
#include "modal/text/post_processor.h"
#include "modal/text/pre_tokenizer.h"

namespace mminfer::text {

struct TokenizerParts {
  std::unique_ptr<Normalizer> normalizer;        // may be null
  std::unique_ptr<PreTokenizer> pre_tokenizer;   // may be null: the whole text is one piece
  std::unique_ptr<Model> model;
  std::unique_ptr<PostProcessor> post_processor; // may be null
  std::unique_ptr<Decoder> decoder;              // may be null: tokens joined by spaces
  AddedVocabulary added_tokens;
  std::optional<Truncation> truncation;
  std::optional<Padding> padding;
};

TokenizerParts parse_tokenizer_json(std::string_view json);

}  // namespace mminfer::text
