// mminfer chat --pipeline DIR [--image F] "question" : an answer from a vision-language folder,
// streamed as it is made.
#include <cstdio>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/input_files.h"
#include "cli/json_output.h"
#include "pipelines/generation/vision_language.h"

namespace mminfer::cli {

int cmd_chat(int argc, char** argv) {
  Args args(argc, argv, 2, with_decoder_precision_flags({"--pipeline", "--image", "--max-new-tokens", "--kv-cache", "--threads"}),
            {"--help", "--json"});
  if (args.has("--help") || !args.has("--pipeline") || args.positional().size() != 1) {
    std::fputs(
        "usage: mminfer chat --pipeline DIR [--image F] QUESTION [--max-new-tokens N] [--kv-cache fp32|fp16]\n"
        "                    [--threads N] [--json]\n"
        "  an answer about an image from a vision-language folder (transformers.js's SmolVLM layout:\n"
        "  vision_encoder.onnx, embed_tokens.onnx, decoder_model_merged.onnx, tokenizer.json, configs),\n"
        "  streamed as it is made; --json prints {\"text\", \"tokens\", \"prompt_tokens\", \"encoder_ms\",\n"
        "  \"prefill_ms\", \"decode_ms_per_token\"}\n",
        args.usage_stream());
    std::fputs(kDecoderPrecisionUsage, args.usage_stream());
    return args.has("--help") ? 0 : 2;
  }
  SessionOptions session;
  session.threads = threads_flag(args);
  session.precision = decoder_precision_flags(args);
  std::optional<image::Image> img;
  if (args.has("--image")) img = image::decode_image(read_input_file(args.get("--image")));
  pipelines::VisionLanguage model(args.get("--pipeline"), session, kv_cache_flag(args));
  generate::DecodeRequest request;
  request.config = model.config();
  request.config.num_beams = 1;
  if (size_t n = max_new_tokens_flag(args)) request.config.max_new_tokens = n;
  const bool json = args.has("--json");
  if (!json)
    request.on_text = [](size_t, generate::TokenId, std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    };
  generate::DecodeTimings t;
  double encoder_ms = 0;
  const std::string& question = args.positional()[0];
  generate::DecodedSequence out = model.answer(question, img ? &*img : nullptr, request, &t, &encoder_ms);
  double per_token = t.ms_per_token();
  if (json) {
    nlohmann::ordered_json doc = {{"text", out.text},
                                  {"tokens", out.tokens},
                                  {"stop_reason", generate::stop_reason_name(out.reason)},
                                  {"prompt_tokens", t.prompt_tokens},
                                  {"encoder_ms", encoder_ms},
                                  {"prefill_ms", t.prefill_ms},
                                  {"decode_ms_per_token", per_token}};
    std::printf("%s\n", json_text(doc).c_str());
  } else {
    std::printf("\n");
  }
  return 0;
}

}  // namespace mminfer::cli
