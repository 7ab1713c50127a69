// mminfer tune MODEL.onnx: searches one model's cheaper variants (precision, pruned heads and MLP
// channels, low-rank projections, tokens merged per block) on held-out inputs, scores each by
// R = alpha·A − beta·C − gamma·D (A: the mean cosine of its outputs to the original's, C: its
// median latency over the original's, D: its p90 − median spread over the original's median)
// under a floor on the lowest cosine, and writes the chosen variant as standard ONNX.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "core/ascii.h"
#include "cli/args.h"
#include "cli/calibration.h"
#include "cli/commands.h"
#include "cli/json_output.h"
#include "cli/percentile.h"
#include "cli/progress.h"
#include "core/cosine.h"
#include "core/elapsed.h"
#include "core/one_line.h"

namespace mminfer::cli {

namespace {

namespace fs = std::filesystem;

struct Variant {
  bool int8 = false;
  double prune = 0;     // share of heads and MLP channels removed
  double low_rank = 0;  // output error bound of the factored projections, 0: none
  int merge = 0;        // tokens merged per block
  std::string name() const {
    std::ostringstream s;
    s << (int8 ? "int8" : "fp32") << ", pruned " << prune << ", low rank " << (low_rank > 0 ? std::to_string(low_rank).substr(0, 5) : "off")
      << ", merge " << merge;
    return s.str();
  }
  auto key() const { return std::tie(int8, prune, low_rank, merge); }
  bool operator<(const Variant& o) const { return key() < o.key(); }
  bool operator==(const Variant& o) const { return key() == o.key(); }
};

struct Measured {
  double mean_cosine = 1, min_cosine = 1;
  double median_ms = 0, p90_ms = 0;
  double reward = 0;
  bool allowed = true;
  std::string error;  // a variant that could not be made or run
};

std::vector<double> number_list(const Args& args, const std::string& flag, std::vector<double> fallback, double lo, double hi) {
  if (!args.has(flag)) return fallback;
  std::vector<double> out;
  for (std::string item : split_list(args.get(flag))) {
    if (item == "off") item = "0";
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end || !(v >= lo && v <= hi))
      throw Error(flag + " takes a comma-separated list of numbers from " + std::to_string(lo).substr(0, 4) + " to " +
                  std::to_string(hi).substr(0, 4) + ", got '" + item + "'");
    out.push_back(v);
  }
  if (out.empty()) throw Error(flag + ": an empty list");
  if (std::find(out.begin(), out.end(), 0.0) == out.end()) out.insert(out.begin(), 0.0);  // the original is always a choice
  return out;
}

// This binary run as a child (prune, optimize), its output kept for the error message.
void run_self(const std::vector<std::string>& argv, const std::string& what) {
  std::string cmd;
  for (const std::string& a : argv) {
    std::string q = "'";
    for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    cmd += (cmd.empty() ? "" : " ") + q + "'";
  }
  cmd += " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw Error(what + ": cannot start " + argv[0]);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  if (status != 0) {
    size_t at = out.rfind("error: ");
    throw Error(what + " failed: " + one_line(at == std::string::npos ? out.substr(0, 300) : out.substr(at + 7, 300)));
  }
}

}  // namespace

int cmd_tune_model(int argc, char** argv) {
  Args args(argc, argv, 2,
            {"-o", "--output", "--calib", "--eval", "--alpha", "--beta", "--gamma", "--min-cosine", "--outputs", "--threads",
             "--runs", "--prune", "--low-rank", "--merge", "--precision", "--calib-limit", "--eval-limit", "--report", "--work"},
            {"--help", "--json", "--progress", "--no-progress", "--quiet"});
  if (args.has("--help") || args.positional().size() != 1 || !args.has("--calib") || !args.has("--eval") ||
      !(args.has("-o") || args.has("--output"))) {
    std::fputs(
        "usage: mminfer tune MODEL.onnx --calib DIR --eval DIR -o|--output OUT.onnx [--alpha A] [--beta B] [--gamma G]\n"
        "                    [--min-cosine X] [--precision fp32,int8] [--prune 0,0.25,0.5] [--low-rank off,0.01]\n"
        "                    [--merge 0,2,4] [--outputs NAME,...] [--runs N] [--threads N] [--report FILE.json] [--json]\n"
        "  Searches MODEL's cheaper variants: INT8 MatMuls (--precision), attention heads and MLP channels\n"
        "  pruned by a share (--prune, as mminfer prune --heads S --mlp S), projections factored within an\n"
        "  output error (--low-rank) and tokens merged per block (--merge, ViT-style towers). --calib DIR\n"
        "  feeds pruning and low rank (.npy files or folders of INPUT.npy); --eval DIR (the same kinds, other\n"
        "  inputs) judges: each variant's outputs (--outputs, default all) against the original's, A = their\n"
        "  mean cosine; C = its median ms per input (each input --runs times, default 5) over the\n"
        "  original's; D = its p90 - median spread over the original's median. R = alpha*A - beta*C -\n"
        "  gamma*D (defaults 100, 1, 0.5: a cosine 0.01 lower weighs as 1 of C); variants whose lowest\n"
        "  cosine is below --min-cosine (0.99) are not chosen. One knob moves at a time, to the best R,\n"
        "  until none helps. OUT receives the chosen variant as standard ONNX (INT8 in ONNX Runtime's\n"
        "  dynamic form); merged tokens are a load-time option (--merge-tokens R, the serve config's\n"
        "  merge_tokens), printed with the choice. Defaults: --precision fp32,int8 --prune 0,0.25\n"
        "  --low-rank off --merge 0,2. Intermediate files go to --work (OUT.tune/). --calib-limit N (64) and\n"
        "  --eval-limit N (16) bound the inputs read from each folder.\n",
        args.usage_stream());
    if (args.has("--help")) std::fputs(kProgressUsage, args.usage_stream());
    return args.has("--help") ? 0 : 2;
  }
  const std::string model = args.positional()[0];
  const std::string out = args.get("-o", args.get("--output"));
  const double alpha = args.get_double("--alpha", 100), beta = args.get_double("--beta", 1),
               gamma = args.get_double("--gamma", 0.5), floor = args.get_double("--min-cosine", 0.99);
  if (alpha < 0 || beta < 0 || gamma < 0) throw Error("--alpha, --beta and --gamma must be 0 or more");
  if (!(floor >= -1 && floor <= 1)) throw Error("--min-cosine is a cosine, from -1 to 1");
  const int runs = args.get_int("--runs", 5);
  if (runs < 1) throw Error("--runs must be at least 1");
  const int threads = threads_flag(args);
  std::vector<double> prunes = number_list(args, "--prune", {0, 0.25}, 0, 0.9);
  std::vector<double> ranks = number_list(args, "--low-rank", {0}, 0, 1);
  std::vector<double> merges = number_list(args, "--merge", {0, 2}, 0, 64);
  for (double r : merges)
    if (r != std::floor(r)) throw Error("--merge takes whole numbers of tokens, got " + std::to_string(r));
  const int eval_limit = args.get_int("--eval-limit", 16);
  if (eval_limit < 1) throw Error("--eval-limit must be at least 1");
  std::vector<bool> precisions;
  {
    for (const std::string& item : split_list(args.get("--precision", "fp32,int8"))) {
      if (item != "fp32" && item != "int8") throw Error("--precision takes fp32 and int8, comma-separated, got '" + item + "'");
      precisions.push_back(item == "int8");
    }
    if (std::find(precisions.begin(), precisions.end(), false) == precisions.end()) precisions.insert(precisions.begin(), false);
  }
  const fs::path work = args.get("--work", out + ".tune");
  fs::create_directories(work);
  const std::string self = fs::read_symlink("/proc/self/exe").string();

  // The original on the evaluation inputs: the outputs every variant is held to.
  SessionOptions base;
  base.threads = threads;
  base.outputs = outputs_flag(args);
  std::unique_ptr<Session> original;
  if (Status st = Session::load(model, base, &original); !st) throw Error(model + ": " + st.message());
  const std::vector<Sample> eval =
      calibration_samples(args.get("--eval"), *original, "", static_cast<size_t>(eval_limit));
  std::vector<std::vector<Tensor>> reference;
  for (const Sample& s : eval) {
    std::vector<Tensor> got;
    if (Status st = original->run(s, &got); !st) throw Error(model + " on the evaluation inputs: " + st.message());
    for (Tensor& t : got) t = t.clone();
    reference.push_back(std::move(got));
  }
  original.reset();

  // The file a variant's graph comes from: the original, or made once by prune.
  std::map<std::pair<double, double>, std::string> files;
  auto file_of = [&](const Variant& v) -> std::string {
    if (v.prune == 0 && v.low_rank == 0) return model;
    auto key = std::make_pair(v.prune, v.low_rank);
    if (auto it = files.find(key); it != files.end()) return it->second;
    char name[64];
    std::snprintf(name, sizeof name, "pruned-%.3f-rank-%.4f.onnx", v.prune, v.low_rank);
    const std::string path = (work / name).string();
    std::vector<std::string> cmd = {self, "prune", model, "-o", path, "--calib", args.get("--calib"), "--quiet"};
    if (args.has("--calib-limit")) cmd.insert(cmd.end(), {"--calib-limit", args.get("--calib-limit")});
    if (v.prune > 0) cmd.insert(cmd.end(), {"--heads", std::to_string(v.prune), "--mlp", std::to_string(v.prune)});
    if (v.low_rank > 0) cmd.insert(cmd.end(), {"--low-rank", std::to_string(v.low_rank)});
    if (threads > 0) cmd.insert(cmd.end(), {"--threads", std::to_string(threads)});
    run_self(cmd, "prune " + v.name());
    return files[key] = path;
  };

  Progress progress("tuning", eval.size() * (1 + static_cast<size_t>(runs)), progress_flag(args));
  std::map<Variant, Measured> tried;
  std::vector<Variant> order;
  double base_median = 0;
  auto measure = [&](const Variant& v) -> const Measured& {
    if (auto it = tried.find(v); it != tried.end()) return it->second;
    progress.restart("tuning: " + v.name(), eval.size() * (1 + static_cast<size_t>(runs)));
    Measured m;
    try {
      SessionOptions o = base;
      if (v.int8) {
        if (Status st = parse_precision("int8", &o.precision); !st) throw Error(st.message());
      }
      o.merge_tokens = v.merge;
      std::unique_ptr<Session> s;
      if (Status st = Session::load(file_of(v), o, &s); !st) throw Error(st.message());
      double sum = 0;
      size_t count = 0;
      m.min_cosine = 1;
      for (size_t i = 0; i < eval.size(); ++i) {
        std::vector<Tensor> got;
        if (Status st = s->run(eval[i], &got); !st) throw Error(st.message());
        if (got.size() != reference[i].size()) throw Error("gives " + std::to_string(got.size()) + " outputs");
        for (size_t k = 0; k < got.size(); ++k) {
          if (got[k].dtype() != DType::kFloat32 || got[k].shape() != reference[i][k].shape())
            throw Error("output " + std::to_string(k) + " is " + dtype_name(got[k].dtype()) + " " + shape_str(got[k].shape()) +
                        ", the original's " + shape_str(reference[i][k].shape()));
          const double c = cosine_similarity({got[k].data<float>(), static_cast<size_t>(got[k].numel())},
                                             {reference[i][k].data<float>(), static_cast<size_t>(reference[i][k].numel())});
          sum += c, ++count;
          m.min_cosine = std::min(m.min_cosine, c);
        }
        progress.step();
      }
      m.mean_cosine = count ? sum / static_cast<double>(count) : 1;
      std::vector<double> ms;
      for (int r = 0; r < runs; ++r)
        for (const Sample& sample : eval) {
          std::vector<Tensor> got;
          auto t0 = std::chrono::steady_clock::now();
          if (Status st = s->run(sample, &got); !st) throw Error(st.message());
          ms.push_back(ms_since(t0));
          progress.step();
        }
      m.median_ms = percentile(ms, 0.5);
      m.p90_ms = percentile(ms, 0.9);
    } catch (const Error& e) {
      m.error = e.what();
      m.allowed = false;
    }
    if (order.empty()) {
      if (!m.error.empty()) throw Error(model + ": " + m.error);
      base_median = m.median_ms;
    }
    if (m.error.empty()) {
      m.allowed = m.min_cosine >= floor - 1e-12;
      m.reward = alpha * m.mean_cosine - beta * m.median_ms / base_median - gamma * (m.p90_ms - m.median_ms) / base_median;
    }
    order.push_back(v);
    return tried.emplace(v, m).first->second;
  };

  const Variant start;
  measure(start);
  Variant current = start;
  for (int round = 0; round < 8; ++round) {
    std::vector<Variant> moves;
    for (bool p : precisions)
      if (p != current.int8) moves.push_back(current), moves.back().int8 = p;
    for (double s : prunes)
      if (s != current.prune) moves.push_back(current), moves.back().prune = s;
    for (double e : ranks)
      if (e != current.low_rank) moves.push_back(current), moves.back().low_rank = e;
    for (double r : merges)
      if (static_cast<int>(r) != current.merge) moves.push_back(current), moves.back().merge = static_cast<int>(r);
    Variant best = current;
    for (const Variant& v : moves) {
      const Measured& r = measure(v);
      if (r.allowed && r.reward > tried.at(best).reward) best = v;
    }
    if (best == current) break;
    current = best;
  }
  progress.finish();

  // The chosen graph, quantized in the file where INT8 was chosen.
  const std::string chosen_file = file_of(current);
  if (current.int8) {
    std::vector<std::string> cmd = {self, "optimize", chosen_file, "-o", out, "--precision", "int8", "--quiet"};
    if (threads > 0) cmd.insert(cmd.end(), {"--threads", std::to_string(threads)});
    run_self(cmd, "optimize " + current.name());
  } else {
    fs::copy_file(chosen_file, out, fs::copy_options::overwrite_existing);
  }

  const Measured& before = tried.at(start);
  const Measured& after = tried.at(current);
  auto figures = [](const Measured& m) {
    return nlohmann::ordered_json{{"mean_cosine", m.mean_cosine}, {"min_cosine", m.min_cosine}, {"median_ms", m.median_ms},
                                  {"p90_ms", m.p90_ms}, {"reward", m.reward}};
  };
  nlohmann::ordered_json report = {{"model", model},
                                   {"output", out},
                                   {"load_options", current.merge ? "--merge-tokens " + std::to_string(current.merge) : ""},
                                   {"eval_inputs", eval.size()},
                                   {"alpha", alpha},
                                   {"beta", beta},
                                   {"gamma", gamma},
                                   {"min_cosine", floor},
                                   {"chosen", {{"int8", current.int8}, {"prune", current.prune}, {"low_rank", current.low_rank},
                                               {"merge_tokens", current.merge}}},
                                   {"before", figures(before)},
                                   {"after", figures(after)},
                                   {"speedup", before.median_ms / after.median_ms},
                                   {"tried", nlohmann::ordered_json::array()}};
  for (const Variant& v : order) {
    const Measured& m = tried.at(v);
    nlohmann::ordered_json row = {{"variant", v.name()}, {"int8", v.int8}, {"prune", v.prune}, {"low_rank", v.low_rank},
                                  {"merge_tokens", v.merge}, {"allowed", m.allowed}};
    if (m.error.empty()) row.update(figures(m));
    else row["error"] = m.error;
    report["tried"].push_back(std::move(row));
  }
  if (args.has("--report")) write_json_file(args.get("--report"), report);
  if (args.has("--json")) {
    std::printf("%s\n", json_text(report).c_str());
    return 0;
  }
  std::printf("| variant | mean cosine | min cosine | median ms | p90 ms | R | within the floor |\n|---|---|---|---|---|---|---|\n");
  for (const Variant& v : order) {
    const Measured& m = tried.at(v);
    if (!m.error.empty()) {
      std::printf("| %s | failed: %s | | | | | no |\n", v.name().c_str(), m.error.c_str());
      continue;
    }
    std::printf("| %s%s | %.5f | %.5f | %.2f | %.2f | %.4f | %s |\n", v.name().c_str(), v == current ? " (chosen)" : "",
                m.mean_cosine, m.min_cosine, m.median_ms, m.p90_ms, m.reward, m.allowed ? "yes" : "no");
  }
  std::printf("\n%s: %s%s\n  before: median %.2f ms; after: median %.2f ms (%.2fx faster), mean cosine %.5f, lowest %.5f\n",
              out.c_str(), current.name().c_str(),
              current.merge ? (" (load it with --merge-tokens " + std::to_string(current.merge) + ")").c_str() : "",
              before.median_ms, after.median_ms, before.median_ms / after.median_ms, after.mean_cosine, after.min_cosine);
  return 0;
}

}  // namespace mminfer::cli
