// mminfer tune: searches an OCR pipeline's cheaper settings (detector input side, INT8 detector
// and classifier, the recognizer cascade, the direction classifier) on a labelled evaluation set,
// scores each by R = alpha·A − beta·C − gamma·D (A: 1 − CER, C: median time per image over the
// starting point's, D: the p90 − median spread over the starting point's median) under a floor on
// CER, and writes the chosen setting as a pipeline folder.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/input_files.h"
#include "cli/json_output.h"
#include "cli/percentile.h"
#include "cli/progress.h"
#include "core/elapsed.h"
#include "modal/image/image.h"
#include "pipelines/ocr/ocr_pipeline.h"
#include "pipelines/ocr/text_accuracy.h"

namespace mminfer::cli {

namespace {

namespace fs = std::filesystem;

struct Sample {
  std::string file;
  image::Image image;
  std::string truth;  // the lines joined by spaces
};

// make_ocr_eval.py's layout: ground_truth.json {"images": [{"file", "lines": [...]}, ...]}.
std::vector<Sample> read_eval_set(const std::string& dir, size_t limit) {
  const fs::path gt = fs::path(dir) / "ground_truth.json";
  std::ifstream f(gt);
  if (!f) throw Error("no " + gt.string() + " (an evaluation set: {\"images\": [{\"file\", \"lines\"}]})");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception&) {
    throw Error(gt.string() + " is not valid JSON");
  }
  if (!doc.contains("images") || !doc["images"].is_array()) throw Error(gt.string() + ": no \"images\" list");
  // At most `limit` images, spread over the list (sets are often grouped by kind).
  const auto& images = doc["images"];
  const size_t total = images.size(), take = std::min(limit, total);
  std::vector<Sample> out;
  for (size_t k = 0; k < take; ++k) {
    const auto& item = images[k * total / take];
    if (!item.contains("file") || !item["file"].is_string() || !item.contains("lines") || !item["lines"].is_array())
      throw Error(gt.string() + ": each image needs \"file\" and a \"lines\" list");
    Sample s;
    s.file = (fs::path(dir) / item["file"].get<std::string>()).string();
    for (const auto& line : item["lines"]) {
      if (!line.is_string()) throw Error(gt.string() + ": lines of " + s.file + " must be strings");
      s.truth += (s.truth.empty() ? "" : " ") + line.get<std::string>();
    }
    s.image = image::decode_image(read_input_file(s.file));
    out.push_back(std::move(s));
  }
  if (out.empty()) throw Error(gt.string() + " lists no images");
  return out;
}

struct Setting {
  int det_max_side = 960;
  bool int8 = false;      // detector and classifier in INT8 (the recognizer stays FP32)
  double cascade = 0;     // the recognizer cascade's threshold, 0: none
  bool use_cls = true;
  std::string name() const {
    char buf[96];
    std::snprintf(buf, sizeof buf, "side %d, %s, cascade %s, cls %s", det_max_side, int8 ? "int8" : "fp32",
                  cascade > 0 ? std::to_string(cascade).substr(0, 4).c_str() : "off", use_cls ? "on" : "off");
    return buf;
  }
  bool operator<(const Setting& o) const {
    return std::tie(det_max_side, int8, cascade, use_cls) < std::tie(o.det_max_side, o.int8, o.cascade, o.use_cls);
  }
};

struct Measured {
  double cer = 0;  // percent
  double median_ms = 0, p90_ms = 0;
  double reward = 0;
  bool allowed = true;  // within the CER floor
};

ocr::OcrOptions options_of(const Setting& s, ocr::OcrOptions base) {
  base.det_max_side = s.det_max_side;
  base.use_classifier = s.use_cls;
  base.cascade_threshold = static_cast<float>(s.cascade);
  base.precision = s.int8 ? "int8" : "";
  base.fp32_models = "rec";
  return base;
}

Measured measure(const pipelines::Manifest& manifest, const ocr::OcrOptions& base, const Setting& s,
                 const std::vector<Sample>& eval, int threads, const std::function<void()>& step) {
  SessionOptions session;
  session.threads = threads;
  ocr::OcrPipeline pipeline(manifest, session, options_of(s, base));
  // Two passes: the first reads and scores (and plans each new input shape), the second is timed,
  // as a server that has seen those shapes would run.
  size_t errors = 0, chars = 0;
  for (const Sample& sample : eval) {
    std::string text;
    for (const auto& l : pipeline.run(sample.image)) text += (text.empty() ? "" : " ") + l.text;
    ocr::CharErrors e = ocr::char_errors(text, sample.truth);
    errors += e.errors, chars += e.chars;
    step();
  }
  std::vector<double> ms;
  for (const Sample& sample : eval) {
    auto t0 = std::chrono::steady_clock::now();
    pipeline.run(sample.image);
    ms.push_back(ms_since(t0));
    step();
  }
  Measured m;
  m.cer = chars ? 100.0 * static_cast<double>(errors) / static_cast<double>(chars) : 0;
  m.median_ms = percentile(ms, 0.5);
  m.p90_ms = percentile(ms, 0.9);
  return m;
}

void copy_folder_files(const pipelines::Manifest& m, const fs::path& out) {
  fs::create_directories(out);
  for (const auto& [role, path] : m.files) {
    fs::path rel = fs::relative(path, m.dir);
    fs::create_directories((out / rel).parent_path());
    fs::copy_file(path, out / rel, fs::copy_options::overwrite_existing);
  }
}

}  // namespace

int cmd_tune(int argc, char** argv) {
  // A model file first instead of --pipeline: its own search.
  if (argc > 2 && argv[2][0] != '-') return cmd_tune_model(argc, argv);
  Args args(argc, argv, 2,
            {"--pipeline", "--eval", "-o", "--output", "--alpha", "--beta", "--gamma", "--max-cer-increase", "--limit",
             "--threads", "--report"},
            {"--help", "--json", "--progress", "--no-progress", "--quiet"});
  if (args.has("--help") || !args.positional().empty() || !args.has("--pipeline") || !args.has("--eval") ||
      !(args.has("-o") || args.has("--output"))) {
    std::fputs(
        "usage: mminfer tune --pipeline DIR --eval DIR -o|--output OUT_DIR [--alpha A] [--beta B] [--gamma G]\n"
        "                    [--max-cer-increase P] [--limit N] [--threads N] [--report FILE.json] [--json]\n"
        "  Searches an OCR pipeline's cheaper settings on a labelled set (--eval: ground_truth.json with\n"
        "  {\"images\": [{\"file\", \"lines\"}]}, as tools/make_ocr_eval.py writes; --limit N images): the\n"
        "  detector's input side (960, 800, 640, 480), INT8 detector and classifier, the recognizer\n"
        "  cascade (0.8, 0.9, 0.95: INT8 first, FP32 for unsure lines) and the direction classifier. Each\n"
        "  setting reads the whole set, then reads it again timed; its score is R = alpha*A - beta*C - gamma*D with A = 1 - CER, C the\n"
        "  median ms per image over the folder's own setting's, D the p90 - median spread over that same\n"
        "  median (defaults 10, 1, 0.5: one point of CER weighs as 10% of the time). Settings whose CER\n"
        "  exceeds the folder's by more than --max-cer-increase points (default 0.5) are not chosen. One\n"
        "  knob moves at a time, to the best R, until none helps. OUT_DIR receives the folder's files and a\n"
        "  pipeline.json with the chosen setting; a table of every setting tried is printed.\n"
        "  mminfer tune MODEL.onnx --calib DIR --eval DIR -o OUT.onnx: one model's variants instead (--help)\n",
        args.usage_stream());
    if (args.has("--help")) std::fputs(kProgressUsage, args.usage_stream());
    return args.has("--help") ? 0 : 2;
  }
  const double alpha = args.get_double("--alpha", 10), beta = args.get_double("--beta", 1),
               gamma = args.get_double("--gamma", 0.5), floor = args.get_double("--max-cer-increase", 0.5);
  if (alpha < 0 || beta < 0 || gamma < 0) throw Error("--alpha, --beta and --gamma must be 0 or more");
  if (floor < 0) throw Error("--max-cer-increase must be 0 or more (CER points)");
  const int limit = args.get_int("--limit", 1000000);
  if (limit < 1) throw Error("--limit must be at least 1");
  const int threads = threads_flag(args);
  const std::string out = args.get("-o", args.get("--output"));
  pipelines::Manifest manifest = ocr::ocr_manifest(args.get("--pipeline"));
  const ocr::OcrOptions base = ocr::ocr_options(manifest);
  std::vector<Sample> eval = read_eval_set(args.get("--eval"), static_cast<size_t>(limit));

  Progress progress("tuning", 2 * eval.size(), progress_flag(args));
  std::map<Setting, Measured> tried;
  std::vector<Setting> order;  // as tried
  // The folder as it is (a folder tuned before starts from its choice).
  Setting start{base.det_max_side, base.precision == "int8", std::round(base.cascade_threshold * 1000.0) / 1000.0,
                base.use_classifier};
  double base_median = 0, base_cer = 0;
  auto score = [&](const Setting& s) -> const Measured& {
    auto it = tried.find(s);
    if (it != tried.end()) return it->second;
    progress.restart("tuning: " + s.name(), 2 * eval.size());
    Measured m = measure(manifest, base, s, eval, threads, [&] { progress.step(); });
    if (order.empty()) base_median = m.median_ms, base_cer = m.cer;
    m.allowed = m.cer <= base_cer + floor + 1e-9;
    m.reward = alpha * (1 - m.cer / 100) - beta * m.median_ms / base_median - gamma * (m.p90_ms - m.median_ms) / base_median;
    order.push_back(s);
    return tried.emplace(s, m).first->second;
  };
  score(start);
  Setting current = start;
  for (int round = 0; round < 6; ++round) {
    std::vector<Setting> moves;
    for (int side : {960, 800, 640, 480})
      if (side != current.det_max_side && side <= std::max(960, base.det_max_side)) moves.push_back(current), moves.back().det_max_side = side;
    moves.push_back(current), moves.back().int8 = !current.int8;
    for (double c : {0.0, 0.8, 0.9, 0.95})
      if (c != current.cascade) moves.push_back(current), moves.back().cascade = c;
    moves.push_back(current), moves.back().use_cls = !current.use_cls;
    Setting best = current;
    for (const Setting& m : moves) {
      const Measured& r = score(m);
      if (r.allowed && r.reward > tried.at(best).reward) best = m;
    }
    if (!(current < best) && !(best < current)) break;
    current = best;
  }
  progress.finish();

  // The chosen folder.
  copy_folder_files(manifest, out);
  nlohmann::json doc = manifest.raw;
  doc["preprocess"]["det_max_side"] = current.det_max_side;
  doc["preprocess"]["use_cls"] = current.use_cls;
  doc["preprocess"]["cascade_threshold"] = current.cascade;
  doc["preprocess"]["precision"] = current.int8 ? "int8" : "fp32";
  doc["preprocess"]["fp32_models"] = "rec";
  {
    std::ofstream f(fs::path(out) / pipelines::kManifestName);
    if (!f) throw Error("cannot write " + (fs::path(out) / pipelines::kManifestName).string());
    f << doc.dump(1) << "\n";
  }
  const Measured& before = tried.at(start);
  const Measured& after = tried.at(current);
  nlohmann::ordered_json report = {{"output", out},
                                   {"images", eval.size()},
                                   {"alpha", alpha},
                                   {"beta", beta},
                                   {"gamma", gamma},
                                   {"max_cer_increase", floor},
                                   {"chosen", current.name()},
                                   {"before", {{"cer", before.cer}, {"median_ms", before.median_ms}, {"p90_ms", before.p90_ms}, {"reward", before.reward}}},
                                   {"after", {{"cer", after.cer}, {"median_ms", after.median_ms}, {"p90_ms", after.p90_ms}, {"reward", after.reward}}},
                                   {"speedup", before.median_ms / after.median_ms},
                                   {"tried", nlohmann::ordered_json::array()}};
  for (const Setting& s : order) {
    const Measured& m = tried.at(s);
    report["tried"].push_back({{"setting", s.name()}, {"det_max_side", s.det_max_side}, {"int8", s.int8},
                               {"cascade", s.cascade}, {"use_cls", s.use_cls}, {"cer", m.cer}, {"median_ms", m.median_ms},
                               {"p90_ms", m.p90_ms}, {"reward", m.reward}, {"allowed", m.allowed}});
  }
  if (args.has("--report")) write_json_file(args.get("--report"), report);
  if (args.has("--json")) {
    std::printf("%s\n", json_text(report).c_str());
    return 0;
  }
  std::printf("| setting | CER %% | median ms | p90 ms | R | within the floor |\n|---|---|---|---|---|---|\n");
  for (const Setting& s : order) {
    const Measured& m = tried.at(s);
    std::printf("| %s%s | %.2f | %.1f | %.1f | %.4f | %s |\n", s.name().c_str(), (!(s < current) && !(current < s)) ? " (chosen)" : "",
                m.cer, m.median_ms, m.p90_ms, m.reward, m.allowed ? "yes" : "no");
  }
  std::printf("\n%s: %s\n  before: CER %.2f%%, median %.1f ms; after: CER %.2f%%, median %.1f ms (%.2fx faster)\n",
              out.c_str(), current.name().c_str(), before.cer, before.median_ms, after.cer, after.median_ms,
              before.median_ms / after.median_ms);
  return 0;
}

}  // namespace mminfer::cli
