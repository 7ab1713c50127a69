#include <cstdio>
#include <map>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/cpu_features.h"
#include "kernels/cpu/gemm/bf16_gemm.h"
#include "kernels/cpu/gemm/dnnl_isa.h"
#include "kernels/cpu/quantization/nbits_tiled.h"
#include "onnx/loader.h"
#include "passes/pass.h"
#include "runtime/node_kernel.h"

namespace mminfer::cli {

namespace {

std::string describe_dims(const ir::Value& v) {
  if (!v.has_shape) return "[?]";
  std::string s = "[";
  for (size_t i = 0; i < v.dims.size(); ++i) {
    if (i) s += ", ";
    if (v.dims[i] >= 0) s += std::to_string(v.dims[i]);
    else if (i < v.symbols.size() && !v.symbols[i].empty()) s += v.symbols[i];
    else s += "?";
  }
  return s + "]";
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (b >= 1024 && u < 3) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", b, units[u]);
  return buf;
}

// What the CPU has, what MMINFER_ISA (or ONEDNN_MAX_CPU_ISA) leaves of it, and the paths taken.
void print_cpu() {
  const IsaSetting& setting = isa_setting();
  const CpuFeatures& used = cpu_features();
  std::printf("cpu: %s\n", cpu_feature_list(detect_cpu_features()).c_str());
  if (setting.source.empty())
    std::printf("cap: native (MMINFER_ISA unset)\n");
  else
    std::printf("cap: %s (from %s)\n", isa_cap_name(setting.cap), setting.source.c_str());
  std::printf("in use: %s\n", cpu_feature_list(used).c_str());
  std::printf("path: %s\n", cpu_isa_name(used).c_str());
  std::printf("onednn: %s\n", kernels::dnnl_isa_name(kernels::dnnl_effective_isa()));
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
  Args args(argc, argv, 2, with_precision_flags({"--opt-level", "--outputs"}), {"--help", "--optimized", "--cpu"});
  bool cpu_only = args.has("--cpu") && args.positional().empty();
  if (args.has("--help") || (args.positional().size() != 1 && !cpu_only)) {
    std::fputs("usage: mminfer inspect MODEL.onnx [--optimized [--opt-level 0|1|2] [--precision SPEC] [--keep-fp32 REGEX]]\n"
               "                       [--outputs NAME,...]\n"
               "       mminfer inspect --cpu\n"
               "--optimized lists the nodes as they will run; [int8] / [fp16] / [bf16] mark their precision\n"
               "--cpu prints the CPU's features, the MMINFER_ISA cap (avx2, avx2_vnni, avx512, avx512_vnni,\n"
               "      avx512_bf16, native) and the paths the kernels and oneDNN take under it\n",
               args.usage_stream());
    if (args.has("--help")) std::fputs(kPrecisionUsage, args.usage_stream());
    return args.has("--help") ? 0 : 2;
  }
  if (args.has("--cpu")) print_cpu();
  if (cpu_only) return 0;
  PrecisionPolicy precision = precision_flags(args);
  auto model = onnx_io::load_model_file(args.positional()[0]);
  std::vector<std::string> outputs = outputs_flag(args);
  if (!outputs.empty()) ir::keep_outputs(model.graph, outputs);  // what the others alone need drops out
  passes::PassReport report;
  if (args.has("--optimized")) {
    passes::PassContext ctx;
    ctx.opt_level = args.get_int("--opt-level", 2);
    ctx.evaluate = runtime::evaluate_node;
    ctx.precision = precision;
    ctx.native_bf16 = kernels::Bf16Gemm::native();
    ctx.tile_nbits = kernels::nbits_tiled_cpu();
    report = passes::optimize(model.graph, ctx);
  }
  const ir::Graph& g = model.graph;
  std::printf("model: %s\n", args.positional()[0].c_str());
  if (!g.producer_name.empty()) std::printf("producer: %s, IR version %lld\n", g.producer_name.c_str(), (long long)g.ir_version);
  std::printf("opsets:");
  for (auto& [domain, version] : g.opsets) std::printf(" %s=%d", domain.empty() ? "ai.onnx" : domain.c_str(), version);
  std::printf("\ninputs:\n");
  for (int v : g.inputs)
    std::printf("  %s: %s %s\n", g.values[v].name.c_str(), dtype_name(g.values[v].dtype), describe_dims(g.values[v]).c_str());
  std::printf("outputs:\n");
  for (int v : g.outputs)
    std::printf("  %s: %s %s\n", g.values[v].name.c_str(), dtype_name(g.values[v].dtype), describe_dims(g.values[v]).c_str());
  std::map<std::string, int> histogram;
  size_t live = 0;
  for (auto& n : g.nodes) {
    if (n.removed) continue;
    ++live;
    histogram[(n.domain.empty() ? "" : n.domain + "::") + n.op_type]++;
  }
  std::printf("nodes: %zu\nops:\n", live);
  std::multimap<int, std::string, std::greater<int>> by_count;
  for (auto& [op, count] : histogram) by_count.insert({count, op});
  for (auto& [count, op] : by_count) std::printf("  %-28s %d\n", op.c_str(), count);
  int64_t params = 0;
  double bytes = 0;
  size_t tensors = 0;
  for (auto& v : g.values) {
    if (!v.is_constant) continue;
    ++tensors;
    params += v.constant.numel();
    bytes += static_cast<double>(v.constant.nbytes());
  }
  std::printf("parameters: %lld in %zu initializers, %s\n", (long long)params, tensors, human_bytes(bytes).c_str());
  if (args.has("--optimized")) {
    std::printf("optimized: %zu nodes before, %zu after (passes that changed the graph:", report.nodes_before,
                report.nodes_after);
    for (auto& p : report.applied) std::printf(" %s", p.c_str());
    std::printf(")\n");
    std::map<std::string, int> marked;  // precision -> nodes
    int layers = 0;
    for (const ir::Node& n : g.nodes) {
      ++marked[n.attrs.get_string("precision", "")];
      layers += n.op_type == "MatMul" || n.op_type == "FusedMatMul" || n.op_type == "Gemm" || n.op_type == "Conv" ||
                n.op_type == "FusedConv";
    }
    auto wants = [&](Precision want) {
      for (Precision p : precision.by_modality)
        if (p == want) return true;
      return false;
    };
    for (Precision p : {Precision::kInt8, Precision::kFp16, Precision::kBf16}) {
      if (!wants(p)) continue;
      if (p == Precision::kBf16 && !kernels::Bf16Gemm::native())
        std::printf("bf16: this CPU has no native bfloat16 dot products; those nodes stay FP32\n");
      else
        std::printf("%s: %d of %d MatMul/Gemm/Conv nodes\n", precision_name(p), marked[precision_name(p)], layers);
    }
    std::printf("graph:\n");
    for (int ni : g.topological_order()) {
      const ir::Node& n = g.nodes[ni];
      std::string p = n.attrs.get_string("precision", "");
      std::string mark = p.empty() || p == "fp32" ? "" : "[" + p + "] ";
      std::printf("  %s%s %s(", mark.c_str(), n.op_type.c_str(), g.label(n).c_str());
      for (size_t i = 0; i < n.inputs.size(); ++i)
        std::printf("%s%s", i ? ", " : "", n.inputs[i] >= 0 ? g.values[n.inputs[i]].name.c_str() : "-");
      std::printf(") -> ");
      for (size_t i = 0; i < n.outputs.size(); ++i)
        std::printf("%s%s", i ? ", " : "", n.outputs[i] >= 0 ? g.values[n.outputs[i]].name.c_str() : "-");
      std::printf("\n");
    }
  }
  for (auto& w : model.warnings) std::fprintf(stderr, "mminfer inspect: warning: %s\n", w.c_str());
  return 0;
}

}  // namespace mminfer::cli
