// A decoder-only language model folder, as Optimum exports it or people download it: an ONNX
// decoder with past_key_values inputs (`model.onnx`, `decoder_model_merged.onnx` or
// `decoder_with_past_model.onnx`, in that order of preference, also under onnx/), `config.json`,
// `generation_config.json` and `tokenizer.json`. The decoder runs with the KV cache owned by the
// runtime.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "generate/decode_loop.h"
#include "generate/cascade_decode.h"
#include "generate/speculative_decode.h"
#include "modal/text/tokenizer.h"
#include "mminfer/session.h"
#include "runtime/cached_decoder.h"

namespace mminfer::pipelines {

class TextGenerator {
 public:
  // Throws Error naming the folder and what is missing or wrong.
  // `kv_cache`: the cache's dtype, float32 or float16.
  TextGenerator(const std::filesystem::path& dir, const SessionOptions& options, DType kv_cache = DType::kFloat32);

  const generate::GenerationConfig& config() const { return config_; }
  int64_t context() const { return context_; }  // max_position_embeddings; 0 when unknown
  int64_t vocab() const { return vocab_ > 0 ? vocab_ : tokenizer_->vocab_end(); }
  const std::string& decoder_file() const { return decoder_file_; }
  runtime::CachedDecoder& decoder() { return *decoder_; }

  // The tokenizer's ids with its special tokens (a BOS, if it adds one); without them for text a
  // chat template made, which writes its own.
  std::vector<generate::TokenId> encode(const std::string& prompt, bool add_special_tokens = true) const;
  std::string decode_tokens(const std::vector<generate::TokenId>& ids) const;
  // Special tokens are left out of the text unless `skip_special` is false.
  generate::DecodeFn detokenizer(bool skip_special = true) const;
  // Throws Error for an id outside the model's vocabulary.
  void check_ids(const std::vector<generate::TokenId>& ids) const;

  // Generates for each prompt; `request.prompts` is filled from `prompts` when empty.
  std::vector<generate::DecodedSequence> generate(const std::vector<std::string>& prompts, generate::DecodeRequest request,
                                                  generate::DecodeTimings* timings = nullptr);
  // Greedy generation with `draft` (this folder's decoder at lower precision, or a smaller model
  // with the same vocabulary) proposing `k` tokens per pass of this model: the tokens greedy
  // generation makes, in fewer passes (generate/speculative_decode.h). Throws Error when the
  // vocabularies differ.
  std::vector<generate::DecodedSequence> generate_speculative(TextGenerator& draft, generate::DecodeRequest request, size_t k,
                                                              generate::DecodeTimings* timings = nullptr,
                                                              generate::SpeculativeStats* stats = nullptr);
  // Greedy generation through the decoding cascade: `light` (the same kind of model as a
  // draft) chooses each token, this model where the light one's entropy is above max_entropy
  // nats (generate/cascade_decode.h). The tokens may differ from greedy generation's.
  std::vector<generate::DecodedSequence> generate_cascade(TextGenerator& light, generate::DecodeRequest request,
                                                          double max_entropy, generate::DecodeTimings* timings = nullptr,
                                                          generate::CascadeStats* stats = nullptr);

 private:
  // For a request decoded with `other` beside this model (a draft or a light model): throws Error
  // unless it shares this model's vocabulary and every prompt id is in it; fills the context.
  void prepare_paired(const TextGenerator& other, generate::DecodeRequest& request) const;

  std::string decoder_file_;
  generate::GenerationConfig config_;
  int64_t context_ = 0;
  int64_t vocab_ = 0;  // config.json's vocab_size; 0 when absent
  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<runtime::CachedDecoder> decoder_;
};

}  // namespace mminfer::pipelines
