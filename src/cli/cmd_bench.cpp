#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

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
        "                    [--precision SPEC] [--keep-fp32 REGEX] [--outputs NAME,...] [--merge-tokens R]\n"
        "                    [--progress | --no-progress]\n"
        "--json: only one JSON object on stdout (median_ms, p90_ms, min_ms, runs, threads, peak_rss_mb,\n"
        "  weight_bytes, op_ms), nothing else\n"
        "--op-times: time per op type over the timed runs (each node timed, so totals run a little slower)\n"
        "--outputs: compute only these outputs, and none of the work only the others need\n"
        "--merge-tokens R: ViT-style encoders merge R tokens after each block's attention (fewer for later layers)\n"
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
  opts.merge_tokens = merge_tokens_flag(args);
  opts.outputs = outputs_flag(args);
  int runs = args.get_int("--runs", 20), warmup = args.get_int("--warmup", 3);
  if (runs < 1 || warmup < 0) throw Error("--runs must be at least 1 and --warmup at least 0");
  ProgressMode progress_mode = progress_flag(args);
  std::unique_ptr<Session> session;
  Status st = Session::load(args.positional()[0], opts, &session);
  if (!st) throw Error(st.message());

  std::vector<NamedTensor> inputs = model_inputs(args, *session);
  std::vector<Tensor> outputs;
  Progress progress("warm-up", static_cast<size_t>(warmup), progress_mode);
  for (int i = 0; i < warmup; ++i) {
    st = session->run(inputs, &outputs);
    if (!st) throw Error(st.message());
    progress.step();
  }
  progress.restart("timed runs", static_cast<size_t>(runs));
  session->op_times(true);  // warm-up runs (planning, weight packing) stay out of the breakdown
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    st = session->run(inputs, &outputs);
    auto t1 = std::chrono::steady_clock::now();
    if (!st) throw Error(st.message());
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    progress.step();
  }
  progress.finish();
  double median = percentile(ms, 0.5), p90 = percentile(ms, 0.9), mn = *std::min_element(ms.begin(), ms.end());
  std::vector<OpTime> ops = session->op_times();
  if (args.has("--json")) {  // the document alone, so that `| jq` or json.loads reads stdout whole
    nlohmann::ordered_json op_ms = nlohmann::ordered_json::object();
    for (const OpTime& o : ops) op_ms[o.op_type] = std::round(o.total_ms / runs * 1e4) / 1e4;
    auto r = [](double x, double scale) { return std::round(x * scale) / scale; };
    nlohmann::ordered_json doc = {{"model", args.positional()[0]}, {"median_ms", r(median, 1e4)}, {"p90_ms", r(p90, 1e4)},
                                  {"min_ms", r(mn, 1e4)}, {"runs", runs}, {"warmup", warmup}, {"threads", num_threads()},
                                  {"peak_rss_mb", r(peak_rss_mb(), 10)}, {"weight_bytes", weight_memory_in_use()},
                                  {"op_ms", op_ms}};
    std::printf("%s\n", json_text(doc).c_str());
    return 0;
  }
  std::printf("model: %s\nthreads: %d, runs: %d, warmup: %d\n", args.positional()[0].c_str(), num_threads(), runs, warmup);
  double weight_mb = static_cast<double>(weight_memory_in_use()) / (1 << 20);
  std::printf("median %.3f ms, p90 %.3f ms, min %.3f ms, peak RSS %.1f MiB, packed weights %.1f MiB\n", median, p90, mn,
              peak_rss_mb(), weight_mb);
  double op_total = 0;
  for (const OpTime& o : ops) op_total += o.total_ms;
  if (!ops.empty()) std::printf("%-28s %10s %7s %9s\n", "op type", "ms/run", "share", "calls/run");
  for (const OpTime& o : ops)
    std::printf("%-28s %10.3f %6.1f%% %9.1f\n", o.op_type.c_str(), o.total_ms / runs, 100.0 * o.total_ms / std::max(op_total, 1e-9),
                static_cast<double>(o.calls) / runs);
  return 0;
}

}  // namespace mminfer::cli
