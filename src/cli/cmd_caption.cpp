// mminfer caption --pipeline DIR IMAGE... : text of images with an image-to-text model folder.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/input_files.h"
#include "cli/json_output.h"
#include "cli/output_text.h"
#include "pipelines/generation/image_to_text.h"

namespace mminfer::cli {

int cmd_caption(int argc, char** argv) {
  Args args(argc, argv, 2,
            with_decoder_precision_flags({"--pipeline", "--max-new-tokens", "--beam", "--kv-cache", "--threads", "--feature-cache-mb",
                                          "--speculate", "--draft", "--draft-precision", "--cascade", "--max-batch"}),
            {"--help", "--json", "--jsonl"});
  if (args.has("--help") || !args.has("--pipeline") || args.positional().empty()) {
    std::fputs(
        "usage: mminfer caption --pipeline DIR IMAGE... [--max-new-tokens N] [--beam N] [--kv-cache fp32|fp16|int8]\n"
        "                       [--threads N] [--feature-cache-mb N] [--speculate K | --cascade H]\n"
        "                       [--draft-precision int4|int8 | --draft heads]\n"
        "                       [--max-batch N] [--json | --jsonl]\n"
        "  the text of each image with an image-to-text folder (Optimum's vision-encoder-decoder export:\n"
        "  encoder_model.onnx, decoder_model.onnx, decoder_with_past_model.onnx, tokenizer.json and the\n"
        "  configs); the images are encoded and decoded together, a repeated image encoded once (an encoder-\n"
        "  feature cache of --feature-cache-mb, 256 by default; 0: none). --json prints {\"results\":\n"
        "  [{\"input\", \"text\", \"tokens\"}], \"encoder_ms\", \"encoder_runs\", \"prefill_ms\",\n"
        "  \"decode_ms_per_token\"} (encoder_runs: the images that went through the encoder)\n"
        "  --speculate K: greedy speculative decoding, the folder's decoder at --draft-precision (int4)\n"
        "  proposing K tokens per pass (the same captions); --json adds \"speculative\": {\"k\",\n"
        "  \"rounds\", \"proposed\", \"accepted\", \"acceptance\"}\n"
        "  --draft heads: with --speculate, the decoder's own draft heads propose instead (an output\n"
        "  draft_logits [batch, positions, heads, vocab]; K at most their count): no draft decoder runs\n"
        "  --cascade H: the decoder at --draft-precision (int4) chooses each token, the full one where the\n"
        "  light one's entropy is above H nats (captions may differ from the full model's); --json adds\n"
        "  \"cascade\": {\"max_entropy\", \"tokens\", \"escalated\", \"full_positions\", \"images_escalated\"}\n"
        "  --max-batch N: decode at most N images together (default: all of them; speculative and cascaded\n"
        "  captions are one at a time)\n"
        "  a bad image prints one error line and the others still run (exit status 1)\n",
        args.usage_stream());
    std::fputs(kDecoderPrecisionUsage, args.usage_stream());
    return args.has("--help") ? 0 : 2;
  }
  SessionOptions session;
  session.threads = threads_flag(args);
  session.precision = decoder_precision_flags(args);
  pipelines::CaptionOptions options;
  options.max_new_tokens = max_new_tokens_flag(args);
  options.beams = beams_flag(args, "--beam", 16);
  if (args.has("--max-batch")) {
    const int n = args.get_int("--max-batch", 0);
    if (n < 1) throw Error("--max-batch takes the most images decoded together, 1 or more");
    options.max_batch = static_cast<size_t>(n);
  }
  options.speculate = speculate_flag(args);
  options.cascade_entropy = cascade_flag(args);
  if (args.has("--draft")) {
    if (args.get("--draft") != "heads")
      throw Error("caption's --draft takes 'heads' (the decoder's own draft heads), got '" + args.get("--draft") + "'");
    if (!options.speculate) throw Error("--draft heads goes with --speculate K");
    if (args.has("--draft-precision")) throw Error("--draft heads and --draft-precision do not mix: the heads are the decoder's own");
    options.draft_heads = true;
  } else if (options.speculate || options.cascade_entropy >= 0) {
    options.draft_bits = draft_bits_flag(args, "int4", false);
  }
  const size_t feature_bytes = feature_cache_flag(args);
  pipelines::ImageToText model(args.get("--pipeline"), session, kv_cache_flag(args));
  model.features().set_cache_bytes(feature_bytes);

  // Every readable image goes into one batch; the others get their error line.
  const auto& files = args.positional();
  std::vector<std::string> errors(files.size());
  std::vector<image::Image> images;
  std::vector<size_t> at;
  for (size_t i = 0; i < files.size(); ++i) {
    try {
      image::Image img = image::decode_image(read_input_file(files[i]));
      model.preprocess(img);  // size rules checked before the batch runs
      images.push_back(std::move(img));
      at.push_back(i);
    } catch (const Error& e) {
      errors[i] = e.what();
    }
  }
  pipelines::Captions captions;
  if (!images.empty()) captions = model.caption(images, options);
  std::vector<const generate::DecodedSequence*> result(files.size(), nullptr);
  for (size_t k = 0; k < at.size(); ++k) result[at[k]] = &captions.sequences[k];

  JsonForm form = json_flag(args);
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  int failures = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    nlohmann::ordered_json item;
    if (!errors[i].empty()) {
      ++failures;
      std::fprintf(stderr, "mminfer caption: error: %s: %s\n", one_line_text(files[i]).c_str(), errors[i].c_str());
      item = {{"input", files[i]}, {"error", errors[i]}};
    } else {
      item = {{"input", files[i]}, {"text", result[i]->text}, {"tokens", result[i]->tokens}};
      if (form == JsonForm::kNone) std::printf("%s: %s\n", one_line_text(files[i]).c_str(), result[i]->text.c_str());
    }
    if (form == JsonForm::kLines) std::printf("%s\n", json_text(item).c_str());
    list.push_back(std::move(item));
  }
  const auto& t = captions.timings;
  double per_token = t.ms_per_token();
  if (form == JsonForm::kDocument) {
    nlohmann::ordered_json doc = {{"results", list},
                                  {"encoder_ms", captions.encoder_ms},
                                  {"encoder_runs", model.features().counts().encoded.load()},
                                  {"prefill_ms", t.prefill_ms},
                                  {"decode_ms_per_token", per_token}};
    if (options.speculate)
      doc["speculative"] = {{"k", options.speculate},
                            {"rounds", captions.speculation.rounds},
                            {"proposed", captions.speculation.proposed},
                            {"accepted", captions.speculation.accepted},
                            {"acceptance", captions.speculation.acceptance()}};
    if (options.cascade_entropy >= 0)
      doc["cascade"] = {{"max_entropy", options.cascade_entropy},
                        {"tokens", captions.cascade.tokens},
                        {"escalated", captions.cascade.escalated},
                        {"full_positions", captions.cascade.full_positions},
                        {"images_escalated", captions.cascade.sequences_escalated}};
    std::printf("%s\n", json_text(doc).c_str());
  }
  return failures ? 1 : 0;
}

}  // namespace mminfer::cli
