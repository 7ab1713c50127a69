// Continuous batching against torch and against the one-request loop: sequences that join and
// leave a shared batch, prefilled in chunks, make exactly the tokens they make alone (greedy:
// torch's; sampled: generate::decode's for the same seed), also when a small block pool makes
// them preempt one another; cancellation gives the blocks back; prompts start from published
// prefix blocks; a full queue refuses; a prompt without room is an error.
#include "generate/continuous_batcher.h"

#include <gtest/gtest.h>

#include <fstream>
#include <future>

#include <nlohmann/json.hpp>

namespace mminfer {
namespace {

using namespace std::chrono_literals;
using generate::ContinuousBatcher;
using generate::GenerationJob;
using generate::JobResult;
using generate::TokenId;

const std::string kModels = MMINFER_GENERATIVE_MODELS;
const std::string kLlama = kModels + "/llama-tiny/model.onnx";

nlohmann::json llama_reference() {
  std::ifstream in(kModels + "/llama-tiny/reference/reference.json");
  return nlohmann::json::parse(in);
}

std::string fake_text(std::span<const TokenId> ids) { return std::string(ids.size(), 'x'); }

runtime::CachedDecoder& llama() {
  static runtime::CachedDecoder decoder = [] {
    SessionOptions options;
    options.threads = 2;
    return runtime::CachedDecoder(kLlama, options);
  }();
  return decoder;
}

// Submits a job and hands back its result when it is done.
std::future<JobResult> submit(ContinuousBatcher& batcher, GenerationJob job) {
  auto done = std::make_shared<std::promise<JobResult>>();
  std::future<JobResult> f = done->get_future();
  job.on_done = [done](JobResult r) { done->set_value(std::move(r)); };
  EXPECT_TRUE(batcher.submit(std::move(job)));
  return f;
}

JobResult wait(std::future<JobResult>& f) {
  EXPECT_EQ(f.wait_for(120s), std::future_status::ready);
  return f.get();
}

// The tokens generate::decode makes alone for one prompt (greedy unless `config` samples).
std::vector<TokenId> alone(const std::vector<TokenId>& prompt, const generate::GenerationConfig& config, uint64_t seed = 0) {
  generate::DecodeRequest request;
  request.prompts = {prompt};
  request.config = config;
  request.seed = seed;
  generate::DecoderOnlyModel model(llama());
  return generate::decode(model, request, fake_text).at(0).tokens;
}

std::vector<TokenId> alone(const std::vector<TokenId>& prompt, size_t new_tokens) {
  generate::GenerationConfig greedy;
  greedy.max_new_tokens = new_tokens;
  return alone(prompt, greedy);
}

GenerationJob greedy_job(const std::vector<TokenId>& prompt, size_t new_tokens) {
  GenerationJob job;
  job.prompt = prompt;
  job.config.max_new_tokens = new_tokens;
  return job;
}

generate::GenerationConfig sampling(float temperature, size_t new_tokens, float top_p = 1.f) {
  generate::GenerationConfig c;
  c.do_sample = true;
  c.temperature = temperature;
  c.top_p = top_p;
  c.max_new_tokens = new_tokens;
  return c;
}

TEST(ContinuousBatcherOnModels, GreedyTokensAreTorchsWhateverJoinsTheBatch) {
  const auto ref = llama_reference();
  std::vector<std::vector<TokenId>> prompts, want;
  for (const auto& c : ref["cases"]) {
    auto p = c["prompt_ids"].get<std::vector<std::vector<TokenId>>>();
    auto t = c["tokens"].get<std::vector<std::vector<TokenId>>>();
    prompts.insert(prompts.end(), p.begin(), p.end());
    want.insert(want.end(), t.begin(), t.end());
  }
  ASSERT_GE(prompts.size(), 4u);
  generate::BatcherOptions options;
  options.max_sequences = 3;  // the fourth waits
  options.context = 128;
  options.prefill_chunk = 7;  // every prompt takes several chunks between steps
  ContinuousBatcher batcher(llama(), fake_text, options);
  std::vector<std::future<JobResult>> results;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerationJob job;
    job.prompt = prompts[i];
    // Different lengths, so sequences leave the batch at different steps.
    job.config.max_new_tokens = i == 0 ? 64 : std::min<size_t>(64, 20 + 13 * i);
    results.push_back(submit(batcher, std::move(job)));
    std::this_thread::sleep_for(std::chrono::milliseconds(5 * i));  // joins at varied steps
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    JobResult r = wait(results[i]);
    EXPECT_TRUE(r.error.empty()) << r.error;
    const size_t n = i == 0 ? 64 : std::min<size_t>(64, 20 + 13 * i);
    ASSERT_EQ(r.sequence.tokens.size(), n) << "prompt " << i;
    EXPECT_EQ(r.sequence.tokens, std::vector<TokenId>(want[i].begin(), want[i].begin() + n)) << "prompt " << i;
    EXPECT_EQ(r.sequence.reason, generate::StopReason::kMaxNewTokens);
    EXPECT_EQ(r.prompt_tokens, prompts[i].size());
    EXPECT_GT(r.first_token_ms, 0);
  }
  EXPECT_EQ(batcher.running(), 0u);
  EXPECT_GT(batcher.steps(), 0u);
  EXPECT_LT(batcher.steps(), 64u * prompts.size());  // they shared steps
}

TEST(ContinuousBatcherOnModels, SampledTokensAreTheOneRequestLoopsForTheSameSeed) {
  const auto ref = llama_reference();
  auto prompt = ref["cases"][0]["prompt_ids"][0].get<std::vector<TokenId>>();
  auto other = ref["cases"][1]["prompt_ids"][1].get<std::vector<TokenId>>();
  const generate::GenerationConfig sampled = sampling(1.5f, 40, 0.9f);
  std::vector<std::vector<TokenId>> by_seed;
  for (uint64_t seed : {1u, 2u, 3u}) by_seed.push_back(alone(prompt, sampled, seed));
  EXPECT_NE(by_seed[0], by_seed[1]);  // the seed matters

  generate::BatcherOptions options;
  options.context = 96;
  ContinuousBatcher batcher(llama(), fake_text, options);
  std::vector<std::future<JobResult>> results;
  for (int i = 0; i < 6; ++i) {  // sampled jobs between greedy ones on another prompt
    GenerationJob job;
    job.prompt = i % 2 ? other : prompt;
    if (i % 2 == 0) job.config = sampled, job.seed = 1 + i / 2;
    else job.config.max_new_tokens = 10 * i;
    results.push_back(submit(batcher, std::move(job)));
  }
  for (int i = 0; i < 6; i += 2) EXPECT_EQ(wait(results[i]).sequence.tokens, by_seed[i / 2]) << "seed " << 1 + i / 2;
  for (int i = 1; i < 6; i += 2) EXPECT_EQ(wait(results[i]).sequence.tokens.size(), 10u * i);
}

// The batcher's thread counts the pool after each cycle, just after a job's on_done.
void expect_no_block_held(const ContinuousBatcher& batcher) {
  for (int i = 0; i < 200 && batcher.kv_blocks_held() != 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(batcher.kv_blocks_held(), 0);
}

TEST(ContinuousBatcherOnModels, CancelledSequenceGivesItsBlocksBackAndOthersGoOn) {
  const auto ref = llama_reference();
  auto prompt = ref["cases"][0]["prompt_ids"][0].get<std::vector<TokenId>>();
  auto want = ref["cases"][0]["tokens"][0].get<std::vector<TokenId>>();
  generate::BatcherOptions options;
  options.max_sequences = 2;
  options.context = 128;
  ContinuousBatcher batcher(llama(), fake_text, options);
  auto cancel = std::make_shared<std::atomic<bool>>(false);
  GenerationJob doomed;
  doomed.prompt = prompt;
  doomed.config.max_new_tokens = 64;
  doomed.cancelled = cancel;
  doomed.on_text = [cancel, n = 0](TokenId, std::string_view) mutable {
    if (++n == 5) cancel->store(true);  // the client goes away after 5 tokens
  };
  auto gone = submit(batcher, std::move(doomed));
  auto stays = submit(batcher, greedy_job(prompt, 64));
  GenerationJob late;  // needs the cancelled sequence's place
  late.prompt = prompt;
  late.config.max_new_tokens = 30;
  auto joins = submit(batcher, std::move(late));
  JobResult r = wait(gone);
  EXPECT_TRUE(r.cancelled);
  EXPECT_GE(r.sequence.tokens.size(), 5u);
  EXPECT_LE(r.sequence.tokens.size(), 6u);  // ended at the next step
  EXPECT_EQ(wait(stays).sequence.tokens, want);
  EXPECT_EQ(wait(joins).sequence.tokens, std::vector<TokenId>(want.begin(), want.begin() + 30));
  EXPECT_EQ(batcher.running(), 0u);
  expect_no_block_held(batcher);
}

TEST(ContinuousBatcherOnModels, PromptsStartFromPublishedPrefixBlocks) {
  const auto ref = llama_reference();
  auto prompt = ref["cases"][0]["prompt_ids"][0].get<std::vector<TokenId>>();
  auto other = ref["cases"][1]["prompt_ids"][1].get<std::vector<TokenId>>();
  generate::BatcherOptions options;
  options.max_sequences = 2;
  options.context = 128;
  options.prefill_chunk = 8;
  options.block_size = 4;
  ContinuousBatcher batcher(llama(), fake_text, options);

  // A later turn of a conversation: the first answer's blocks hold prompt + answer, cached.
  auto f = submit(batcher, greedy_job(prompt, 30));
  JobResult a = wait(f);
  EXPECT_EQ(a.reused_prompt_tokens, 0u);
  std::vector<TokenId> turn = prompt;
  turn.insert(turn.end(), a.sequence.tokens.begin(), a.sequence.tokens.begin() + 20);
  turn.insert(turn.end(), other.begin(), other.begin() + 5);
  ASSERT_NE(other[0], a.sequence.tokens[20]);
  auto g = submit(batcher, greedy_job(turn, 20));
  JobResult b = wait(g);
  EXPECT_EQ(b.reused_prompt_tokens, (prompt.size() + 20) / 4 * 4);  // the whole blocks they share
  EXPECT_GT(batcher.kv_blocks_cached(), 0);
  EXPECT_EQ(b.sequence.tokens, alone(turn, 20));

  // A shared system prompt: a new prompt starts from a running sequence's first 16 positions.
  std::promise<void> running;
  GenerationJob longer;
  longer.prompt = prompt;
  longer.config.max_new_tokens = 60;
  longer.on_text = [&, n = 0](TokenId, std::string_view) mutable {
    if (n++ == 1) running.set_value();
  };
  auto h = submit(batcher, std::move(longer));
  running.get_future().wait();
  std::vector<TokenId> shared(prompt.begin(), prompt.begin() + 16);
  shared.insert(shared.end(), other.begin(), other.end());
  ASSERT_NE(other[0], prompt[16]);
  auto k = submit(batcher, greedy_job(shared, 25));
  JobResult c = wait(k);
  EXPECT_GE(c.reused_prompt_tokens, 16u);  // the running sequence's first blocks, held by both
  EXPECT_EQ(c.sequence.tokens, alone(shared, 25));
  EXPECT_EQ(wait(h).sequence.tokens, alone(prompt, 60));
}

// A pool too small for every sequence to grow: the newest give their blocks back and resume
// later, and every sequence still makes the tokens it makes alone, greedy or sampled.
TEST(ContinuousBatcherOnModels, PreemptedSequencesResumeWithTheTokensTheyMakeAlone) {
  const auto ref = llama_reference();
  auto prompt = ref["cases"][0]["prompt_ids"][0].get<std::vector<TokenId>>();
  auto other = ref["cases"][1]["prompt_ids"][1].get<std::vector<TokenId>>();
  const generate::GenerationConfig sampled = sampling(1.2f, 60);
  const auto sampled_alone = alone(other, sampled, 7);

  generate::BatcherOptions options;
  options.max_sequences = 4;
  options.context = 96;
  options.prefill_chunk = 16;
  options.block_size = 4;
  options.kv_blocks = 40;  // 160 positions: one sequence of 84, not four
  ContinuousBatcher batcher(llama(), fake_text, options);
  std::vector<std::future<JobResult>> results;
  for (int i = 0; i < 4; ++i) {
    GenerationJob job;
    job.prompt = i == 1 ? other : prompt;
    if (i == 1) job.config = sampled, job.seed = 7;
    else job.config.max_new_tokens = 60;
    results.push_back(submit(batcher, std::move(job)));
  }
  const auto greedy_alone = alone(prompt, 60);
  size_t preempted = 0;
  for (int i = 0; i < 4; ++i) {
    JobResult r = wait(results[i]);
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.sequence.tokens, i == 1 ? sampled_alone : greedy_alone) << "sequence " << i;
    preempted += r.preemptions;
  }
  EXPECT_GT(preempted, 0u);
  EXPECT_EQ(batcher.preemptions(), preempted);
  expect_no_block_held(batcher);
}

TEST(ContinuousBatcherOnModels, APoolSmallerThanTheContextEndsALoneSequenceAtItsEnd) {
  const auto ref = llama_reference();
  auto prompt = ref["cases"][0]["prompt_ids"][0].get<std::vector<TokenId>>();  // 24 tokens
  generate::BatcherOptions options;
  options.context = 128;
  options.block_size = 4;
  options.kv_blocks = 8;  // 32 positions
  ContinuousBatcher batcher(llama(), fake_text, options);
  auto f = submit(batcher, greedy_job(prompt, 100));
  JobResult r = wait(f);
  EXPECT_EQ(r.sequence.tokens, alone(prompt, 32 - prompt.size() + 1));
  EXPECT_EQ(r.sequence.reason, generate::StopReason::kFinished);
  GenerationJob too_long;  // 32 prompt positions leave no room for a token in 8 blocks
  too_long.prompt.assign(32, prompt[0]);
  try {
    batcher.submit(std::move(too_long));
    ADD_FAILURE() << "a prompt the pool cannot hold was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("8 blocks of 4 positions hold 31 at most"), std::string::npos) << e.what();
  }
}

TEST(ContinuousBatcherOnModels, FullQueueRefusesAndBadJobsThrow) {
  const auto ref = llama_reference();
  auto prompt = ref["cases"][0]["prompt_ids"][0].get<std::vector<TokenId>>();
  generate::BatcherOptions options;
  options.max_sequences = 1;
  options.max_waiting = 1;
  options.context = 40;
  ContinuousBatcher batcher(llama(), fake_text, options);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> holding;
  GenerationJob first;
  first.prompt = prompt;
  first.config.max_new_tokens = 3;
  first.on_text = [&, n = 0](TokenId, std::string_view) mutable {
    if (n++ == 0) holding.set_value(), released.wait();  // holds the batcher's thread
  };
  auto a = submit(batcher, std::move(first));
  holding.get_future().wait();
  GenerationJob second;
  second.prompt = prompt;
  second.config.max_new_tokens = 2;
  auto b = submit(batcher, std::move(second));  // waits
  GenerationJob third;
  third.prompt = prompt;
  third.config.max_new_tokens = 2;
  EXPECT_FALSE(batcher.submit(std::move(third)));  // over max_waiting
  EXPECT_EQ(batcher.waiting(), 1u);
  release.set_value();
  EXPECT_EQ(wait(a).sequence.tokens.size(), 3u);
  EXPECT_EQ(wait(b).sequence.tokens.size(), 2u);

  GenerationJob empty;
  EXPECT_THROW(batcher.submit(std::move(empty)), Error);
  GenerationJob too_long;
  too_long.prompt.assign(40, prompt[0]);
  try {
    batcher.submit(std::move(too_long));
    ADD_FAILURE() << "a prompt as long as the context was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context is 40 positions"), std::string::npos) << e.what();
  }
  GenerationJob beams;
  beams.prompt = prompt;
  beams.config.num_beams = 2;
  EXPECT_THROW(batcher.submit(std::move(beams)), Error);
  GenerationJob no_room;  // generation_config's max_length below the prompt
  no_room.prompt = prompt;
  no_room.config.max_length = prompt.size();
  EXPECT_THROW(batcher.submit(std::move(no_room)), std::invalid_argument);
  // A sequence at the context's end stops there.
  auto c = submit(batcher, greedy_job(prompt, 100));
  JobResult r = wait(c);
  EXPECT_EQ(r.sequence.tokens.size(), 40u - prompt.size() + 1);
  EXPECT_EQ(r.sequence.reason, generate::StopReason::kFinished);  // as generate::decode reports it
}

}  // namespace
}  // namespace mminfer
