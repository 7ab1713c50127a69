#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/json_output.h"
#include "cli/percentile.h"
#include "cli/progress.h"
#include "cli/tensor_inputs.h"
#include "core/npy.h"
#include "core/parallel.h"
#include "core/weight_memory.h"
#include "mminfer/session.h"

namespace mminfer::cli {

namespace {

double peak_rss_mb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

double rounded(double x, double scale) { return std::round(x * scale) / scale; }

// One session of the model (one --merge-tokens value) and its timings.
struct Variant {
  int merge_tokens = 0;
  std::unique_ptr<Session> session;
  std::vector<double> ms;   // the timed runs
  std::vector<OpTime> ops;  // with --op-times
};

void run_once(Variant& v, const std::vector<NamedTensor>& inputs) {
  std::vector<Tensor> outputs;
  Status st = v.session->run(inputs, &outputs);
  if (!st) throw Error(st.message());
}

// Warm-up, then `runs` rounds in which each session runs once: sessions compared this way meet
// the same load from the rest of the machine. The order turns around every round, so no session
// always runs right after the same one.
void time_in_turn(std::vector<Variant>& variants, const std::vector<NamedTensor>& inputs, int warmup, int runs,
                  ProgressMode mode) {
  const size_t n = variants.size();
  Progress progress("warm-up", static_cast<size_t>(warmup) * n, mode);
  for (int i = 0; i < warmup; ++i)
    for (Variant& v : variants) run_once(v, inputs), progress.step();
  progress.restart("timed runs", static_cast<size_t>(runs) * n);
  for (Variant& v : variants) v.session->op_times(true);  // warm-up (planning, packing) stays out
  for (int i = 0; i < runs; ++i)
    for (size_t k = 0; k < n; ++k) {
      Variant& v = variants[i % 2 ? n - 1 - k : k];
      auto t0 = std::chrono::steady_clock::now();
      run_once(v, inputs);
      v.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      progress.step();
    }
  progress.finish();
  for (Variant& v : variants) v.ops = v.session->op_times();
}

// What the output says of one session: its timed runs' spread and, past the first session, its
// median against the first's and the median of each round's ratio of the two.
struct Figures {
  double median, p90, min;
  double vs_first = 0, vs_first_per_round = 0;  // 0 for the first session
};

Figures figures_of(const Variant& v, const Variant& first) {
  Figures f{percentile(v.ms, 0.5), percentile(v.ms, 0.9), *std::min_element(v.ms.begin(), v.ms.end())};
  if (&v == &first) return f;
  std::vector<double> ratios;
  for (size_t i = 0; i < v.ms.size(); ++i) ratios.push_back(v.ms[i] / first.ms[i]);
  f.vs_first = f.median / percentile(first.ms, 0.5);
  f.vs_first_per_round = percentile(ratios, 0.5);
  return f;
}

// `listed`: one of several sessions, named by its --merge-tokens value.
nlohmann::ordered_json variant_json(const Variant& v, const Figures& f, int runs, bool listed) {
  nlohmann::ordered_json op_ms = nlohmann::ordered_json::object();
  for (const OpTime& o : v.ops) op_ms[o.op_type] = rounded(o.total_ms / runs, 1e4);
  nlohmann::ordered_json j;
  if (listed) j["merge_tokens"] = v.merge_tokens;
  j.update({{"median_ms", rounded(f.median, 1e4)}, {"p90_ms", rounded(f.p90, 1e4)}, {"min_ms", rounded(f.min, 1e4)}});
  if (f.vs_first > 0)
    j.update({{"vs_first", rounded(f.vs_first, 1e4)}, {"vs_first_per_round", rounded(f.vs_first_per_round, 1e4)}});
  j["op_ms"] = op_ms;
  return j;
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  for (int i = 2; i < argc; ++i)
    if (std::string(argv[i]) == "--pipeline" || std::string(argv[i]).rfind("--pipeline=", 0) == 0)
      return cmd_bench_generate(argc, argv);
  Args args(argc, argv, 2,
            with_precision_flags(
                {"--input", "--shape", "--runs", "--warmup", "--threads", "--int-range", "--opt-level", "--profile", "--inter-op",
                 "--outputs", "--merge-tokens"}),
            {"--help", "--json", "--op-times", "--progress", "--no-progress", "--quiet"});
  if (args.has("--help") || args.positional().size() != 1) {
    std::fputs(
        "usage: mminfer bench MODEL.onnx [--input NAME=F.npy | --shape NAME=1x3x224x224]... [--runs N]\n"
        "                    [--warmup N] [--threads N] [--int-range NAME=LO:HI] [--opt-level L] [--json]\n"
        "                    [--op-times] [--profile TRACE.json] [--inter-op auto|off|on]\n"
        "                    [--precision SPEC] [--keep-fp32 REGEX] [--outputs NAME,...] [--merge-tokens R[,R...]]\n"
        "                    [--progress | --no-progress]\n"
        "--json: only one JSON object on stdout (median_ms, p90_ms, min_ms, runs, threads, peak_rss_mb,\n"
        "  weight_bytes, op_ms; with several --merge-tokens values, a list \"variants\" of merge_tokens,\n"
        "  median_ms, p90_ms, min_ms and op_ms, past the first with vs_first and vs_first_per_round),\n"
        "  nothing else\n"
        "--op-times: time per op type over the timed runs (each node timed, so totals run a little slower)\n"
        "--outputs: compute only these outputs, and none of the work only the others need\n"
        "--merge-tokens R: ViT-style encoders merge R tokens after each block's attention (fewer for later layers);\n"
        "  R,R,...: one session per value, timed in turn run by run (the order turned each round), each\n"
        "  median against the first's\n"
        "mminfer bench --pipeline DIR times a generative folder's prefill and decode (see --pipeline DIR --help)\n",
        args.usage_stream());
    if (args.has("--help")) std::fputs(kPrecisionUsage, args.usage_stream()), std::fputs(kProgressUsage, args.usage_stream());
    return args.has("--help") ? 0 : 2;
  }
  SessionOptions opts;
  opts.threads = threads_flag(args);
  opts.opt_level = args.get_int("--opt-level", 2);
  opts.inter_op = inter_op_flag(args);
  opts.profile_path = args.get("--profile");
  opts.profile = args.has("--op-times");
  opts.precision = precision_flags(args);
  opts.outputs = outputs_flag(args);
  const std::vector<int> merges = merge_tokens_list(args);
  if (merges.size() > 1 && !opts.profile_path.empty())
    throw Error("--profile writes one session's trace: give --merge-tokens one value with it");
  int runs = args.get_int("--runs", 20), warmup = args.get_int("--warmup", 3);
  if (runs < 1 || warmup < 0) throw Error("--runs must be at least 1 and --warmup at least 0");
  ProgressMode progress_mode = progress_flag(args);
  std::vector<Variant> variants(merges.size());
  for (size_t v = 0; v < merges.size(); ++v) {
    variants[v].merge_tokens = opts.merge_tokens = merges[v];
    Status st = Session::load(args.positional()[0], opts, &variants[v].session);
    if (!st) throw Error(st.message());
  }
  std::vector<NamedTensor> inputs = model_inputs(args, *variants[0].session);
  time_in_turn(variants, inputs, warmup, runs, progress_mode);
  std::vector<Figures> figures;
  for (const Variant& v : variants) figures.push_back(figures_of(v, variants[0]));
  if (args.has("--json")) {  // the document alone, so that `| jq` or json.loads reads stdout whole
    nlohmann::ordered_json doc = {{"model", args.positional()[0]}};
    if (variants.size() == 1) {
      doc.update(variant_json(variants[0], figures[0], runs, false));
    } else {
      nlohmann::ordered_json each = nlohmann::ordered_json::array();
      for (size_t i = 0; i < variants.size(); ++i) each.push_back(variant_json(variants[i], figures[i], runs, true));
      doc["variants"] = each;
    }
    doc.update({{"runs", runs}, {"warmup", warmup}, {"threads", num_threads()},
                {"peak_rss_mb", rounded(peak_rss_mb(), 1e1)},
                {"weight_bytes", weight_memory_in_use()}});
    std::printf("%s\n", json_text(doc).c_str());
    return 0;
  }
  std::printf("model: %s\nthreads: %d, runs: %d, warmup: %d\n", args.positional()[0].c_str(), num_threads(), runs, warmup);
  if (variants.size() > 1)
    std::printf("sessions timed in turn, run by run: --merge-tokens %s\n", args.get("--merge-tokens").c_str());
  double weight_mb = static_cast<double>(weight_memory_in_use()) / (1 << 20);
  for (size_t i = 0; i < variants.size(); ++i) {
    const Figures& f = figures[i];
    if (variants.size() > 1) std::printf("--merge-tokens %d: ", variants[i].merge_tokens);
    std::printf("median %.3f ms, p90 %.3f ms, min %.3f ms", f.median, f.p90, f.min);
    if (i > 0)
      std::printf("; %.3f of --merge-tokens %d (median of the rounds' ratios %.3f)", f.vs_first,
                  variants[0].merge_tokens, f.vs_first_per_round);
    std::printf("\n");
  }
  std::printf("peak RSS %.1f MiB, packed weights %.1f MiB\n", peak_rss_mb(), weight_mb);
  for (const Variant& v : variants) {
    double op_total = 0;
    for (const OpTime& o : v.ops) op_total += o.total_ms;
    if (v.ops.empty()) continue;
    if (variants.size() > 1) std::printf("--merge-tokens %d:\n", v.merge_tokens);
    std::printf("%-28s %10s %7s %9s\n", "op type", "ms/run", "share", "calls/run");
    for (const OpTime& o : v.ops)
      std::printf("%-28s %10.3f %6.1f%% %9.1f\n", o.op_type.c_str(), o.total_ms / runs,
                  100.0 * o.total_ms / std::max(op_total, 1e-9), static_cast<double>(o.calls) / runs);
  }
  return 0;
}

}  // namespace mminfer::cli
