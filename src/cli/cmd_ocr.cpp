// mminfer ocr IMAGE... : text lines from images with the PP-OCRv4 pipeline.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/json_output.h"
#include "modal/image/image.h"
#include "pipelines/ocr/ocr_pipeline.h"

namespace mminfer::cli {

namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot read " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

double rounded(double x, double scale) { return std::round(x * scale) / scale; }

nlohmann::ordered_json line_json(const ocr::OcrLine& l) {
  nlohmann::ordered_json box = nlohmann::ordered_json::array();
  for (int i = 0; i < 4; ++i) box.push_back({std::lround(l.box[i].x), std::lround(l.box[i].y)});
  return {{"text", l.text}, {"score", rounded(l.score, 1e4)}, {"box", box}};
}

}  // namespace

int cmd_ocr(int argc, char** argv) {
  Args args(argc, argv, 2, with_precision_flags({"--threads", "--pipeline", "--models", "--max-side", "--unclip", "--fp32-models", "--cascade"}),
            {"--help", "--json", "--jsonl", "--no-cls"});
  if (args.has("--help") || args.positional().empty()) {
    std::fputs(
        "usage: mminfer ocr IMAGE... [--json | --jsonl] [--threads N] [--pipeline DIR] [--max-side N] [--unclip R] [--no-cls]\n"
        "  text lines of each image (JPEG, PNG, BMP, GIF, WebP) in reading order; --json prints one\n"
        "  document {\"results\": [...]} with an object per image: {\"file\", \"lines\": [{\"text\", \"score\",\n"
        "  \"box\"}], \"ms\"} ({\"file\", \"error\"} when it fails); --jsonl prints those objects one a line\n"
        "  --pipeline (or --models): an ocr pipeline folder, with a pipeline.json or the PP-OCRv4\n"
        "    det/cls/rec models and ppocr_keys_v1.txt by their names (default models/ppocr)\n"
        "  --max-side: the detector's longer input side (960); --unclip: how far boxes grow (2.0);\n"
        "    both override the folder's pipeline.json\n"
        "  --precision SPEC / --keep-fp32 REGEX: as for mminfer run (PP-OCR's inputs count as 'other')\n"
        "  --fp32-models LIST: models (det, cls, rec) that stay FP32 under --precision (default rec,\n"
        "    whose near-tie characters INT8 moves; '' quantizes all)\n"
        "  --cascade T: read every line with an INT8 recognizer first and again with the full one when\n"
        "    its mean confidence is below T (0 to 1; --json adds \"escalated\", the lines read twice)\n",
        args.usage_stream());
    if (args.has("--help")) std::fputs(kPrecisionUsage, args.usage_stream());
    return args.has("--help") ? 0 : 2;
  }
  SessionOptions session;
  session.threads = threads_flag(args);
  session.precision = precision_flags(args);
  if (args.has("--pipeline") && args.has("--models")) throw Error("give --pipeline or --models (the same thing), not both");
  std::string dir = args.get("--pipeline", args.get("--models", "models/ppocr"));
  pipelines::Manifest manifest = ocr::ocr_manifest(dir);
  ocr::OcrOptions options = ocr::ocr_options(manifest);
  options.det_max_side = args.get_int("--max-side", options.det_max_side);
  if (options.det_max_side < 32) throw Error("--max-side must be at least 32");
  if (args.has("--no-cls")) options.use_classifier = false;
  if (args.has("--fp32-models")) {
    options.fp32_models = args.get("--fp32-models");
    try {
      ocr::parse_model_roles(options.fp32_models);
    } catch (const Error& e) {
      throw Error(std::string("--fp32-models: ") + e.what());
    }
  }
  if (args.has("--unclip")) {
    try {
      options.db.unclip_ratio = std::stof(args.get("--unclip"));
    } catch (const std::logic_error&) {
      throw Error("--unclip expects a number, got '" + args.get("--unclip") + "'");
    }
    if (!(options.db.unclip_ratio > 0 && options.db.unclip_ratio < 10)) throw Error("--unclip must be between 0 and 10");
  }
  if (args.has("--cascade")) {
    options.cascade_threshold = static_cast<float>(args.get_double("--cascade", 0));
    if (!(options.cascade_threshold > 0 && options.cascade_threshold <= 1))
      throw Error("--cascade takes the confidence below which a line is read again, in (0, 1]");
  }
  ocr::OcrPipeline pipeline(manifest, session, options);
  JsonResults json(json_flag(args));
  int failures = 0;
  for (const std::string& file : args.positional()) {
    auto t0 = std::chrono::steady_clock::now();
    const size_t escalated_before = pipeline.cascade_counts().escalated;
    std::vector<ocr::OcrLine> lines;
    try {
      std::vector<uint8_t> bytes = read_bytes(file);
      lines = pipeline.run(image::decode_image(bytes));
    } catch (const Error& e) {
      ++failures;
      json.add_error("ocr", file, e.what());
      continue;
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (json.on()) {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (const ocr::OcrLine& l : lines) list.push_back(line_json(l));
      nlohmann::ordered_json result = {{"file", file}, {"lines", list}, {"ms", rounded(ms, 100)}};
      if (options.cascade_threshold > 0) result["escalated"] = pipeline.cascade_counts().escalated - escalated_before;
      json.add(result);
    } else {
      if (args.positional().size() > 1) std::printf("== %s\n", file.c_str());  // the time is in --json
      for (const ocr::OcrLine& l : lines) std::printf("%s\n", l.text.c_str());
    }
    std::fflush(stdout);
  }
  json.finish();
  return failures ? 1 : 0;
}

}  // namespace mminfer::cli
