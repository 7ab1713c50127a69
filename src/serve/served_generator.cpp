#include "serve/served_generator.h"

#include <algorithm>
#include <cstdio>

#include "runtime/kv_cache.h"

namespace mminfer::serve {

ServedGenerator::ServedGenerator(const std::string& dir, const ModelConfig& config) {
  const GenerationSettings& g = config.generation;
  text_ = std::make_unique<pipelines::TextGenerator>(dir, config.session, g.kv_cache);
  chat_ = pipelines::ChatTemplate::from_folder(dir);
  generate::BatcherOptions options;
  options.context = g.context > 0 ? g.context
                    : text_->context() > 0 ? std::min(text_->context(), GenerationSettings::kDefaultContext)
                                           : GenerationSettings::kDefaultContext;
  options.max_sequences = g.max_sequences;
  if (g.kv_cache_bytes > 0) {
    // What one sequence of the full context costs, from a one-position cache's size.
    const auto per_sequence = static_cast<int64_t>(text_->decoder().make_cache(1, 1).bytes()) * options.context;
    const int64_t fit = g.kv_cache_bytes / std::max<int64_t>(per_sequence, 1);
    if (fit < 1) {
      char text[200];
      std::snprintf(text, sizeof text, "%s: kv_cache_bytes %lld holds no sequence of %lld positions (%.1f MiB each)",
                    dir.c_str(), static_cast<long long>(g.kv_cache_bytes), static_cast<long long>(options.context),
                    static_cast<double>(per_sequence) / (1 << 20));
      throw Error(std::string(text) + ": raise it or lower context");
    }
    options.max_sequences = std::min(options.max_sequences, fit);
  }
  options.prefill_chunk = g.prefill_chunk;
  options.max_waiting = config.batching.capacity;
  batcher_ = std::make_unique<generate::ContinuousBatcher>(text_->decoder(), text_->detokenizer(), options);
}

std::vector<generate::TokenId> ServedGenerator::chat_prompt(const nlohmann::ordered_json& messages) const {
  if (!chat_) throw Error("this model's folder has no chat template; send the prompt to /v1/completions instead");
  // The template writes its own special tokens.
  return text_->encode(chat_->render(messages, true), false);
}

}  // namespace mminfer::serve
