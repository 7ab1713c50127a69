// mminfer chat --pipeline DIR [--image F] "question" ["question"...] : answers from a
// vision-language folder, streamed as they are made. Several questions about one image are
// answered one after the other, each on its own; the image goes through the vision encoder once.
#include <cstdio>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/input_files.h"
#include "cli/json_output.h"
#include "pipelines/generation/vision_language.h"

namespace mminfer::cli {

int cmd_chat(int argc, char** argv) {
  Args args(argc, argv, 2,
            with_decoder_precision_flags({"--pipeline", "--image", "--max-new-tokens", "--kv-cache", "--threads", "--feature-cache-mb",
                                        "--prune-image-tokens"}),
            {"--help", "--json"});
  if (args.has("--help") || !args.has("--pipeline") || args.positional().empty()) {
    std::fputs(
        "usage: mminfer chat --pipeline DIR [--image F] QUESTION... [--max-new-tokens N] [--kv-cache fp32|fp16|int8]\n"
        "                    [--threads N] [--feature-cache-mb N] [--prune-image-tokens S] [--json]\n"
        "  answers about an image from a vision-language folder (transformers.js's SmolVLM layout:\n"
        "  vision_encoder.onnx, embed_tokens.onnx, decoder_model_merged.onnx, tokenizer.json, configs),\n"
        "  streamed as they are made, one line each; the prompt is the folder's chat template (else\n"
        "  Idefics3's form); the image is encoded once for all the questions\n"
        "  (--feature-cache-mb 0: once per question). --json prints one line per question:\n"
        "  {\"text\", \"tokens\", \"prompt_tokens\", \"chat_template\", \"encoder_ms\", \"encoder_runs\",\n"
        "  \"image_frames\", \"prefill_ms\", \"decode_ms_per_token\"} (chat_template: the file it came from, null\n"
        "  when none; encoder_runs: the images encoded so far; image_frames: the tiles and global image\n"
        "  the image was split into, 1 unsplit)\n"
        "  --prune-image-tokens S: the decoder reads only the image tokens most relevant to the prompt's\n"
        "  text (cosine to its mean token embedding), dropping the share S (0 to below 1); --json adds\n"
        "  \"image_tokens\": [read, of]\n",
        args.usage_stream());
    std::fputs(kDecoderPrecisionUsage, args.usage_stream());
    return args.has("--help") ? 0 : 2;
  }
  SessionOptions session;
  session.threads = threads_flag(args);
  const size_t feature_bytes = feature_cache_flag(args);
  session.precision = decoder_precision_flags(args);
  std::optional<image::Image> img;
  if (args.has("--image")) img = image::decode_image(read_input_file(args.get("--image")));
  pipelines::VisionLanguage model(args.get("--pipeline"), session, kv_cache_flag(args));
  model.features().set_cache_bytes(feature_bytes);
  const bool prune = args.has("--prune-image-tokens");
  if (prune) {
    if (!img) throw Error("--prune-image-tokens goes with --image");
    const double share = args.get_double("--prune-image-tokens", 0);
    if (!(share >= 0 && share < 1)) throw Error("--prune-image-tokens takes the share of image tokens dropped, 0 to below 1");
    model.set_image_token_pruning(share);
  }
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
  // The file whose chat template made the prompt; null: Idefics3's form.
  nlohmann::ordered_json template_file = nullptr;
  if (const auto* t = model.chat_template()) template_file = std::filesystem::path(t->file()).filename().string();
  for (const std::string& question : args.positional()) {
    generate::DecodeTimings t;
    double encoder_ms = 0;
    int frames = 0;
    std::pair<size_t, size_t> image_tokens{0, 0};
    generate::DecodedSequence out =
        model.answer(question, img ? &*img : nullptr, request, &t, &encoder_ms, &frames, &image_tokens);
    if (json) {
      nlohmann::ordered_json doc = {{"text", out.text},
                                    {"tokens", out.tokens},
                                    {"stop_reason", generate::stop_reason_name(out.reason)},
                                    {"prompt_tokens", t.prompt_tokens},
                                    {"chat_template", template_file},
                                    {"encoder_ms", encoder_ms},
                                    {"encoder_runs", model.features().counts().encoded.load()},
                                    {"image_frames", frames},
                                    {"prefill_ms", t.prefill_ms},
                                    {"decode_ms_per_token", t.ms_per_token()}};
      if (prune) doc["image_tokens"] = {image_tokens.first, image_tokens.second};
      std::printf("%s\n", json_text(doc).c_str());
    } else {
      std::printf("\n");
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace mminfer::cli
