// The mminfer binary on bad files and bad arguments: it must exit with status 1 or 2 and one
// line on stderr, never crash, hang, or print a sanitizer report.
#include <cstdio>
#include <filesystem>

#include <gtest/gtest.h>

#include "cli_util.h"
#include "core/npy.h"
#include "robust_util.h"

namespace robust {
namespace {

// A version 1.0 .npy header with the given dict text and no data.
std::string npy_header(const std::string& dict) {
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict;
}

class Cli : public ::testing::Test {
 protected:
  Cli() : dir_("cli") {
    model_ = dir_.file("mlp.onnx");
    write_file(model_, serialize(mlp_model()));
    mminfer::Tensor x = mminfer::Tensor::empty(mminfer::DType::kFloat32, {2, 4});
    good_npy_ = dir_.file("x.npy");
    mminfer::write_npy(good_npy_, x);
  }
  std::string npy(const std::string& name, const std::string& bytes) {
    std::string p = dir_.file(name);
    write_file(p, bytes);
    return p;
  }
  TempDir dir_;
  std::string model_, good_npy_;
};

TEST_F(Cli, BadModelFiles) {
  std::string bytes = serialize(mlp_model());
  std::string empty = npy("empty.onnx", "");
  std::string truncated = npy("truncated.onnx", bytes.substr(0, bytes.size() / 2));
  std::string random = npy("random.onnx", std::string("\x08\x07\x12\xff\xff\xff\xff\x0f garbage", 16));
  std::filesystem::create_directories(dir_.file("folder.onnx"));
  for (const std::string& cmd : {std::string("run"), std::string("inspect"), std::string("bench")}) {
    std::string in = cmd == "run" ? " --input x=" + quote(good_npy_) : "";
    expect_clean_failure(run_cli(cmd + " " + quote(dir_.file("missing.onnx")) + in, dir_), "missing.onnx", cmd + " missing");
    expect_clean_failure(run_cli(cmd + " " + quote(dir_.file("folder.onnx")) + in, dir_), "folder.onnx", cmd + " folder");
    expect_clean_failure(run_cli(cmd + " " + quote(empty) + in, dir_), "empty", cmd + " empty");
    expect_clean_failure(run_cli(cmd + " " + quote(truncated) + in, dir_), "", cmd + " truncated");
    expect_clean_failure(run_cli(cmd + " " + quote(random) + in, dir_), "", cmd + " random");
    expect_clean_failure(run_cli(cmd + " /dev/zero" + in, dir_), "", cmd + " /dev/zero");
  }
}

TEST_F(Cli, BadNpyInputs) {
  std::string good = mminfer::encode_npy(mminfer::Tensor::empty(mminfer::DType::kFloat32, {2, 4}));
  const std::pair<std::string, std::string> cases[] = {
      {"missing", ""},
      {"empty", ""},
      {"bad magic", "NOTNUMPY" + good.substr(8)},
      {"truncated header", good.substr(0, 20)},
      {"truncated data", good.substr(0, good.size() - 4)},
      {"huge shape", npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4000000000, 1), }\n")},
      {"overflowing shape", npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }\n")},
      {"shape not a tuple", npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': }")},
      {"empty descr", npy_header("{'descr': '', 'fortran_order': False, 'shape': (2, 4), }")},
      {"fortran order", npy_header("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 4), }\n")},
      {"big endian", npy_header("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 4), }\n")},
      {"wrong dtype", mminfer::encode_npy(mminfer::Tensor::empty(mminfer::DType::kInt64, {2, 4}))},
      {"wrong shape", mminfer::encode_npy(mminfer::Tensor::empty(mminfer::DType::kFloat32, {4, 2}))},
      {"wrong rank", mminfer::encode_npy(mminfer::Tensor::empty(mminfer::DType::kFloat32, {8}))},
      {"version 9", std::string("\x93NUMPY\x09\x00", 8) + good.substr(8)},
  };
  for (const auto& [what, bytes] : cases) {
    std::string p = what == "missing" ? dir_.file("nope.npy") : npy("in.npy", bytes);
    CliResult r = run_cli("run " + quote(model_) + " --input x=" + quote(p) + " --output-dir " + quote(dir_.file("out")), dir_);
    expect_clean_failure(r, "", what);
  }
  // The three wrong-tensor cases must name the input.
  for (const auto* what : {"wrong dtype", "wrong shape", "wrong rank"}) {
    for (const auto& [w, bytes] : cases) {
      if (w != what) continue;
      CliResult r = run_cli("run " + quote(model_) + " --input x=" + quote(npy("in.npy", bytes)), dir_);
      expect_clean_failure(r, "'x'", what);
    }
  }
}

// Asked for, usage is a result: stdout, exit 0, nothing on stderr (so `--help | grep` works).
TEST_F(Cli, HelpOfEveryCommandGoesToStdout) {
  for (const char* cmd : {"inspect", "run", "bench", "optimize", "onnx-test", "ocr", "embed", "classify", "serve",
                          "loadgen"})
    for (const char* flag : {"--help", "-h"}) {
      CliResult r = run_cli(std::string(cmd) + " " + flag, dir_);
      EXPECT_EQ(r.exit_code, 0) << cmd << " " << flag << ": " << r.err;
      EXPECT_NE(r.out.find(std::string("usage: mminfer ") + cmd), std::string::npos) << cmd << " " << flag << ": " << r.out;
      EXPECT_EQ(r.err, "") << cmd << " " << flag;
    }
  CliResult top = run_cli("--help", dir_);
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_NE(top.out.find("usage: mminfer COMMAND"), std::string::npos) << top.out;
  // A mistake still gets the usage, on stderr, with status 2.
  CliResult wrong = run_cli("run", dir_);
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_EQ(wrong.out, "");
  EXPECT_NE(wrong.err.find("usage: mminfer run"), std::string::npos) << wrong.err;
}

TEST_F(Cli, VersionSaysWhichBuildAndPath) {
  CliResult r = run_cli("--version", dir_);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("mminfer 0.", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("(commit "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("build)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\ncpu path: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\noneDNN "), std::string::npos) << r.out;
}

TEST_F(Cli, BadArguments) {
  expect_clean_failure(run_cli("run " + quote(model_), dir_), "'x'", "no inputs");
  expect_clean_failure(run_cli("run " + quote(model_) + " --input x", dir_), "--input", "input without =");
  expect_clean_failure(run_cli("run " + quote(model_) + " --input y=" + quote(good_npy_), dir_), "'y'", "unknown input");
  expect_clean_failure(run_cli("run " + quote(model_) + " --frobnicate", dir_), "--frobnicate", "unknown option");
  expect_clean_failure(run_cli("run " + quote(model_) + " --threads abc --input x=" + quote(good_npy_), dir_), "--threads", "bad threads");
  expect_clean_failure(run_cli("bench " + quote(model_) + " --shape x=2xq", dir_), "--shape", "bad shape");
  expect_clean_failure(run_cli("bench " + quote(model_) + " --runs 0", dir_), "--runs", "zero runs");
  expect_clean_failure(run_cli("bench " + quote(model_) + " --int-range x=5:1", dir_), "--int-range", "bad range");
  expect_clean_failure(run_cli("bench " + quote(model_) + " --shape x=3x4", dir_), "'x'", "wrong fixed dim");
  expect_clean_failure(run_cli("frobnicate", dir_), "frobnicate", "unknown command");
  write_file(dir_.file("sym.onnx"), serialize(mlp_model(-1)));
  expect_clean_failure(run_cli("bench " + quote(dir_.file("sym.onnx")), dir_), "'x'", "symbolic shape without --shape");
}

TEST_F(Cli, BadPrecisionFlags) {
  std::string run = "run " + quote(model_) + " --input x=" + quote(good_npy_) + " --output-dir " + quote(dir_.file("out"));
  expect_clean_failure(run_cli(run + " --precision int4", dir_), "int4", "unknown precision");
  expect_clean_failure(run_cli(run + " --precision fp8", dir_), "unknown precision 'fp8'", "fp8");
  expect_clean_failure(run_cli(run + " --precision face=int8", dir_), "'face'", "unknown modality");
  expect_clean_failure(run_cli(run + " --precision vision", dir_), "unknown precision 'vision'", "modality without value");
  expect_clean_failure(run_cli(run + " --precision vision=int8,text", dir_), "MODALITY=PRECISION", "half a list");
  expect_clean_failure(run_cli(run + " --precision int8 --keep-fp32 '(proj'", dir_), "--keep-fp32", "bad regex");
  expect_clean_failure(run_cli(run + " --fp32-edges maybe", dir_), "--fp32-edges", "bad edges");
  expect_clean_failure(run_cli(run + " --int8-activations row", dir_), "--int8-activations", "bad granularity");
  expect_clean_failure(run_cli("bench " + quote(model_) + " --precision int8,", dir_), "--precision", "bench too");
  expect_clean_failure(run_cli("inspect " + quote(model_) + " --optimized --precision x=y", dir_), "--precision", "inspect too");
}

// The INT8 nodes show in inspect --optimized, and run succeeds with them.
TEST_F(Cli, Int8RunsAndInspectShowsIt) {
  std::string out_path = dir_.file("inspect.txt");
  std::string cmd = "'" + std::string(MMINFER_CLI) + "' inspect " + quote(model_) +
                    " --optimized --precision int8 --fp32-edges off >" + quote(out_path) + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_file(out_path);
  std::string out = read_file(out_path);
  EXPECT_NE(out.find("int8: 1 of 1"), std::string::npos) << out;
  EXPECT_NE(out.find("[int8] FusedMatMul"), std::string::npos) << out;
  cmd = "'" + std::string(MMINFER_CLI) + "' inspect " + quote(model_) + " --optimized --precision int8 >" + quote(out_path) + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_NE(read_file(out_path).find("int8: 0 of 1"), std::string::npos) << read_file(out_path);  // the only layer is an edge
  CliResult r = run_cli("run " + quote(model_) + " --input x=" + quote(good_npy_) + " --precision other=int8 --fp32-edges off" +
                            " --output-dir " + quote(dir_.file("out8")),
                        dir_);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(Cli, ExternalDataOutsideTheFolder) {
  onnx::ModelProto m = mlp_model();
  auto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_raw_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = w->add_external_data();
  e->set_key("location");
  e->set_value("../../../../../../etc/hostname");
  write_file(dir_.file("ext.onnx"), serialize(m));
  expect_clean_failure(run_cli("inspect " + quote(dir_.file("ext.onnx")), dir_), "etc/hostname", "external data outside");
}

TEST_F(Cli, BenchReportsTimePerOpType) {
  std::string out_path = dir_.file("bench.txt");
  std::string cmd = "'" + std::string(MMINFER_CLI) + "' bench " + quote(model_) +
                    " --runs 2 --warmup 1 --opt-level 0 --op-times --json >" + quote(out_path) + " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_file(out_path);
  // --json: the one object alone on stdout.
  std::string json = read_file(out_path);
  ASSERT_EQ(json.rfind("{\"model\":", 0), 0u) << json;
  EXPECT_EQ(json.find('\n'), json.size() - 1) << json;
  size_t ops = json.find("\"op_ms\":{");
  ASSERT_NE(ops, std::string::npos) << json;
  EXPECT_NE(json.find("\"MatMul\":", ops), std::string::npos) << json;
  CliResult table = run_cli("bench " + quote(model_) + " --runs 2 --warmup 1 --opt-level 0 --op-times", dir_);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("calls/run"), std::string::npos) << table.out;
}

// Bad images for `mminfer ocr`: one line each naming the problem; the other files still run.
TEST_F(Cli, OcrBadImages) {
  std::string ocr = "ocr --models " + quote(MMINFER_OCR_MODELS) + " ";
  expect_clean_failure(run_cli(ocr + quote(npy("empty.png", "")), dir_), "empty.png", "empty file");
  expect_clean_failure(run_cli(ocr + quote(npy("text.png", "just some text, not an image\n")), dir_), "text.png", "text named .png");
  // A PNG signature and IHDR declaring 30000 x 30000 pixels, and nothing else.
  std::string huge("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\x75\x30\0\0\x75\x30\x08\x02\0\0\0\0\0\0\0", 33);
  expect_clean_failure(run_cli(ocr + quote(npy("huge.png", huge)), dir_), "30000x30000", "decompression bomb header");
  expect_clean_failure(run_cli(ocr + quote(dir_.file("missing.png")), dir_), "missing.png", "missing file");
  expect_clean_failure(run_cli("ocr " + quote(npy("x.png", "")) + " --models " + quote(dir_.file("nowhere")), dir_), "nowhere",
                       "missing models");
  expect_clean_failure(run_cli("ocr " + quote(npy("x.png", "")) + " --pipeline " + quote(dir_.file("nowhere")), dir_),
                       "nowhere: no such pipeline folder", "missing pipeline folder");
}

TEST_F(Cli, GoodRunSucceedsOrFailsCleanly) {
  CliResult r = run_cli("run " + quote(model_) + " --input x=" + quote(good_npy_) + " --output-dir " + quote(dir_.file("out")), dir_);
  if (r.exit_code != 0) expect_clean_failure(r, "", "good run");
}

}  // namespace
}  // namespace robust
