#include <cstdio>
#include <cstring>
#include <string>

#include <oneapi/dnnl/dnnl.h>

#include "cli/commands.h"
#include "cli/huge_pages.h"
#include "core/cpu_features.h"
#include "kernels/cpu/gemm/dnnl_isa.h"
#include "kernels/cpu/gemm/panel_gemm.h"
#include "mminfer/version.h"
#include "mminfer/status.h"

namespace {

void usage(std::FILE* out) {
  std::fputs(
      "usage: mminfer COMMAND [options]\n"
      "\n"
      "commands:\n"
      "  inspect MODEL                    inputs, outputs, opsets, op histogram, parameters\n"
      "  run MODEL --input NAME=F.npy ... run once, write outputs as .npy\n"
      "  run DIR INPUT...                 a model folder, by the command its kind takes (generate, transcribe...)\n"
      "  bench MODEL [--shape NAME=1x3x224x224 | --input NAME=F.npy]...  time repeated runs\n"
      "  optimize IN.onnx -o OUT.onnx [--precision SPEC] [--min-cosine X]  write INT8 layers as standard ONNX\n"
      "  prune IN.onnx -o OUT.onnx --heads R --mlp R --calib DIR  remove attention heads and MLP channels\n"
      "  tune --pipeline DIR --eval DIR -o OUT  the cheapest OCR setting within a CER bound\n"
      "  tune MODEL.onnx --calib DIR --eval DIR -o OUT.onnx  a model's best precision, pruning, rank, merging\n"
      "  onnx-test DIR...                 run ONNX backend test cases\n"
      "  ocr IMAGE...                     text lines of images (PP-OCRv4)\n"
      "  embed --pipeline DIR (--image F | --text S | --audio F)...  normalized embeddings\n"
      "  classify --pipeline DIR --image F... --labels \"a,b,c\"  zero-shot label probabilities (clip)\n"
      "  staged --pipeline DIR INPUT...   a shared encoder, then gated stages (topic, layout, render...)\n"
      "  generate --pipeline DIR PROMPT...  text from a language model, streamed as it is made\n"
      "  transcribe --pipeline DIR AUDIO...  speech to text with a Whisper-style model\n"
      "  caption --pipeline DIR IMAGE...  text of images with an image-to-text model\n"
      "  chat --pipeline DIR [--image F] QUESTION  an answer about an image (vision-language model)\n"
      "  serve [--repository DIR] [--port 8000]  the inference server (KServe v2, /v1/embeddings, /v1/ocr)\n"
      "  loadgen --url URL                load a running server with embedding requests, report req/s and latencies\n"
      "\n"
      "run 'mminfer COMMAND --help' for the options of one command; 'mminfer --version' says which build this is\n",
      out);
}

// The version, the build, and the CPU paths this machine takes: what a bug report needs.
int print_version() {
  const dnnl_version_t* dnnl = dnnl_version();
  const char* commit = mminfer::build_commit();
  std::printf("mminfer %s (commit %s, %s build)\n", mminfer::version(), *commit ? commit : "unknown",
              mminfer::build_type());
  std::printf("cpu path: %s\n", mminfer::cpu_isa_name(mminfer::cpu_features()).c_str());
  std::printf("oneDNN %d.%d.%d, running %s\n", dnnl->major, dnnl->minor, dnnl->patch,
              mminfer::kernels::dnnl_isa_name(mminfer::kernels::dnnl_effective_isa()));
  std::printf("FP32 products of up to %ld rows: %s\n", static_cast<long>(mminfer::kernels::kPanelGemmMaxRows),
              mminfer::kernels::panel_gemm_in_use() ? "panel_gemm (oneDNN's bits)" : "oneDNN");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  mminfer::cli::restart_with_huge_pages(argv);
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  try {
    mminfer::cpu_features();  // a bad MMINFER_ISA stops every command here, as one line
    if (cmd == "--version" || cmd == "-V") return print_version();
    if (cmd == "inspect") return mminfer::cli::cmd_inspect(argc, argv);
    if (cmd == "run") return mminfer::cli::cmd_run(argc, argv);
    if (cmd == "bench") return mminfer::cli::cmd_bench(argc, argv);
    if (cmd == "onnx-test") return mminfer::cli::cmd_onnx_test(argc, argv);
    if (cmd == "ocr") return mminfer::cli::cmd_ocr(argc, argv);
    if (cmd == "serve") return mminfer::cli::cmd_serve(argc, argv);
    if (cmd == "embed") return mminfer::cli::cmd_embed(argc, argv);
    if (cmd == "classify") return mminfer::cli::cmd_classify(argc, argv);
    if (cmd == "staged") return mminfer::cli::cmd_staged(argc, argv);
    if (cmd == "loadgen") return mminfer::cli::cmd_loadgen(argc, argv);
    if (cmd == "optimize") return mminfer::cli::cmd_optimize(argc, argv);
    if (cmd == "prune") return mminfer::cli::cmd_prune(argc, argv);
    if (cmd == "tune") return mminfer::cli::cmd_tune(argc, argv);
    if (cmd == "generate") return mminfer::cli::cmd_generate(argc, argv);
    if (cmd == "transcribe") return mminfer::cli::cmd_transcribe(argc, argv);
    if (cmd == "caption") return mminfer::cli::cmd_caption(argc, argv);
    if (cmd == "chat") return mminfer::cli::cmd_chat(argc, argv);
  } catch (const mminfer::Error& e) {
    std::fprintf(stderr, "mminfer %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mminfer %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
  std::fprintf(stderr, "mminfer: unknown command '%s'\n", cmd.c_str());
  usage(stderr);
  return 2;
}
