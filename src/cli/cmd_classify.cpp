// mminfer classify --pipeline DIR --image F... [--labels "a,b,c"] [--templates "a photo of a {}.|..."] :
// zero-shot probabilities of labels for each image with a clip pipeline.
#include <cstdio>
#include <span>

#include "core/ascii.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/json_output.h"
#include "cli/input_files.h"
#include "cli/output_text.h"
#include "modal/image/image.h"
#include "pipelines/clip/clip_pipeline.h"

namespace mminfer::cli {

namespace {

// "a, b ,c" -> {"a", "b", "c"}; empty pieces stay (and are refused with their position later).
std::vector<std::string> trimmed_list(const std::string& s, char sep) {
  std::vector<std::string> out = split_list(s, sep);
  for (std::string& piece : out) piece = std::string(trim(piece, " \t"));
  return out;
}

}  // namespace

int cmd_classify(int argc, char** argv) {
  Args args(argc, argv, 2,
            with_precision_flags({"--pipeline", "--image", "--labels", "--templates", "--threads", "--cascade",
                                  "--cascade-merge-tokens"}),
            {"--help", "--json", "--jsonl"});
  if (args.has("--help") || !args.has("--pipeline") || !args.has("--image")) {
    std::fputs(
        "usage: mminfer classify --pipeline DIR --image F... [--labels \"a,b,c\"] [--templates \"a photo of a {}.|...\"]\n"
        "                        [--json | --jsonl] [--threads N]\n"
        "  zero-shot classification with a clip pipeline: per image, the probability of each label,\n"
        "  softmax(logit_scale * cosine(image, label)), a label's embedding averaged over the templates\n"
        "  --labels: comma-separated (default: the labels of DIR/pipeline.json)\n"
        "  --templates: '|'-separated, each with {} for the label (default: the pipeline's, else \"{}\")\n"
        "  --json: one document {\"results\": [...]}, an object per image: {\"file\", \"labels\": [{\"label\",\n"
        "    \"score\"}]}, highest score first ({\"file\", \"error\"} when it fails); --jsonl: those objects one a line\n"
        "  --precision SPEC: as for mminfer run (e.g. vision=int8)\n"
        "  --cascade H: cheap path first: each image is classified by an INT8 image tower (with\n"
        "    --cascade-merge-tokens R, also merging R tokens per block), and again by the full one when the\n"
        "    entropy of its label probabilities is above H nats; --json adds \"escalated\" per image\n",
        args.usage_stream());
    return args.has("--help") ? 0 : 2;
  }
  if (!args.positional().empty()) throw Error("unexpected argument '" + args.positional()[0] + "' (images take --image)");
  SessionOptions session;
  session.threads = threads_flag(args);
  session.precision = precision_flags(args);
  const bool cascade = args.has("--cascade");
  const double max_entropy = args.get_double("--cascade", 0);
  if (cascade && !(max_entropy >= 0)) throw Error("--cascade takes the entropy (nats) above which the full tower decides, 0 or more");
  if (args.has("--cascade-merge-tokens") && !cascade) throw Error("--cascade-merge-tokens goes with --cascade H");
  pipelines::Manifest manifest = pipelines::read_manifest(args.get("--pipeline"));
  if (manifest.type != pipelines::PipelineType::kClip)
    throw Error("classify needs a clip pipeline; " + manifest.path + " is type '" + pipelines::type_name(manifest.type) + "'");

  std::vector<std::string> labels;
  if (args.has("--labels")) labels = trimmed_list(args.get("--labels"), ',');
  else if (manifest.labels) labels = *manifest.labels;
  if (labels.empty()) throw Error("no labels: give --labels \"a,b,c\" or list labels in " + manifest.path);
  std::vector<std::string> templates{"{}"};
  if (args.has("--templates")) templates = trimmed_list(args.get("--templates"), '|');
  else if (manifest.templates && !manifest.templates->empty()) templates = *manifest.templates;

  clip::ClipPipeline pipeline(manifest, session);
  // Labels first: a bad label or template fails the command once, before any image is read.
  std::vector<pipelines::Embedding> label_embeddings = pipeline.label_embeddings(labels, templates);

  const std::vector<std::string> files = args.all("--image");
  std::vector<std::string> errors(files.size());
  std::vector<image::Image> images;
  std::vector<size_t> image_at;
  for (size_t i = 0; i < files.size(); ++i) {
    try {
      images.push_back(image::decode_image(read_input_file(files[i])));
      image_at.push_back(i);
    } catch (const Error& e) {
      errors[i] = e.what();
    }
  }
  std::vector<std::vector<clip::LabelScore>> scores(files.size());
  std::vector<bool> escalated(files.size(), false);
  if (!images.empty() && !cascade) {
    std::vector<pipelines::Embedding> embedded = pipeline.embed_images(images);
    for (size_t k = 0; k < image_at.size(); ++k) scores[image_at[k]] = pipeline.classify(embedded[k], labels, label_embeddings);
  } else if (!images.empty()) {
    // The light image tower answers; the full one where the answer is unsure.
    SessionOptions light = session;
    light.precision.by_modality[static_cast<int>(Modality::kVision)] = Precision::kInt8;
    light.merge_tokens = merge_tokens_flag(args, "--cascade-merge-tokens");
    clip::ClipPipeline cheap(manifest, light);
    std::vector<pipelines::Embedding> embedded = cheap.embed_images(images);
    std::vector<image::Image> unsure;
    std::vector<size_t> unsure_at;
    for (size_t k = 0; k < image_at.size(); ++k) {
      scores[image_at[k]] = pipeline.classify(embedded[k], labels, label_embeddings);
      if (clip::entropy(scores[image_at[k]]) > max_entropy) unsure.push_back(images[k]), unsure_at.push_back(image_at[k]);
    }
    if (!unsure.empty()) {
      std::vector<pipelines::Embedding> again = pipeline.embed_images(unsure);
      for (size_t k = 0; k < unsure_at.size(); ++k) {
        scores[unsure_at[k]] = pipeline.classify(again[k], labels, label_embeddings);
        escalated[unsure_at[k]] = true;
      }
    }
  }

  JsonResults json(json_flag(args));
  int failures = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    if (!errors[i].empty()) {
      ++failures;
      json.add_error("classify", files[i], errors[i]);
      continue;
    }
    if (json.on()) {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (const clip::LabelScore& s : scores[i]) list.push_back({{"label", s.label}, {"score", s.score}});
      nlohmann::ordered_json result = {{"file", files[i]}, {"labels", list}};
      if (cascade) result["escalated"] = static_cast<bool>(escalated[i]);
      json.add(result);
    } else {
      std::string line = one_line_text(files[i]) + ":";
      char buf[32];
      for (size_t k = 0; k < scores[i].size(); ++k) {
        std::snprintf(buf, sizeof buf, " %.4f", scores[i][k].score);
        line += (k ? ", " : " ") + one_line_text(short_text(scores[i][k].label)) + buf;
      }
      std::printf("%s\n", line.c_str());
    }
    std::fflush(stdout);
  }
  json.finish();
  return failures ? 1 : 0;
}

}  // namespace mminfer::cli
