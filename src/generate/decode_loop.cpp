#include "generate/decode_loop.h"

#include <stdexcept>

#include <algorithm>
#include <memory>

#include "core/elapsed.h"
#include "generate/logits_pipeline.h"
#include "generate/next_token.h"
#include "generate/rng.h"

namespace mminfer::generate {

void DecodeTimings::add(const DecodeTimings& o) {
  prefill_ms += o.prefill_ms, decode_ms += o.decode_ms, decode_steps += o.decode_steps;
  prompt_tokens += o.prompt_tokens, new_tokens += o.new_tokens;
  cache_bytes = std::max(cache_bytes, o.cache_bytes);
}

void require_greedy_prompts(const DecodeRequest& request, const char* what) {
  if (request.prompts.empty()) throw Error("nothing to generate from: no prompt");
  if (request.config.do_sample || request.config.num_beams > 1)
    throw std::invalid_argument(std::string(what) + " is greedy: no sampling, no beam search");
}

Tensor ids_tensor(const std::vector<TokenId>& ids) {
  Tensor t = Tensor::empty(DType::kInt64, {1, static_cast<int64_t>(ids.size())});
  std::copy(ids.begin(), ids.end(), t.data<int64_t>());
  return t;
}

Tensor DecoderOnlyModel::prefill(int64_t row, const std::vector<TokenId>& prompt) {
  return decoder_.step(*cache_, row, tokens_input_, ids_tensor(prompt));
}

Tensor StepModel::extend(int64_t, const std::vector<TokenId>&) {
  throw std::invalid_argument("this model does not check several proposed tokens in one pass");
}

void StepModel::truncate(int64_t, int64_t) { throw std::invalid_argument("this model cannot drop cached positions"); }

std::vector<TokenId> StepModel::draft_guesses(int64_t, size_t) const {
  throw std::invalid_argument("this model has no draft heads");
}

Tensor DecoderOnlyModel::extend(int64_t row, const std::vector<TokenId>& ids) {
  return decoder_.step_positions(*cache_, row, tokens_input_, ids_tensor(ids));
}

void DecoderOnlyModel::truncate(int64_t row, int64_t length) { cache_->truncate(row, length); }

int64_t sequence_capacity(const std::vector<TokenId>& prompt, size_t index, const StopRules& rules, int64_t context) {
  if (prompt.empty()) throw Error("prompt " + std::to_string(index + 1) + " has no tokens");
  if (context > 0 && static_cast<int64_t>(prompt.size()) >= context)
    throw Error("the prompt holds " + std::to_string(prompt.size()) + " tokens; the model's context is " +
                std::to_string(context) + " positions, so no token can follow it");
  const size_t budget = std::min(rules.max_new_tokens, rules.max_length > prompt.size() ? rules.max_length - prompt.size() : size_t(1));
  const auto capacity = static_cast<int64_t>(prompt.size() + std::min<size_t>(budget, size_t(1) << 24));
  return context > 0 ? std::min(capacity, context) : capacity;
}

std::vector<DecodedSequence> decode(StepModel& model, const DecodeRequest& request, const DecodeFn& detokenize,
                                    DecodeTimings* timings) {
  const auto& prompts = request.prompts;
  const size_t n = prompts.size();
  if (n == 0) throw Error("nothing to generate from: no prompt");
  if (request.config.num_beams > 1) throw std::invalid_argument("beam search is not available in this loop; use num_beams 1");
  StopRules rules = StopRules::from_config(request.config);
  // Room for the longest prompt and every token the rules allow, within the model's context.
  int64_t capacity = 0;
  for (size_t s = 0; s < n; ++s) capacity = std::max(capacity, sequence_capacity(prompts[s], s, rules, request.context));
  model.start(static_cast<int64_t>(n), capacity);

  LogitsPipeline pipeline(request.config);
  std::vector<Pcg32> rngs(n, Pcg32(request.seed));
  std::vector<std::vector<TokenId>> sequences(prompts.begin(), prompts.end());
  std::vector<std::unique_ptr<TokenStream>> streams;
  for (size_t s = 0; s < n; ++s) {
    StreamCallback cb;
    if (request.on_text) cb = [&, s](TokenId token, std::string_view text) { request.on_text(s, token, text); };
    streams.push_back(std::make_unique<TokenStream>(detokenize, rules, prompts[s].size(), cb));
  }
  DecodeTimings t;
  t.cache_bytes = model.cache_bytes();
  auto choose = [&](size_t s, float* logits, size_t vocab) {
    TokenId token = next_token(std::span<float>(logits, vocab), sequences[s], prompts[s].size(), pipeline, rngs[s]);
    sequences[s].push_back(token);
    ++t.new_tokens;
    // A sequence at the cache's end stops as at max_length.
    if (streams[s]->push(token) == StopReason::kNone && model.length(static_cast<int64_t>(s)) + 1 > model.capacity())
      streams[s]->finish();
  };

  // Greedy choices need only the logits that can win (runtime::LogitsHead); the model's rows
  // are cache rows, which are the sequences here.
  struct GreedyScope {
    StepModel& model;
    ~GreedyScope() { model.set_greedy_process(nullptr); }
  } greedy_scope{model};
  if (!request.config.do_sample && pipeline.keeps_logit_order())
    model.set_greedy_process([&](int64_t row, std::span<float> logits) {
      pipeline.process(logits, sequences[static_cast<size_t>(row)], prompts[static_cast<size_t>(row)].size());
    });

  auto t0 = std::chrono::steady_clock::now();
  for (size_t s = 0; s < n; ++s) {
    Tensor logits = model.prefill(static_cast<int64_t>(s), prompts[s]);
    t.prompt_tokens += prompts[s].size();
    choose(s, logits.data<float>(), static_cast<size_t>(logits.dim(1)));
  }
  t.prefill_ms = ms_since(t0);

  t0 = std::chrono::steady_clock::now();
  for (;;) {
    // The unfinished rows, in runs of neighbours that step together.
    std::vector<size_t> live;
    for (size_t s = 0; s < n; ++s)
      if (!streams[s]->stopped()) live.push_back(s);
    if (live.empty()) break;
    for (size_t i = 0; i < live.size();) {
      size_t j = i;
      while (j + 1 < live.size() && live[j + 1] == live[j] + 1) ++j;
      int64_t rows = static_cast<int64_t>(j - i + 1);
      Tensor ids = Tensor::empty(DType::kInt64, {rows, 1});
      for (int64_t r = 0; r < rows; ++r) ids.data<int64_t>()[r] = sequences[live[i] + r].back();
      Tensor logits = model.step(static_cast<int64_t>(live[i]), ids);
      size_t vocab = static_cast<size_t>(logits.dim(1));
      for (int64_t r = 0; r < rows; ++r) choose(live[i] + r, logits.data<float>() + r * vocab, vocab);
      i = j + 1;
    }
    ++t.decode_steps;
  }
  t.decode_ms = ms_since(t0);
  if (timings) *timings = t;

  std::vector<DecodedSequence> out(n);
  for (size_t s = 0; s < n; ++s) {
    out[s].tokens = streams[s]->tokens();
    out[s].text = streams[s]->text();
    out[s].reason = streams[s]->reason();
  }
  return out;
}

}  // namespace mminfer::generate
