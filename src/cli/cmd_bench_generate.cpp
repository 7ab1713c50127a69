// mminfer bench --pipeline DIR : prefill and decode of a decoder-only folder, timed apart.
#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/json_output.h"
#include "cli/percentile.h"
#include "core/parallel.h"
#include "core/weight_memory.h"
#include "pipelines/generation/text_generator.h"

namespace mminfer::cli {

namespace {
// Adds `more` into `sum`, matching op types.
void add_op_times(std::vector<OpTime>& sum, const std::vector<OpTime>& more) {
  for (const OpTime& m : more) {
    auto it = std::find_if(sum.begin(), sum.end(), [&](const OpTime& o) { return o.op_type == m.op_type; });
    if (it == sum.end()) {
      sum.push_back(m);
    } else {
      it->total_ms += m.total_ms;
      it->calls += m.calls;
    }
  }
}
}  // namespace

int cmd_bench_generate(int argc, char** argv) {
  Args args(argc, argv, 2,
            with_decoder_precision_flags({"--pipeline", "--prompt-tokens", "--new-tokens", "--runs", "--kv-cache", "--threads"}),
            {"--help", "--json", "--profile"});
  if (args.has("--help") || !args.positional().empty()) {
    std::fputs(
        "usage: mminfer bench --pipeline DIR [--prompt-tokens 32] [--new-tokens 64] [--runs 5] [--kv-cache fp32|fp16|int8]\n"
        "                    [--threads N] [--json] [--profile]\n"
        "  a decoder-only folder (as `mminfer generate` takes it): a prompt of --prompt-tokens ids is\n"
        "  prefilled, then --new-tokens are decoded greedily (end tokens ignored), --runs times after a\n"
        "  warm-up; prints the median prefill ms and decode ms per token, and the KV cache's bytes\n"
        "--profile: also the decode steps' time per op type (per step, prefills left out) on stderr;\n"
        "  every node is timed, so the steps run a little slower\n",
        args.usage_stream());
    std::fputs(kDecoderPrecisionUsage, args.usage_stream());
    return args.has("--help") ? 0 : 2;
  }
  SessionOptions session;
  session.threads = threads_flag(args);
  session.precision = decoder_precision_flags(args);
  session.profile = args.has("--profile");
  const int prompt_tokens = args.get_int("--prompt-tokens", 32), new_tokens = args.get_int("--new-tokens", 64);
  const int runs = args.get_int("--runs", 5);
  if (prompt_tokens < 1 || new_tokens < 2 || runs < 1)
    throw Error("--prompt-tokens must be at least 1, --new-tokens at least 2 and --runs at least 1");
  pipelines::TextGenerator generator(args.get("--pipeline"), session, kv_cache_flag(args));
  if (generator.context() > 0 && prompt_tokens + new_tokens > generator.context())
    throw Error("--prompt-tokens and --new-tokens add up to " + std::to_string(prompt_tokens + new_tokens) +
                " positions, more than the model's context of " + std::to_string(generator.context()));
  generate::DecodeRequest request;
  request.config = generator.config();
  request.config.num_beams = 1;
  request.config.do_sample = false;
  request.config.eos_token_ids.clear();  // every run decodes the same number of tokens
  request.config.stop_strings.clear();
  request.config.max_new_tokens = static_cast<size_t>(new_tokens);
  std::vector<generate::TokenId> prompt;
  for (int i = 0; i < prompt_tokens; ++i) prompt.push_back((i * 7919 + 13) % generator.vocab());
  request.prompts = {prompt};

  // Profiled: the first token's callback comes right after the prefill, so reading the op times
  // there (which restarts their window) leaves only decode steps in each run's window.
  std::vector<OpTime> decode_ops;
  bool first_token = true;
  if (session.profile)
    request.on_text = [&](size_t, generate::TokenId, std::string_view) {
      if (first_token) generator.decoder().op_times();
      first_token = false;
    };
  std::vector<double> prefill, decode;
  generate::DecodeTimings t;
  size_t profiled_steps = 0;
  for (int r = 0; r <= runs; ++r) {  // the first run warms up (plans, packed weights)
    first_token = true;
    generator.generate({}, request, &t);
    if (r == 0) continue;
    if (session.profile) {
      add_op_times(decode_ops, generator.decoder().op_times());
      profiled_steps += t.decode_steps;
    }
    prefill.push_back(t.prefill_ms);
    decode.push_back(t.ms_per_token());
  }
  const double p = percentile(prefill, 0.5), d = percentile(decode, 0.5);
  auto print_profile = [&] {
    if (!session.profile || profiled_steps == 0) return;
    std::fflush(stdout);
    std::fprintf(stderr, "per decode step (%zu steps profiled):\n", profiled_steps);
    std::sort(decode_ops.begin(), decode_ops.end(), [](const OpTime& a, const OpTime& b) { return a.total_ms > b.total_ms; });
    const double steps = static_cast<double>(profiled_steps);
    for (const OpTime& o : decode_ops)
      std::fprintf(stderr, "  %-32s %9.1f us %6.1f calls\n", o.op_type.c_str(), 1000.0 * o.total_ms / steps,
                   static_cast<double>(o.calls) / steps);
  };
  if (args.has("--json")) {
    nlohmann::ordered_json doc = {{"pipeline", args.get("--pipeline")}, {"threads", num_threads()},
                                  {"prompt_tokens", prompt_tokens},      {"new_tokens", new_tokens},
                                  {"runs", runs},                        {"prefill_ms", p},
                                  {"decode_ms_per_token", d},            {"tokens_per_s", 1000.0 / d},
                                  {"kv_cache_bytes", t.cache_bytes},     {"weight_bytes", weight_memory_in_use()}};
    std::printf("%s\n", json_text(doc).c_str());
    print_profile();
    return 0;
  }
  std::printf("pipeline: %s\nthreads: %d, runs: %d (after a warm-up)\n", args.get("--pipeline").c_str(), num_threads(), runs);
  std::printf("prefill %d tokens: median %.2f ms\n", prompt_tokens, p);
  std::printf("decode %d tokens: median %.3f ms per token (%.1f tokens/s)\n", new_tokens, d, 1000.0 / d);
  std::printf("KV cache %.2f MiB, packed weights %.1f MiB\n", static_cast<double>(t.cache_bytes) / (1 << 20),
              static_cast<double>(weight_memory_in_use()) / (1 << 20));
  print_profile();
  return 0;
}

}  // namespace mminfer::cli
