#include "generate/beam_decode.h"

#include <chrono>
#include <cstring>

namespace mminfer::generate {

std::vector<std::vector<Hypothesis>> beam_decode(StepModel& model, const DecodeRequest& request, DecodeTimings* timings) {
  const GenerationConfig& c = request.config;
  const auto& prompts = request.prompts;
  if (prompts.empty()) throw Error("nothing to generate from: no prompt");
  const size_t prompt_length = prompts[0].size(), beams = std::max<size_t>(1, c.num_beams);
  BeamSearchOptions options;
  options.num_beams = beams;
  options.length_penalty = c.length_penalty;
  options.early_stopping = c.early_stopping;
  options.eos_token_ids = c.eos_token_ids;
  options.num_return_sequences = c.num_return_sequences;
  options.pad_token_id = c.pad_token_id.value_or(c.eos_token_ids.empty() ? 0 : c.eos_token_ids[0]);
  options.max_length = c.max_new_tokens ? prompt_length + *c.max_new_tokens : c.max_length;
  if (request.context > 0) options.max_length = std::min<size_t>(options.max_length, static_cast<size_t>(request.context));
  if (request.context > 0 && static_cast<int64_t>(prompt_length) >= request.context)
    throw Error("the prompt holds " + std::to_string(prompt_length) + " tokens; the model's context is " +
                std::to_string(request.context) + " positions, so no token can follow it");
  BeamSearch search(options, prompts);  // checks equal lengths and max_length
  const int64_t rows = static_cast<int64_t>(search.rows());
  model.start(rows, static_cast<int64_t>(options.max_length));
  LogitsPipeline pipeline(c);

  DecodeTimings t;
  t.cache_bytes = model.cache_bytes();
  auto t0 = std::chrono::steady_clock::now();
  Tensor logits;
  std::vector<int64_t> sources(static_cast<size_t>(rows));
  for (size_t p = 0; p < prompts.size(); ++p) {
    const int64_t first = static_cast<int64_t>(p * beams);
    Tensor row = model.prefill(first, prompts[p]);
    t.prompt_tokens += prompt_length;
    if (!logits.defined()) logits = Tensor::empty(DType::kFloat32, {rows, row.dim(1)});
    for (size_t k = 0; k < beams; ++k) {
      std::memcpy(logits.data<float>() + (first + k) * row.dim(1), row.raw(), row.nbytes());
      sources[first + k] = first;
    }
  }
  model.reorder(sources);  // every beam starts from its input's prefilled cache
  t.prefill_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  t0 = std::chrono::steady_clock::now();
  const size_t vocab = static_cast<size_t>(logits.dim(1));
  for (;;) {
    search.step(std::span<const float>(logits.data<float>(), logits.numel()), vocab, &pipeline);
    t.new_tokens += static_cast<size_t>(rows);
    if (search.done() || model.length(0) + 1 > model.capacity()) break;
    const auto& indices = search.beam_indices();
    for (int64_t r = 0; r < rows; ++r) sources[r] = static_cast<int64_t>(indices[r]);
    model.reorder(sources);
    Tensor ids = Tensor::empty(DType::kInt64, {rows, 1});
    for (int64_t r = 0; r < rows; ++r) ids.data<int64_t>()[r] = search.next_tokens()[r];
    logits = model.step(0, ids);
    ++t.decode_steps;
  }
  t.decode_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (timings) *timings = t;

  std::vector<std::vector<Hypothesis>> best = search.finalize();
  for (auto& item : best)
    for (Hypothesis& h : item) h.tokens.erase(h.tokens.begin(), h.tokens.begin() + static_cast<ptrdiff_t>(prompt_length));
  return best;
}

}  // namespace mminfer::generate
