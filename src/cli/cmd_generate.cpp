// mminfer generate --pipeline DIR "prompt"... : text from a decoder-only language model folder,
// with the KV cache owned by the runtime. Tokens stream to stdout as they are made.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/ascii.h"
#include "cli/args.h"
#include "cli/output_text.h"
#include "cli/commands.h"
#include "cli/json_output.h"
#include "pipelines/generation/chat_template.h"
#include "pipelines/generation/text_generator.h"

namespace mminfer::cli {

namespace {

const char* const kUsage =
    "usage: mminfer generate --pipeline DIR PROMPT... [--max-new-tokens N] [--temperature T] [--top-k K]\n"
    "                        [--top-p P] [--seed S] [--repetition-penalty R] [--stop STRING]...\n"
    "                        [--num-beams N] [--prompt-ids 1,2,3] [--kv-cache fp32|fp16|int8] [--threads N] [--profile]\n"
    "                        [--chat] [--speculate K | --cascade H] [--draft DIR] [--draft-precision int4|int8|fp32]\n"
    "                        [--json | --jsonl]\n"
    "  text from a decoder-only model folder (ONNX decoder with past_key_values, config.json,\n"
    "  tokenizer.json, generation_config.json); each prompt is its own sequence, all decoded together\n"
    "  the decoding settings default to the folder's generation_config.json; --temperature turns\n"
    "  sampling on (reproducible with --seed); --num-beams N > 1 searches N beams (the best one is\n"
    "  printed once found); --prompt-ids gives a prompt as token ids; --chat makes each prompt a user\n"
    "  message in the folder's chat template (chat_template.jinja, chat_template.json or\n"
    "  tokenizer_config.json's chat_template) with the assistant's turn opened\n"
    "  one prompt streams its text as it is made; --json prints {\"results\": [{\"prompt\", \"text\",\n"
    "  \"tokens\", \"stop_reason\", \"prompt_tokens\", \"prefill_ms\", \"decode_ms_per_token\",\n"
    "  \"tokens_per_s\"}]}; --profile prints the decoder's time per op type to stderr\n"
    "  --speculate K: greedy speculative decoding, a draft proposing K tokens per pass of the model\n"
    "  (the same tokens as without it); the draft is --draft DIR (same vocabulary) or the folder's\n"
    "  own decoder at --draft-precision (int4 unless --draft is given); --json adds \"speculative\":\n"
    "  {\"k\", \"rounds\", \"proposed\", \"accepted\", \"acceptance\"}\n"
    "  --cascade H: greedy, the draft chooses each token and the model where the draft's entropy is\n"
    "  above H nats (the text may differ from the model's own); --json adds \"cascade\": {\"max_entropy\",\n"
    "  \"tokens\", \"escalated\", \"full_positions\"} over every prompt of the run\n";

std::vector<generate::TokenId> parse_ids(const std::string& text) {
  std::vector<generate::TokenId> ids;
  for (const std::string& item : split_list(text)) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 0) throw Error("--prompt-ids: '" + item + "' is not a token id");
    ids.push_back(v);
  }
  if (ids.empty()) throw Error("--prompt-ids: no ids given");
  return ids;
}

// The draft of --speculate K or --cascade H: --draft DIR as loaded, or the model's own folder at
// --draft-precision (int4 by default); null without either.
std::unique_ptr<pipelines::TextGenerator> draft_model(const Args& args, const SessionOptions& session) {
  if (!speculate_flag(args) && cascade_flag(args) < 0) return nullptr;
  SessionOptions options = session;
  options.profile = false;
  options.precision.decoder_weight_bits = draft_bits_flag(args, args.has("--draft") ? "fp32" : "int4", true);
  return std::make_unique<pipelines::TextGenerator>(args.get("--draft", args.get("--pipeline")), options);
}

}  // namespace

int cmd_generate(int argc, char** argv) {
  Args args(argc, argv, 2,
            with_decoder_precision_flags({"--pipeline", "--max-new-tokens", "--temperature", "--top-k", "--top-p", "--seed",
                                          "--repetition-penalty", "--stop", "--prompt-ids", "--threads", "--num-beams",
                                          "--kv-cache", "--speculate", "--draft", "--draft-precision", "--cascade"}),
            {"--help", "--json", "--jsonl", "--profile", "--chat"});
  if (args.has("--help") || !args.has("--pipeline") || (args.positional().empty() && !args.has("--prompt-ids"))) {
    std::fputs(kUsage, args.usage_stream());
    std::fputs(kDecoderPrecisionUsage, args.usage_stream());
    return args.has("--help") ? 0 : 2;
  }
  SessionOptions session;
  session.threads = threads_flag(args);
  session.precision = decoder_precision_flags(args);
  session.profile = args.has("--profile");
  pipelines::TextGenerator generator(args.get("--pipeline"), session, kv_cache_flag(args));

  generate::DecodeRequest request;
  request.config = generator.config();
  generate::GenerationConfig& c = request.config;
  if (size_t beams = beams_flag(args, "--num-beams", 64)) c.num_beams = beams;
  c.num_return_sequences = 1;
  if (c.num_beams > 1 && (args.has("--temperature") || args.has("--top-p") || args.has("--top-k")))
    throw Error("--num-beams searches deterministically: it takes no --temperature, --top-k or --top-p");
  if (size_t n = max_new_tokens_flag(args)) c.max_new_tokens = n;
  if (args.has("--temperature")) {
    double t = args.get_double("--temperature", 1.0);
    if (!(t >= 0)) throw Error("--temperature must be 0 or more");
    c.do_sample = t > 0;
    if (t > 0) c.temperature = static_cast<float>(t);
  }
  if (args.has("--top-k")) {
    int k = args.get_int("--top-k", 0);
    if (k < 0) throw Error("--top-k must be 0 (off) or more");
    c.top_k = static_cast<size_t>(k);
  }
  if (args.has("--top-p")) {
    double p = args.get_double("--top-p", 1.0);
    if (!(p > 0 && p <= 1)) throw Error("--top-p must be in (0, 1]");
    c.top_p = static_cast<float>(p);
  }
  if (args.has("--repetition-penalty")) {
    double r = args.get_double("--repetition-penalty", 1.0);
    if (!(r > 0)) throw Error("--repetition-penalty must be above 0");
    c.repetition_penalty = static_cast<float>(r);
  }
  for (const std::string& s : args.all("--stop")) {
    if (s.empty()) throw Error("--stop: an empty stop string would stop at once");
    c.stop_strings.push_back(s);
  }
  if (args.has("--seed")) {
    std::string s = args.get("--seed");
    size_t used = 0;
    unsigned long long v = 0;
    try {
      v = std::stoull(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != s.size() || s.empty() || s[0] == '-') throw Error("--seed must be a whole number, got '" + s + "'");
    request.seed = v;
  }

  std::vector<std::string> prompts = args.positional();
  if (args.has("--chat")) {
    const std::string dir = args.get("--pipeline");
    std::optional<pipelines::ChatTemplate> chat = pipelines::ChatTemplate::from_folder(dir);
    if (!chat)
      throw Error(dir + ": --chat needs a chat template (chat_template.jinja, chat_template.json or tokenizer_config.json's "
                        "chat_template) and the folder has none");
    for (const std::string& p : prompts)
      request.prompts.push_back(generator.encode(
          chat->render(nlohmann::ordered_json::array({{{"role", "user"}, {"content", p}}}), true), false));
  } else {
    for (const std::string& p : prompts) request.prompts.push_back(generator.encode(p));
  }
  for (const std::string& ids : args.all("--prompt-ids")) {
    request.prompts.push_back(parse_ids(ids));
    generator.check_ids(request.prompts.back());
    prompts.push_back(generator.decode_tokens(request.prompts.back()));
  }
  JsonResults json(json_flag(args));
  const bool stream = !json.on() && request.prompts.size() == 1;
  if (stream)
    request.on_text = [](size_t, generate::TokenId, std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    };
  generate::DecodeTimings t;
  generate::SpeculativeStats speculation;
  generate::CascadeStats cascade;
  std::unique_ptr<pipelines::TextGenerator> draft = draft_model(args, session);
  const size_t k = speculate_flag(args);
  const double max_entropy = cascade_flag(args);
  std::vector<generate::DecodedSequence> out =
      !draft     ? generator.generate({}, request, &t)
      : k        ? generator.generate_speculative(*draft, request, k, &t, &speculation)
                 : generator.generate_cascade(*draft, request, max_entropy, &t, &cascade);
  double per_token = t.ms_per_token();
  double tokens_per_s = t.decode_ms > 0 ? 1000.0 * static_cast<double>(t.new_tokens - out.size()) / t.decode_ms : 0.0;
  for (size_t s = 0; s < out.size(); ++s) {
    if (json.on()) {
      nlohmann::ordered_json result = {{"prompt", prompts[s]},
                                        {"text", out[s].text},
                                        {"tokens", out[s].tokens},
                                        {"stop_reason", generate::stop_reason_name(out[s].reason)},
                                        {"prompt_tokens", request.prompts[s].size()},
                                        {"prefill_ms", t.prefill_ms},
                                        {"decode_ms_per_token", per_token},
                                        {"tokens_per_s", tokens_per_s}};
      if (draft && !k)  // over every prompt of the run
        result["cascade"] = {{"max_entropy", max_entropy},
                             {"tokens", cascade.tokens},
                             {"escalated", cascade.escalated},
                             {"full_positions", cascade.full_positions}};
      if (draft && k)  // over every prompt of the run
        result["speculative"] = {{"k", k},
                                 {"rounds", speculation.rounds},
                                 {"proposed", speculation.proposed},
                                 {"accepted", speculation.accepted},
                                 {"acceptance", speculation.acceptance()}};
      json.add(std::move(result));
    } else if (stream) {
      std::printf("\n");
    } else {
      std::printf("[%zu] %s\n", s + 1, out[s].text.c_str());
    }
  }
  json.finish();
  if (session.profile) print_op_times(generator.decoder().op_times());
  std::fprintf(stderr, "mminfer generate: %zu prompt tokens prefilled in %.1f ms; %zu steps at %.2f ms per token (%.1f tokens/s)\n",
               t.prompt_tokens, t.prefill_ms, t.decode_steps, per_token, tokens_per_s);
  if (draft && !k)
    std::fprintf(stderr, "mminfer generate: cascade: the model chose %zu of %zu tokens (%.0f%%), reading %zu positions\n",
                 cascade.escalated, cascade.tokens, 100 * cascade.escalated_share(), cascade.full_positions);
  if (draft && k)
    std::fprintf(stderr, "mminfer generate: speculation: %zu passes, %zu of %zu proposed tokens kept (%.0f%%)\n", speculation.rounds,
                 speculation.accepted, speculation.proposed, 100 * speculation.acceptance());
  return 0;
}

}  // namespace mminfer::cli
