// Subcommands of the mminfer binary. Each returns the process exit code.
#pragma once

namespace mminfer::cli {

int cmd_inspect(int argc, char** argv);
int cmd_run(int argc, char** argv);
// run DIR ...: the folder's kind (pipeline.json, config.json, file names) picks the command.
bool names_model_folder(int argc, char** argv);
int cmd_run_folder(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_onnx_test(int argc, char** argv);
int cmd_ocr(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_embed(int argc, char** argv);
int cmd_classify(int argc, char** argv);
int cmd_staged(int argc, char** argv);
int cmd_loadgen(int argc, char** argv);
int cmd_optimize(int argc, char** argv);
int cmd_prune(int argc, char** argv);
int cmd_tune(int argc, char** argv);
// tune MODEL.onnx: one model's variants (cmd_tune hands it over when given a model).
int cmd_tune_model(int argc, char** argv);
int cmd_generate(int argc, char** argv);
int cmd_transcribe(int argc, char** argv);
int cmd_caption(int argc, char** argv);
int cmd_chat(int argc, char** argv);
// bench --pipeline DIR: prefill and decode of a generative folder (cmd_bench hands it over).
int cmd_bench_generate(int argc, char** argv);

}  // namespace mminfer::cli
