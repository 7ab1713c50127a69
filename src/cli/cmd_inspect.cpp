#include <cstdio>
#include <map>

#include "cli/args.h"
#include "cli/commands.h"
#include "onnx/loader.h"

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

}  // namespace

int cmd_inspect(int argc, char** argv) {
  Args args(argc, argv, 2, {}, {"--help"});
  if (args.has("--help") || args.positional().size() != 1) {
    std::fputs("usage: mminfer inspect MODEL.onnx\n", stderr);
    return args.has("--help") ? 0 : 2;
  }
  auto model = onnx_io::load_model_file(args.positional()[0]);
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
  for (auto& w : model.warnings) std::printf("warning: %s\n", w.c_str());
  return 0;
}

}  // namespace mminfer::cli
