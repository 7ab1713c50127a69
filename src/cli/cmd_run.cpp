#include <cstdio>
#include <filesystem>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/npy.h"
#include "mminfer/session.h"

namespace mminfer::cli {

namespace {

// Output names become file names: keep letters, digits, '-', '_' and '.', replace the rest.
std::string file_safe(const std::string& name) {
  std::string s;
  for (char c : name) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  if (s.empty() || s == "." || s == "..") s = "output" + s;
  return s;
}

}  // namespace

int cmd_run(int argc, char** argv) {
  if (names_model_folder(argc, argv)) return cmd_run_folder(argc, argv);
  Args args(argc, argv, 2,
            with_precision_flags(
                {"--input", "--output-dir", "--threads", "--profile", "--opt-level", "--inter-op", "--outputs", "--merge-tokens"}),
            {"--help"});
  if (args.has("--help") || args.positional().size() != 1) {
    std::fputs(
        "usage: mminfer run MODEL.onnx --input NAME=FILE.npy ... [--output-dir DIR] [--threads N]\n"
        "                  [--profile TRACE.json] [--opt-level 0|1|2] [--inter-op auto|off|on]\n"
        "                  [--precision SPEC] [--keep-fp32 REGEX] [--outputs NAME,...] [--merge-tokens R]\n"
        "       mminfer run DIR INPUT... [options]\n"
        "DIR: a model folder, run by the command its kind takes (pipeline.json's type, else config.json's\n"
        "  model_type or architectures, else its file names): generate, transcribe, caption, chat, ocr,\n"
        "  staged, embed, or classify when --labels is given; the options are that command's\n"
        "--outputs: compute and write only these outputs, and none of the work only the others need\n"
        "--merge-tokens R: ViT-style encoders merge R tokens after each block's attention (per-token\n"
        "  outputs shrink; the class token's pooled output keeps its shape)\n",
        args.usage_stream());
    if (args.has("--help")) std::fputs(kPrecisionUsage, args.usage_stream());
    return args.has("--help") ? 0 : 2;
  }
  SessionOptions opts;
  opts.threads = threads_flag(args);
  opts.opt_level = args.get_int("--opt-level", 2);
  opts.inter_op = inter_op_flag(args);
  opts.profile_path = args.get("--profile");
  opts.precision = precision_flags(args);
  opts.merge_tokens = merge_tokens_flag(args);
  opts.outputs = outputs_flag(args);
  std::unique_ptr<Session> session;
  Status st = Session::load(args.positional()[0], opts, &session);
  if (!st) throw Error(st.message());
  std::vector<NamedTensor> inputs;
  for (const std::string& spec : args.all("--input")) {
    auto [name, path] = split_assignment(spec, "--input");
    inputs.emplace_back(name, read_npy(path));
  }
  std::vector<Tensor> outputs;
  st = session->run(inputs, &outputs);
  if (!st) throw Error(st.message());
  std::string dir = args.get("--output-dir", ".");
  std::filesystem::create_directories(dir);
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string& name = session->outputs()[i].name;
    std::string path = (std::filesystem::path(dir) / (file_safe(name) + ".npy")).string();
    write_npy(path, outputs[i]);
    std::printf("%s: %s %s -> %s\n", name.c_str(), dtype_name(outputs[i].dtype()), shape_str(outputs[i].shape()).c_str(),
                path.c_str());
  }
  session.reset();  // writes the profile
  if (!opts.profile_path.empty()) std::printf("profile: %s\n", opts.profile_path.c_str());
  return 0;
}

}  // namespace mminfer::cli
