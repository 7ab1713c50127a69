// mminfer prune: removes the least important attention heads and MLP hidden channels of a
// transformer (onnx/structured_pruning.h), measured on a calibration set, and writes the
// smaller model as standard ONNX; then compares its outputs with the original's.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli/args.h"
#include "cli/calibration.h"
#include "cli/commands.h"
#include "cli/json_output.h"
#include "cli/precision_guard.h"
#include "cli/progress.h"
#include "cli/tensor_inputs.h"
#include "core/ascii.h"
#include "ir/modality.h"
#include "kernels/cpu/gemm/dense_gemm.h"
#include "onnx/low_rank.h"
#include "onnx/proto_edit.h"
#include "onnx/structured_pruning.h"

namespace mminfer::cli {

namespace {

// The modality of a model's inputs (the first recognised one), kOther when none is.
Modality model_modality(const onnx::ModelProto& m) {
  for (const auto& in : m.graph().input())
    if (auto mod = ir::input_modality(in.name())) return *mod;
  return Modality::kOther;
}

// "0.3" (any model) or "vision=0.3,text=0.2": the share for `modality`, 0 when not named.
double share_for(const std::string& flag, const std::string& spec, Modality modality) {
  auto number = [&](const std::string& s) {
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !(v >= 0 && v < 1))
      throw Error(flag + ": '" + s + "' is not a share in [0, 1) (e.g. 0.3, or vision=0.3,text=0.2)");
    return v;
  };
  if (spec.find('=') == std::string::npos) return number(std::string(trim(spec)));
  double out = 0;
  for (const std::string& piece : split_list(spec)) {
    std::string item(trim(piece));
    size_t eq = item.find('=');
    if (eq == std::string::npos) throw Error(flag + ": '" + item + "' is not MODALITY=SHARE");
    std::string name = ascii_lower(std::string(trim(item.substr(0, eq))));
    double v = number(std::string(trim(item.substr(eq + 1))));
    if (name != "vision" && name != "text" && name != "audio")
      throw Error(flag + ": unknown modality '" + name + "' (vision, text or audio)");
    if (name == modality_name(modality)) out = v;
  }
  return out;
}

// Σ x xᵀ and Σ x of every row of an observed [.., channels] activation.
void add_rows(onnx_io::InputMoments& mo, const Tensor& t, std::vector<float>& scratch) {
  const int64_t n = t.shape().empty() ? 0 : t.shape().back();
  if (n <= 0 || t.numel() == 0) return;
  const int64_t rows = t.numel() / n;
  if (mo.channels == 0) {
    mo.channels = n;
    mo.xx.assign(static_cast<size_t>(n * n), 0.0);
    mo.x.assign(static_cast<size_t>(n), 0.0);
  }
  if (mo.channels != n) throw Error("calibration: an activation changed width between runs");
  scratch.resize(static_cast<size_t>(n * n));
  const float* x = t.data<float>();
  kernels::sgemm(true, false, n, n, rows, 1.f, x, n, x, n, 0.f, scratch.data(), n);
  for (size_t i = 0; i < scratch.size(); ++i) mo.xx[i] += scratch[i];
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < n; ++c) mo.x[static_cast<size_t>(c)] += x[r * n + c];
  mo.rows += rows;
  mo.samples += t.rank() >= 3 ? t.numel() / (n * t.shape()[t.rank() - 2]) : 1;
}

nlohmann::ordered_json block_json(const onnx_io::PrunedBlock& b) {
  return {{"kind", b.kind},
          {"input", b.input},
          {"output_weight", b.output_weight},
          {"output_bias", b.output_bias},
          {"written_weight", b.written_weight},
          {"written_bias", b.written_bias},
          {"units", b.units},
          {"kept", b.kept},
          {"removed", b.removed},
          {"error_dropped", b.error_dropped},
          {"error", b.error},
          {"refit", b.refit},
          {"flops_before", b.flops_before},
          {"flops_after", b.flops_after},
          {"params_before", b.params_before},
          {"params_after", b.params_after}};
}

}  // namespace

int cmd_prune(int argc, char** argv) {
  Args args(argc, argv, 2,
            {"-o", "--output", "--heads", "--mlp", "--low-rank", "--calib", "--calib-preprocess", "--calib-pipeline", "--calib-limit",
             "--threads", "--report", "--input", "--shape", "--int-range"},
            {"--help", "--json", "--no-reconstruct", "--progress", "--no-progress", "--quiet"});
  if (args.has("--help") || args.positional().size() != 1 || !(args.has("-o") || args.has("--output")) ||
      !args.has("--calib") || !(args.has("--heads") || args.has("--mlp") || args.has("--low-rank"))) {
    std::fputs(
        "usage: mminfer prune IN.onnx -o|--output OUT.onnx [--heads SHARE] [--mlp SHARE] [--low-rank ERROR] --calib DIR\n"
        "                     [--calib-preprocess clip|ocr-det | --calib-pipeline DIR] [--calib-limit N]\n"
        "                     [--no-reconstruct] [--report FILE.json] [--json] [--threads N]\n"
        "  Removes the least important attention heads (--heads) and MLP hidden channels (--mlp) of every\n"
        "  transformer block, a share of each (0.3, or per modality of the model's inputs: vision=0.3,text=0.2),\n"
        "  and writes the smaller model as standard ONNX. Importance is each unit's share of its block's\n"
        "  output over the calibration set (--calib: .npy files, folders of INPUT.npy, or images through\n"
        "  --calib-preprocess, or any input through the pipeline of --calib-pipeline DIR; at most\n"
        "  --calib-limit, default 64). The output projections are then refitted by least squares on the same\n"
        "  activations (--no-reconstruct: only drop). --low-rank ERROR then splits each projection x·W into\n"
        "  x·A·B at the lowest rank whose output error on the calibration set is at most ERROR (relative, e.g.\n"
        "  0.01), where that costs at most 0.8 of W's multiply-adds. Prints the heads and channels kept, parameters, the\n"
        "  blocks' MatMul GFLOPs per sample, the blocks' relative output error on the calibration set, and\n"
        "  each model output's cosine to the original's on the first 4 samples (held out of the fit when\n"
        "  there are 12 or more).\n",
        args.usage_stream());
    if (args.has("--help")) std::fputs(kProgressUsage, args.usage_stream());
    return args.has("--help") ? 0 : 2;
  }
  const std::string in = args.positional()[0], out = args.get("-o", args.get("--output"));
  const int threads = threads_flag(args);
  const bool quiet = args.has("--quiet");
  onnx::ModelProto model = onnx_io::read_model_proto(in);
  std::string base_dir = std::filesystem::path(in).parent_path().string();
  if (base_dir.empty()) base_dir = ".";
  const Modality modality = model_modality(model);
  onnx_io::PruneOptions opt;
  opt.heads = args.has("--heads") ? share_for("--heads", args.get("--heads"), modality) : 0;
  opt.mlp = args.has("--mlp") ? share_for("--mlp", args.get("--mlp"), modality) : 0;
  opt.reconstruct = !args.has("--no-reconstruct");
  onnx_io::LowRankOptions low_rank;
  const bool factor = args.has("--low-rank");
  if (factor) {
    low_rank.max_error = args.get_double("--low-rank", 0);
    if (!(low_rank.max_error > 0 && low_rank.max_error < 1)) throw Error("--low-rank: the relative error must be in (0, 1)");
  }
  if (opt.heads == 0 && opt.mlp == 0 && !factor)
    throw Error(std::string("nothing to remove: the shares given are 0 for this model's modality (") +
                modality_name(modality) + ")");

  onnx_io::TransformerBlocks blocks = onnx_io::find_transformer_blocks(model.graph());
  if (blocks.attention.empty() && blocks.mlp.empty() && !(factor && !blocks.other.empty())) {
    std::string why = blocks.skipped.empty() ? "no Softmax at all" : blocks.skipped.front();
    throw Error("no attention or MLP block to prune in " + in + " (" + why + ")");
  }
  if (opt.heads > 0 && blocks.attention.empty()) throw Error("no attention block to prune in " + in);
  if (opt.mlp > 0 && blocks.mlp.empty()) throw Error("no MLP block to prune in " + in);
  if (!quiet)
    for (const std::string& s : blocks.skipped) std::fprintf(stderr, "mminfer prune: left whole: %s\n", s.c_str());

  // Calibration: the moments of every output projection's input.
  std::map<std::string, onnx_io::InputMoments> moments;
  std::vector<std::string> observed;
  if (opt.heads > 0)
    for (const auto& b : blocks.attention) observed.push_back(b.merged);
  if (opt.mlp > 0)
    for (const auto& b : blocks.mlp) observed.push_back(b.hidden);
  if (factor)
    for (const std::string& v : onnx_io::projection_inputs(model.graph(), blocks))
      if (std::find(observed.begin(), observed.end(), v) == observed.end()) observed.push_back(v);
  ProgressMode progress_mode = progress_flag(args);
  Progress progress("loading " + std::filesystem::path(in).filename().string(), 1, progress_mode);
  SessionOptions load_opts;
  load_opts.threads = threads;
  std::unique_ptr<Session> original;
  if (Status st = Session::load(in, load_opts, &original); !st) throw Error(st.message());
  CalibrationSteps steps = [&](size_t done, size_t total) {
    if (done == 0) progress.restart("calibration", total);
    else progress.set(done);
  };
  std::vector<Sample> samples;
  CalibrationRun run = calibration_run_flags(args, in, *original, steps, &samples);
  std::vector<std::string> input_names;
  for (const ValueInfo& v : original->inputs()) input_names.push_back(v.name);
  // The first runs' inputs, as the pipeline made them, compare the written model with the original.
  // With 12 samples or more, the first 4 are held out of the statistics, so the comparison shows
  // what the refit does on inputs it was not fitted to.
  const size_t held_out = samples.size() >= 12 ? 4 : 0;
  std::vector<Sample> evaluation;
  Sample filling;
  size_t runs_started = 0, inputs_in_run = 0;
  std::vector<float> scratch;
  SessionOptions observe;
  observe.threads = threads;
  observe.observe = observed;
  for (const std::string& v : input_names)
    if (std::find(observed.begin(), observed.end(), v) == observed.end()) observe.observe.push_back(v);
  observe.observe_model = in;
  observe.observer = [&](const std::string& name, const Tensor& t) {
    if (std::find(input_names.begin(), input_names.end(), name) != input_names.end()) {
      if (inputs_in_run++ == 0) ++runs_started;
      if (evaluation.size() < 4) filling.emplace_back(name, t.clone());
      if (filling.size() == input_names.size()) evaluation.push_back(std::move(filling)), filling.clear();
      if (inputs_in_run == input_names.size()) inputs_in_run = 0;
      // A model input a projection reads (cross-attention's encoder states) is calibrated too.
      if (std::find(observed.begin(), observed.end(), name) == observed.end()) return;
    }
    if (runs_started <= held_out) return;  // a held-out run: compared, never fitted
    if (t.dtype() != DType::kFloat32) throw Error("calibration: '" + name + "' is not float32");
    add_rows(moments[name], t, scratch);
  };
  run(observe);
  progress.finish();
  for (const std::string& v : observed)
    if (!moments.count(v))
      throw Error("calibration never computed '" + v + "': the calibration set does not reach it (is " + in +
                  " the model the pipeline runs for these files?)");

  onnx::ModelProto pruned = model;
  onnx_io::inline_external_data(pruned, base_dir);
  std::vector<onnx_io::PrunedBlock> report = onnx_io::prune_blocks(pruned, blocks, moments, opt, base_dir);
  size_t mean_only = 0;
  for (const auto& b : report) mean_only += b.refit == "mean into bias";
  if (mean_only && !quiet)
    std::fprintf(stderr,
                 "mminfer prune: note: %zu blocks had fewer calibration rows than twice their kept channels: their\n"
                 "  output projections keep their rows and take the removed channels' mean into the bias (give\n"
                 "  more samples for a least-squares refit)\n",
                 mean_only);
  std::vector<onnx_io::LowRankChoice> factored;
  if (factor)  // on the pruned graph: its projections' inputs are still the ones calibrated
    factored = onnx_io::factor_low_rank(pruned, onnx_io::find_transformer_blocks(pruned.graph()), moments, low_rank, base_dir);
  {
    std::ofstream f(out, std::ios::binary);
    if (!f || !pruned.SerializeToOstream(&f)) throw Error("cannot write " + out);
  }

  // The outputs of the written model beside the original's.
  PrecisionGuard guard(model, in, *original, evaluation, threads,
                       [&](onnx::ModelProto& m, const std::set<std::string>&) { m = pruned; });
  original.reset();
  std::vector<OutputAccuracy> accuracy = guard.measure({"pruned"});

  struct Totals {
    size_t blocks = 0;
    int64_t units = 0, kept = 0, params_before = 0, params_after = 0;
    double flops_before = 0, flops_after = 0, error = 0, error_dropped = 0;
  } heads, mlp;
  for (const auto& b : report) {
    Totals& t = b.kind == "attention" ? heads : mlp;
    ++t.blocks, t.units += b.units, t.kept += b.kept;
    t.params_before += b.params_before, t.params_after += b.params_after;
    t.flops_before += b.flops_before, t.flops_after += b.flops_after;
    t.error += b.error, t.error_dropped += b.error_dropped;
  }
  auto mean = [](double sum, size_t n) { return n ? sum / static_cast<double>(n) : 0.0; };
  nlohmann::ordered_json doc = {
      {"output", out},
      {"modality", modality_name(modality)},
      {"reconstruct", opt.reconstruct},
      {"heads", {{"share", opt.heads}, {"blocks", heads.blocks}, {"before", heads.units}, {"after", heads.kept}}},
      {"mlp", {{"share", opt.mlp}, {"blocks", mlp.blocks}, {"before", mlp.units}, {"after", mlp.kept}}},
      {"params_before", heads.params_before + mlp.params_before},
      {"params_after", heads.params_after + mlp.params_after},
      {"block_gflops_before", (heads.flops_before + mlp.flops_before) * 1e-9},
      {"block_gflops_after", (heads.flops_after + mlp.flops_after) * 1e-9},
      {"attention_error", {{"dropped", mean(heads.error_dropped, heads.blocks)}, {"refitted", mean(heads.error, heads.blocks)}}},
      {"mlp_error", {{"dropped", mean(mlp.error_dropped, mlp.blocks)}, {"refitted", mean(mlp.error, mlp.blocks)}}},
      {"low_rank", nullptr},
      {"compared_on", held_out ? std::to_string(held_out) + " held-out samples"
                               : std::to_string(evaluation.size()) + " calibration samples"},
      {"outputs", nlohmann::ordered_json::array()},
      {"skipped", blocks.skipped}};
  size_t low_rank_count = 0;
  double low_rank_before = 0, low_rank_after = 0, low_rank_error = 0;
  for (const auto& c : factored) {
    low_rank_count += c.factored;
    low_rank_before += c.flops_before, low_rank_after += c.flops_after;
    if (c.factored) low_rank_error = std::max(low_rank_error, c.error);
  }
  if (factor)
    doc["low_rank"] = {{"max_error", low_rank.max_error}, {"considered", factored.size()}, {"factored", low_rank_count},
                       {"gflops_before", low_rank_before * 1e-9}, {"gflops_after", low_rank_after * 1e-9},
                       {"worst_error", low_rank_error}};
  for (const auto& o : accuracy)
    doc["outputs"].push_back({{"name", o.name}, {"min_cosine", o.min_cosine}, {"mean_cosine", o.mean_cosine},
                              {"max_abs_error", o.max_abs_error}});
  if (args.has("--report")) {
    nlohmann::ordered_json full = doc;
    full["blocks"] = nlohmann::ordered_json::array();
    for (const auto& b : report) full["blocks"].push_back(block_json(b));
    full["factored"] = nlohmann::ordered_json::array();
    for (const auto& c : factored)
      full["factored"].push_back({{"weight", c.weight}, {"input", c.input}, {"rows", c.rows}, {"cols", c.cols},
                                  {"rank", c.rank}, {"error", c.error}, {"factored", c.factored},
                                  {"flops_before", c.flops_before}, {"flops_after", c.flops_after}});
    write_json_file(args.get("--report"), full);
  }
  if (args.has("--json")) {
    std::printf("%s\n", json_text(doc).c_str());
    return 0;
  }
  std::printf("%s\n", out.c_str());
  if (opt.heads > 0 || opt.mlp > 0) {
    std::printf("  heads %lld -> %lld in %zu attention blocks, MLP channels %lld -> %lld in %zu MLPs\n",
                static_cast<long long>(heads.units), static_cast<long long>(heads.kept), heads.blocks,
                static_cast<long long>(mlp.units), static_cast<long long>(mlp.kept), mlp.blocks);
    std::printf("  parameters in these blocks %.3fM -> %.3fM; their MatMul work %.4f -> %.4f GFLOP per sample\n",
                static_cast<double>(heads.params_before + mlp.params_before) * 1e-6,
                static_cast<double>(heads.params_after + mlp.params_after) * 1e-6,
                (heads.flops_before + mlp.flops_before) * 1e-9, (heads.flops_after + mlp.flops_after) * 1e-9);
    std::printf("  blocks' relative output error on the calibration set: attention %.4g (dropped only %.4g), MLP %.4g "
                "(dropped only %.4g)\n",
                mean(heads.error, heads.blocks), mean(heads.error_dropped, heads.blocks), mean(mlp.error, mlp.blocks),
                mean(mlp.error_dropped, mlp.blocks));
  }
  if (factor)
    std::printf("  low rank (error <= %g): %zu of %zu projections factored, their work %.4f -> %.4f GFLOP per sample, "
                "worst error %.4g\n",
                low_rank.max_error, low_rank_count, factored.size(), low_rank_before * 1e-9, low_rank_after * 1e-9,
                low_rank_error);
  std::printf("  outputs compared with the original's on %s:\n",
              held_out ? (std::to_string(held_out) + " samples held out of the calibration").c_str()
                       : (std::to_string(evaluation.size()) + " of the calibration samples").c_str());
  for (const auto& o : accuracy)
    std::printf("  %s: cosine to the original min %.6f, mean %.6f, max abs error %.4g\n", o.name.c_str(), o.min_cosine,
                o.mean_cosine, o.max_abs_error);
  return 0;
}

}  // namespace mminfer::cli
