// mminfer optimize: writes a model whose layers the precision policy picks in INT8 or FP16, as a
// standard ONNX file other runtimes load too: INT8 MatMuls in ONNX Runtime's dynamic form, or,
// with a calibration set (--calib), INT8 MatMuls and Convs in the static QDQ form with calibrated
// ranges; FP16 MatMul weights as FLOAT16 initializers behind a Cast. Guarded by the cosine of
// every output to FP32 on evaluation inputs.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli/args.h"
#include "cli/awq_calibration.h"
#include "cli/commands.h"
#include "cli/calibration.h"
#include "cli/json_output.h"
#include "cli/progress.h"
#include "cli/precision_guard.h"
#include "cli/tensor_inputs.h"
#include "onnx/dynamic_int8_writer.h"
#include "onnx/fp16_weights_writer.h"
#include "onnx/awq_scaling.h"
#include "onnx/loader.h"
#include "onnx/nbits_weights_writer.h"
#include "onnx/proto_edit.h"
#include "onnx/qdq_writer.h"
#include "passes/pass.h"

namespace mminfer::cli {

namespace {

// The candidates the policy puts in INT8 or FP16 (MatMuls; Convs only INT8), by first output
// name, in graph order, with that precision.
std::vector<std::pair<std::string, std::string>> policy_layers(const std::string& path, const PrecisionPolicy& policy,
                                                               const std::vector<std::string>& candidates) {
  auto loaded = onnx_io::load_model_file(path);
  passes::PassContext ctx;
  ctx.precision = policy;
  loaded.graph.relink();
  passes::assign_precision(loaded.graph, ctx);
  std::map<std::string, std::string> marked;
  for (const ir::Node& n : loaded.graph.nodes) {
    std::string p = n.attrs.get_string("precision", "");
    if (!n.removed && (n.op_type == "MatMul" || n.op_type == "Conv") && (p == "int8" || p == "fp16") && !n.outputs.empty())
      marked[loaded.graph.values[n.outputs[0]].name] = p;
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& c : candidates)
    if (marked.count(c)) out.emplace_back(c, marked[c]);
  return out;
}

// --quantize int4|int8w: MatMul weights in MatMulNBits form, written as they are (no policy).
int write_weight_only(const Args& args, int bits) {
  onnx_io::NBitsOptions opt;
  opt.bits = bits;
  opt.block_size = args.get_int("--block-size", 32);
  opt.symmetric = args.has("--symmetric");
  opt.accuracy_level = args.get_int("--accuracy-level", 4);
  if (opt.accuracy_level != 0 && opt.accuracy_level != 4)
    throw Error("--accuracy-level must be 0 (FP32 activations) or 4 (int8 activations), got " +
                std::to_string(opt.accuracy_level));
  for (const char* f : {"--precision", "--min-cosine", "--sensitivity", "--calib-method", "--calib-preprocess"})
    if (args.has(f)) throw Error(std::string(f) + " does not apply to --quantize int4|int8w (weight-only, every MatMul)");
  if (args.has("--calib") && args.has("--calib-prompts")) throw Error("give --calib-prompts FILE or --calib DIR (images), not both");
  if (args.has("--calib-pipeline") && !args.has("--calib-prompts") && !args.has("--calib"))
    throw Error("--calib-pipeline with --quantize int4|int8w needs --calib-prompts FILE or --calib DIR");
  const std::string in = args.positional()[0], out = args.get("-o", args.get("--output"));
  const std::string keep = args.get("--keep-fp32");
  onnx::ModelProto model = onnx_io::read_model_proto(in);
  std::string base_dir = std::filesystem::path(in).parent_path().string();
  if (base_dir.empty()) base_dir = ".";
  std::vector<onnx_io::AwqChoice> awq;
  if (args.has("--calib-prompts") || args.has("--calib")) {
    const size_t limit = calib_limit_flag(args);
    std::vector<std::string> inputs = args.has("--calib") ? image_files(args.get("--calib"), limit)
                                                          : read_prompts(args.get("--calib-prompts"), limit);
    auto stats = observe_activations(in, args.get("--calib-pipeline", base_dir), inputs,
                                     onnx_io::awq_activations(model, opt, keep), threads_flag(args));
    awq = onnx_io::apply_awq_scaling(model, stats, opt, base_dir, keep);
  }
  int count = onnx_io::write_nbits_weights(model, opt, base_dir, keep);
  onnx_io::inline_external_data(model, base_dir);  // what stayed float (embeddings) goes into OUT
  std::ofstream f(out, std::ios::binary);
  if (!f || !model.SerializeToOstream(&f)) throw Error("cannot write " + out);
  std::printf("%s: %d MatMuls as MatMulNBits (%d bits, block %lld, %s, accuracy_level %lld)\n", out.c_str(), count,
              bits, static_cast<long long>(opt.block_size), opt.symmetric ? "symmetric" : "zero points",
              static_cast<long long>(opt.accuracy_level));
  if (!awq.empty()) {
    double plain = 0, scaled = 0;
    int moved = 0;
    for (const auto& c : awq) plain += c.error_plain, scaled += c.error, moved += c.alpha > 0;
    std::printf("  activation-aware scales on %d of %zu activations; output error of the quantized MatMuls %.4g -> %.4g "
                "(mean squared, summed over activations)\n",
                moved, awq.size(), plain, scaled);
    if (!args.has("--quiet"))
      for (const auto& c : awq)
        std::fprintf(stderr, "  %s (%d MatMul%s): alpha %.1f, error %.4g -> %.4g%s%s\n", c.activation.c_str(), c.matmuls,
                     c.matmuls > 1 ? "s" : "", c.alpha, c.error_plain, c.error, c.folded_into.empty() ? "" : ", 1/s into ",
                     c.folded_into.c_str());
  }
  return 0;
}

}  // namespace

int cmd_optimize(int argc, char** argv) {
  Args args(argc, argv, 2,
            with_precision_flags({"-o", "--output", "--quantize", "--input", "--shape", "--int-range", "--min-cosine", "--report",
                                  "--threads", "--calib", "--calib-method", "--percentile", "--calib-preprocess",
                                  "--calib-limit", "--calib-pipeline", "--block-size", "--accuracy-level", "--calib-prompts"}),
            {"--help", "--sensitivity", "--json", "--progress", "--no-progress", "--quiet", "--symmetric"});
  if (args.has("--help") || args.positional().size() != 1 || !(args.has("-o") || args.has("--output"))) {
    std::fputs(
        "usage: mminfer optimize IN.onnx -o|--output OUT.onnx [--quantize int8] [--precision SPEC] [--keep-fp32 REGEX]\n"
        "                        [--fp32-edges on|off] [--input NAME=F.npy | --shape NAME=AxB]... [--int-range NAME=LO:HI]\n"
        "                        [--min-cosine X] [--sensitivity] [--report FILE.json] [--json] [--threads N]\n"
        "                        [--progress | --no-progress | --quiet]\n"
        "                        [--calib DIR [--calib-method minmax|percentile|entropy] [--percentile P]\n"
        "                         [--calib-preprocess clip|ocr-det | --calib-pipeline DIR] [--calib-limit N]]\n"
        "  writes the MatMuls the policy picks (default: every modality INT8, first, last and projection\n"
        "  layers FP32) in ONNX Runtime's dynamic INT8 form, int8 weights per output column. With --calib,\n"
        "  MatMuls and Convs in the static QDQ form instead, each activation's range calibrated on DIR\n"
        "  (.npy files, folders of INPUT.npy, or images through --calib-preprocess; or images, texts\n"
        "  (.txt, a sample a line) and audio through the pipeline in --calib-pipeline DIR that runs the\n"
        "  model, each through its own preprocessing (then also evaluated on the first 4 inputs it made,\n"
        "  unless --input or --shape says otherwise); default method\n"
        "  percentile 99.99). --quantize fp16 (or fp16 in --precision) writes MatMul weights as FLOAT16\n"
        "  initializers behind a Cast instead. Every output\n"
        "  is compared with FP32 on the evaluation inputs (--input files, else random ones of --shape or\n"
        "  the model's fixed shapes); --min-cosine X moves the most sensitive layers back to FP32 until\n"
        "  each output's cosine is at least X; --sensitivity measures every layer alone; --report writes\n"
        "  all of it as JSON; --json prints the summary as one JSON document on stdout.\n"
        "  --quantize int4|int8w [--block-size 32] [--symmetric] [--accuracy-level 4]: weight-only instead;\n"
        "  every MatMul with a constant FP32 [K, N] weight becomes com.microsoft MatMulNBits (ONNX Runtime's\n"
        "  form: 4 or 8 bits in blocks of --block-size along K, a scale and, unless --symmetric, a zero\n"
        "  point per block); no policy and no accuracy check. --accuracy-level 4 (the default) lets\n"
        "  runtimes quantize activations to int8 per block, as ONNX Runtime's and mminfer's fast CPU\n"
        "  kernels do; 0 keeps FP32 activations (slower). --calib-prompts FILE (a prompt a line, at most\n"
        "  --calib-limit) scales\n"
        "  them activation-aware first (AWQ-style): the text-generation folder holding IN (or --calib-pipeline\n"
        "  DIR) generates a few tokens per prompt (an image-to-text folder captions the images of --calib DIR\n"
        "  instead), each MatMul input's mean |x| per channel is recorded, and\n"
        "  per input s = mean|x|^alpha (alpha from 0 to 1 in steps of 0.1, the least output error on those\n"
        "  rows) scales W's rows while 1/s folds into the norm, Mul or MatMul before it (else a Mul);\n"
        "  --keep-fp32 REGEX leaves matching MatMuls (node or weight names) FP32.\n"
        "  Models with symbolic input shapes need no --shape: the weights are quantized without shapes (as\n"
        "  ONNX Runtime's quantizer does), calibration takes its shapes from the calibration inputs, and\n"
        "  the accuracy check runs on the --input/--shape inputs or the first calibration samples; with\n"
        "  none of those it is skipped, and --min-cosine and --sensitivity, which need it, say so.\n",
        args.usage_stream());
    if (args.has("--help")) std::fputs(kPrecisionUsage, args.usage_stream()), std::fputs(kProgressUsage, args.usage_stream());
    return args.has("--help") ? 0 : 2;
  }
  std::string quantize = args.get("--quantize", "int8");
  if (quantize == "int4" || quantize == "int8w") return write_weight_only(args, quantize == "int4" ? 4 : 8);
  if (quantize == "bf16")
    throw Error("--quantize bf16 has no file form here (BF16 runs at run time: mminfer run|bench --precision bf16)");
  if (quantize != "int8" && quantize != "fp16") throw Error("--quantize: unknown value '" + quantize + "' (use int8, fp16, int4 or int8w)");
  double min_cosine = args.get_double("--min-cosine", 0);
  if (args.has("--min-cosine") && !(min_cosine > -1 && min_cosine <= 1)) throw Error("--min-cosine must be in (-1, 1]");
  const std::string in = args.positional()[0], out = args.get("-o", args.get("--output"));
  PrecisionPolicy policy = precision_flags(args);
  if (!args.has("--precision")) policy.by_modality.fill(quantize == "fp16" ? Precision::kFp16 : Precision::kInt8);
  bool any = false;
  for (Precision p : policy.by_modality) any = any || p == Precision::kInt8 || p == Precision::kFp16;
  if (!any) throw Error("--precision puts nothing in INT8 or FP16; optimize writes those layers only");
  int threads = threads_flag(args);
  ProgressMode progress_mode = progress_flag(args);
  const bool quiet = args.has("--quiet");

  onnx::ModelProto model = onnx_io::read_model_proto(in);
  const bool calibrated = args.has("--calib");
  std::vector<std::string> candidates;
  std::map<std::string, std::string> activation_of;  // candidate -> the activation it quantizes
  if (calibrated) {
    for (auto& [layer, activation] : onnx_io::qdq_candidates(model)) candidates.push_back(layer), activation_of[layer] = activation;
  } else {
    candidates = onnx_io::dynamic_int8_candidates(model);
  }
  std::map<std::string, std::string> precision_of;  // chosen layer -> "int8" / "fp16"
  std::vector<std::string> layers;
  for (auto& [layer, p] : policy_layers(in, policy, candidates)) layers.push_back(layer), precision_of[layer] = p;
  // The layers of one precision among those chosen.
  auto only = [&](const std::set<std::string>& chosen, const char* p) {
    std::set<std::string> out;
    for (const std::string& l : chosen)
      if (precision_of[l] == p) out.insert(l);
    return out;
  };

  SessionOptions opts;
  opts.threads = threads;
  std::unique_ptr<Session> session;
  Progress progress("loading " + std::filesystem::path(in).filename().string(), 1, progress_mode);
  if (Status st = Session::load(in, opts, &session); !st) throw Error(st.message());
  progress.finish();
  std::string base_dir = std::filesystem::path(in).parent_path().string();
  if (base_dir.empty()) base_dir = ".";
  std::map<std::string, std::pair<float, float>> ranges;  // calibrated, with --calib
  Int8Writer writer = [&](onnx::ModelProto& m, const std::set<std::string>& chosen) {
    if (calibrated) onnx_io::write_qdq(m, only(chosen, "int8"), ranges, base_dir);
    else onnx_io::write_dynamic_int8(m, only(chosen, "int8"), base_dir);
    onnx_io::write_fp16_weights(m, only(chosen, "fp16"), base_dir);
  };
  std::vector<std::vector<NamedTensor>> evaluation;
  std::vector<Sample> samples;  // with --calib DIR of .npy files or images
  if (calibrated) {
    CalibrationMethod method = parse_calibration_method(args.get("--calib-method", "percentile"));
    double percentile = args.get_double("--percentile", 99.99);
    if (!(percentile > 0 && percentile <= 100)) throw Error("--percentile must be in (0, 100]");
    std::set<std::string> activations;
    for (const std::string& l : layers)
      if (precision_of[l] == "int8") activations.insert(activation_of[l]);
    const int passes = method == CalibrationMethod::kMinMax ? 1 : 2;  // range, then histogram
    int pass = 0;
    CalibrationSteps steps = [&](size_t done, size_t total) {
      if (done == 0) progress.restart("calibration pass " + std::to_string(++pass) + "/" + std::to_string(passes), total);
      else progress.set(done);
    };
    CalibrationRun run = calibration_run_flags(args, in, *session, steps, &samples);
    // Evaluated on what the pipeline feeds the model, unless the command line gives inputs.
    std::vector<std::string> input_names;
    for (const ValueInfo& v : session->inputs()) input_names.push_back(v.name);
    bool own_inputs = args.has("--calib-pipeline") && !args.has("--input") && !args.has("--shape");
    ranges = calibrate_ranges(in, activations, run, method, percentile, threads, input_names, own_inputs ? 4 : 0,
                              &evaluation);
    progress.finish();
    if (!quiet)
      std::fprintf(stderr, "mminfer optimize: calibrated %zu activations (%s)\n", activations.size(),
                   args.get("--calib-method", "percentile").c_str());
  }
  // The accuracy check runs the models, so it needs concrete input shapes: from the command line,
  // the model's fixed shapes, or else the calibration samples themselves.
  const std::string symbolic = first_symbolic_input(*session);
  const bool given_inputs = args.has("--input") || args.has("--shape");
  if (evaluation.empty() && (given_inputs || symbolic.empty()))
    evaluation.push_back(model_inputs(args, *session, "the accuracy check against FP32"));
  for (size_t i = 0; evaluation.empty() && i < samples.size() && i < 4; ++i) evaluation.push_back(samples[i]);
  GuardReport report;
  onnx::ModelProto result;
  if (evaluation.empty()) {
    if (min_cosine > 0 || args.has("--sensitivity"))
      throw Error(std::string(args.has("--sensitivity") ? "--sensitivity" : "--min-cosine") +
                  " compares outputs with FP32, which needs inputs of a concrete shape, and input " + symbolic +
                  " is symbolic: give --shape NAME=AxB..., --input NAME=F.npy or --calib");
    // Shape-free, as ONNX Runtime's quantizer works: every chosen layer rewritten, nothing measured.
    session.reset();
    report.int8 = layers;
    result = model;
    writer(result, {layers.begin(), layers.end()});
    if (!quiet)
      std::fprintf(stderr,
                   "mminfer optimize: input %s is symbolic: quantized without shapes, accuracy not measured (give\n"
                   "  --shape or --input to compare with FP32)\n",
                   symbolic.c_str());
  } else {
    PrecisionGuard guard(model, in, *session, evaluation, threads, writer);
    session.reset();  // the FP32 reference is taken
    guard.on_steps([&](const std::string& stage, size_t done, size_t total) {
      if (done == 0) progress.restart(stage, total);
      else progress.set(done);
    });
    report = guard.choose(layers, min_cosine, args.has("--sensitivity"));
    progress.finish();
    result = guard.write({report.int8.begin(), report.int8.end()});
  }
  report.precision = precision_of;
  {
    std::ofstream f(out, std::ios::binary);
    if (!f || !result.SerializeToOstream(&f)) throw Error("cannot write " + out);
  }
  size_t fp16 = 0;
  for (const std::string& l : report.int8) fp16 += precision_of[l] == "fp16";
  if (args.has("--report")) {
    std::ofstream f(args.get("--report"));
    if (!f) throw Error("cannot write " + args.get("--report"));
    f << report.to_json() << "\n";
  }
  if (min_cosine > 0 && report.min_cosine < min_cosine)
    std::fprintf(stderr, "mminfer optimize: every layer is back in FP32 and the bound %.6f still does not hold (min %.6f)\n",
                 min_cosine, report.min_cosine);
  if (args.has("--json")) {
    nlohmann::ordered_json doc = {{"output", out},
                                  {"form", calibrated ? "static QDQ" : "dynamic INT8"},
                                  {"int8", report.int8.size() - fp16},
                                  {"fp16", fp16},
                                  {"fp32_fallback", report.fp32_fallback.size()},
                                  {"chosen", layers.size()},
                                  {"candidates", candidates.size()},
                                  {"accuracy_measured", !evaluation.empty()},
                                  {"report", nlohmann::ordered_json::parse(report.to_json())}};
    std::printf("%s\n", json_text(doc).c_str());
    return 0;
  }
  std::printf("%s: %zu of %zu %s in INT8, %zu in FP16 (%zu fell back to FP32), %zu candidates with constant weights\n",
              out.c_str(), report.int8.size() - fp16, layers.size(), calibrated ? "MatMuls/Convs (static QDQ)" : "MatMuls", fp16,
              report.fp32_fallback.size(), candidates.size());
  for (const OutputAccuracy& o : report.outputs)
    std::printf("  %s: cosine to FP32 min %.6f, mean %.6f, max abs error %.4g\n", o.name.c_str(), o.min_cosine,
                o.mean_cosine, o.max_abs_error);
  return 0;
}

}  // namespace mminfer::cli
