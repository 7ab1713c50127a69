// mminfer embed --pipeline DIR (--image F | --text S | --text-file F | --audio F)... :
// L2-normalized embeddings, one result per input in command-line order.
#include <cstdio>
#include <span>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/json_output.h"
#include "cli/input_files.h"
#include "cli/output_text.h"
#include "modal/image/image.h"
#include "pipelines/embedder.h"

namespace mminfer::cli {

namespace {

struct Input {
  std::string flag;      // --image, --text, --text-file, --audio
  std::string value;     // file name, or the text itself
  pipelines::Modality modality;
  std::string error;     // non-empty: this input failed
  std::vector<float> embedding;
};

// Embeds the inputs at `which` in one call. When the call fails, each input runs alone, so
// the error lands on the one at fault (a corrupt clip found only while decoding) and the
// others still get their embeddings.
template <typename T, typename F>
void embed_batch(std::vector<Input>& inputs, const std::vector<size_t>& which, const std::vector<T>& items, F&& embed) {
  if (which.empty()) return;
  try {
    std::vector<pipelines::Embedding> out = embed(items);
    for (size_t i = 0; i < which.size(); ++i) inputs[which[i]].embedding = std::move(out.at(i));
    return;
  } catch (const Error& e) {
    if (which.size() == 1) {
      inputs[which[0]].error = e.what();
      return;
    }
  }
  for (size_t i = 0; i < which.size(); ++i) {
    try {
      inputs[which[i]].embedding = std::move(embed(std::vector<T>{items[i]}).at(0));
    } catch (const Error& e) {
      inputs[which[i]].error = e.what();
    }
  }
}

std::string preview(const std::vector<float>& e) {
  std::string s = std::to_string(e.size()) + " dims [";
  char buf[32];
  for (size_t i = 0; i < e.size() && i < 4; ++i) {
    std::snprintf(buf, sizeof buf, "%s%.4f", i ? ", " : "", e[i]);
    s += buf;
  }
  return s + (e.size() > 4 ? ", ...]" : "]");
}

}  // namespace

int cmd_embed(int argc, char** argv) {
  Args args(argc, argv, 2, {"--pipeline", "--image", "--text", "--text-file", "--audio", "--threads"},
            {"--help", "--json", "--jsonl"});
  std::vector<Input> inputs;
  for (const auto& [flag, value] : args.in_order())
    if (flag == "--image" || flag == "--text" || flag == "--text-file" || flag == "--audio")
      inputs.push_back({flag, value,
                        flag == "--image"   ? pipelines::Modality::kImage
                        : flag == "--audio" ? pipelines::Modality::kAudio
                                            : pipelines::Modality::kText,
                        "", {}});
  if (args.has("--help") || inputs.empty() || !args.has("--pipeline")) {
    std::fputs(
        "usage: mminfer embed --pipeline DIR (--image F | --text S | --text-file F | --audio F)... [--json | --jsonl]\n"
        "                     [--threads N]\n"
        "  L2-normalized embeddings of each input, in the order given, from a pipeline folder\n"
        "  (DIR/pipeline.json, type clip: image and text towers); --json prints one document\n"
        "  {\"results\": [...]} with an object per input: {\"input\", \"modality\", \"embedding\": [...]}\n"
        "  ({\"input\", \"modality\", \"error\"} when it fails); --jsonl prints those objects one a line\n"
        "  --text-file: the text of a UTF-8 file (texts over 64 KiB are refused)\n"
        "  --audio: an audio file, for pipelines with an audio tower\n"
        "  a bad input prints one error line and the others still run (exit status 1)\n",
        args.usage_stream());
    return args.has("--help") ? 0 : 2;
  }
  if (!args.positional().empty()) throw Error("unexpected argument '" + args.positional()[0] + "' (inputs take --image, --text, ...)");
  SessionOptions session;
  session.threads = threads_flag(args);
  std::string dir = args.get("--pipeline");
  pipelines::Manifest manifest = pipelines::read_manifest(dir);
  std::unique_ptr<pipelines::Embedder> embedder = pipelines::open_embedder(manifest, session);

  // Read and check every input first, so that the good ones of each modality run as one batch.
  std::vector<size_t> image_at, text_at, audio_at;
  std::vector<image::Image> images;
  std::vector<std::string> texts;
  std::vector<std::vector<uint8_t>> clips;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Input& in = inputs[i];
    try {
      embedder->require_tower(in.modality);
      if (in.flag == "--image") {
        images.push_back(image::decode_image(read_input_file(in.value)));
        image_at.push_back(i);
      } else if (in.flag == "--audio") {
        clips.push_back(read_input_file(in.value));
        audio_at.push_back(i);
      } else {
        std::string text = in.flag == "--text" ? in.value : read_text_file(in.value);
        embedder->check_text(text);
        texts.push_back(std::move(text));
        text_at.push_back(i);
      }
    } catch (const Error& e) {
      in.error = e.what();
    }
  }
  embed_batch(inputs, image_at, images, [&](const auto& v) { return embedder->embed_images(v); });
  embed_batch(inputs, text_at, texts, [&](const auto& v) { return embedder->embed_texts(v); });
  embed_batch(inputs, audio_at, clips, [&](const auto& v) { return embedder->embed_audio(v); });

  JsonResults json(json_flag(args));
  int failures = 0;
  for (const Input& in : inputs) {
    const char* modality = pipelines::modality_name(in.modality);
    std::string name = in.flag == "--text" ? "\"" + short_text(in.value) + "\"" : in.value;
    if (!in.error.empty()) {
      ++failures;
      if (json.on()) json.add({{"input", in.value}, {"modality", modality}, {"error", in.error}});
      std::fprintf(stderr, "mminfer embed: error: %s %s: %s\n", modality, one_line_text(name).c_str(), in.error.c_str());
    } else if (json.on()) {
      json.add({{"input", in.value}, {"modality", modality}, {"embedding", in.embedding}});
    } else {
      std::printf("%s %s: %s\n", modality, one_line_text(name).c_str(), preview(in.embedding).c_str());
    }
    std::fflush(stdout);
  }
  json.finish();
  return failures ? 1 : 0;
}

}  // namespace mminfer::cli
