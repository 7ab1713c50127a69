// `mminfer embed` and `mminfer classify` on bad inputs and bad pipeline folders: one line each
// naming the input and the problem, the good inputs of the same command still answered.
// Runs on the clip folder tools/make_clip_pipeline.py generates (ctest fixture clip_pipeline).
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cli_util.h"

#ifndef MMINFER_CLIP_PIPELINE
#error "MMINFER_CLIP_PIPELINE must name the generated clip pipeline folder"
#endif

namespace robust {
namespace {

namespace fs = std::filesystem;

class CliEmbed : public ::testing::Test {
 protected:
  CliEmbed() : dir_("cli_embed") {}

  std::string file(const std::string& name, const std::string& bytes) {
    write_file(dir_.file(name), bytes);
    return dir_.file(name);
  }
  std::string good_image() const { return std::string(MMINFER_CLIP_PIPELINE) + "/reference/images/red.png"; }
  std::string embed(const std::string& rest) { return "embed --pipeline " + quote(MMINFER_CLIP_PIPELINE) + " --threads 1 " + rest; }
  // A pipeline folder holding the generated models and the given pipeline.json.
  std::string folder_with(const std::string& manifest) {
    fs::path d = dir_.file("pipe");
    fs::remove_all(d);
    fs::create_directories(d);
    for (const char* f : {"vision.onnx", "text.onnx", "tokenizer.json"}) fs::create_symlink(fs::path(MMINFER_CLIP_PIPELINE) / f, d / f);
    if (!manifest.empty()) write_file((d / "pipeline.json").string(), manifest);
    return d.string();
  }

  TempDir dir_;
};

const char* kClipFiles = R"("files": {"image_encoder": "vision.onnx", "text_encoder": "text.onnx", "tokenizer": "tokenizer.json"},
  "preprocess": {"image_size": 64})";

TEST_F(CliEmbed, BadImagesFailAloneTheRestRuns) {
  expect_clean_failure(run_cli(embed("--image " + quote(file("empty.png", ""))), dir_), "empty.png", "empty file");
  expect_clean_failure(run_cli(embed("--image " + quote(file("text.png", "just some text, not an image\n"))), dir_), "text.png",
                       "text named .png");
  // A PNG signature and IHDR declaring 30000 x 30000 pixels, and nothing else.
  std::string huge("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\x75\x30\0\0\x75\x30\x08\x02\0\0\0\0\0\0\0", 33);
  expect_clean_failure(run_cli(embed("--image " + quote(file("huge.png", huge))), dir_), "30000x30000", "decompression bomb header");
  expect_clean_failure(run_cli(embed("--image " + quote(dir_.file("missing.png"))), dir_), "missing.png", "missing file");
  expect_clean_failure(run_cli(embed("--image " + quote(dir_.path())), dir_), "not a regular file", "a folder");

  // One bad input among good ones: one error line, exit 1, the good ones printed in order.
  CliResult r = run_cli(embed("--json --image " + quote(good_image()) + " --image " + quote(dir_.file("empty.png")) +
                              " --text 'a photo of a cat.'"),
                        dir_);
  expect_clean_failure(r, "empty.png", "good and bad together");
  EXPECT_EQ(r.exit_code, 1);
  size_t first = r.out.find("\"embedding\""), error = r.out.find("\"error\""), last = r.out.rfind("\"embedding\"");
  EXPECT_TRUE(first < error && error < last && first != last) << r.out;
}

TEST_F(CliEmbed, BadTexts) {
  std::string mb(1000000, 'a');
  for (size_t i = 0; i < mb.size(); i += 8) mb[i] = ' ';
  expect_clean_failure(run_cli(embed("--text-file " + quote(file("big.txt", mb))), dir_), "over the limit of 65536 bytes",
                       "1 MB text file");
  // Under the kernel's 128 KiB limit for one argument, over ours.
  expect_clean_failure(run_cli(embed("--text " + std::string(70000, 'b')), dir_), "70000 bytes", "70 kB --text");
  expect_clean_failure(run_cli(embed("--text-file " + quote(file("bad.txt", "caf\xc3(\n"))), dir_), "offset 3",
                       "invalid UTF-8 file");
  // /bin/sh runs the command: its printf writes the byte.
  expect_clean_failure(run_cli(embed("--text \"$(printf 'ok \\377')\""), dir_), "offset 3", "invalid UTF-8 argument");
  expect_clean_failure(run_cli(embed("--text-file " + quote(dir_.file("none.txt"))), dir_), "none.txt", "missing text file");
  CliResult empty = run_cli(embed("--text ''"), dir_);
  EXPECT_EQ(empty.exit_code, 0) << empty.err;  // an empty text is a text: start and end tokens
}

TEST_F(CliEmbed, AudioOnAClipPipelineHasNoTower) {
  expect_clean_failure(run_cli(embed("--audio " + quote(file("a.wav", "RIFF"))), dir_), "has no audio tower", "audio on clip");
}

TEST_F(CliEmbed, BadPipelineFolders) {
  const std::string image = " --image " + quote(good_image());
  for (const std::string& cmd : {std::string("embed"), std::string("classify")}) {
    std::string extra = cmd == "classify" ? " --labels a,b" : "";
    expect_clean_failure(run_cli(cmd + " --pipeline " + quote(dir_.file("nowhere")) + image + extra, dir_),
                         "nowhere: no such pipeline folder", cmd + " unknown folder");
    expect_clean_failure(run_cli(cmd + " --pipeline " + quote(folder_with("")) + image + extra, dir_),
                         "pipeline.json: no such file", cmd + " no pipeline.json");
    expect_clean_failure(run_cli(cmd + " --pipeline " + quote(folder_with("{\"type\": \"clip\",")) + image + extra, dir_),
                         "pipeline.json: not JSON", cmd + " malformed pipeline.json");
    expect_clean_failure(run_cli(cmd + " --pipeline " + quote(folder_with("{\"type\": \"sam\", \"files\": {}}")) + image + extra, dir_),
                         "type 'sam' is not a pipeline type", cmd + " unknown type");
    expect_clean_failure(
        run_cli(cmd + " --pipeline " + quote(folder_with(std::string("{\"type\": \"clip\", ") + kClipFiles + ", \"logit_scale\": \"x\"}")) +
                    image + extra,
                dir_),
        "logit_scale must be a number", cmd + " bad logit_scale");
    expect_clean_failure(
        run_cli(cmd + " --pipeline " + quote(folder_with(R"({"type": "ocr", "files": {"det": "vision.onnx", "rec": "text.onnx", "keys": "tokenizer.json"}})")) +
                    image + extra,
                dir_),
        cmd == "embed" ? "an ocr pipeline makes no embeddings" : "classify needs a clip pipeline", cmd + " ocr folder");
  }
  CliResult usage = run_cli("embed --pipeline " + quote(MMINFER_CLIP_PIPELINE), dir_);
  EXPECT_EQ(usage.exit_code, 2) << "no inputs: usage";
  expect_clean_failure(run_cli(embed("stray.png --text a"), dir_), "stray.png", "positional argument");
}

TEST_F(CliEmbed, ClassifyLabelsAndImages) {
  std::string classify = "classify --pipeline " + quote(MMINFER_CLIP_PIPELINE) + " --threads 1 --image " + quote(good_image());
  CliResult ok = run_cli(classify + " --labels 'red, blue' --json", dir_);
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out.rfind("{\"results\":[{\"file\":", 0), 0u) << ok.out;
  EXPECT_NE(ok.out.find("\"label\":\"blue\""), std::string::npos) << ok.out;  // trimmed
  CliResult from_manifest = run_cli(classify, dir_);
  ASSERT_EQ(from_manifest.exit_code, 0) << from_manifest.err;
  EXPECT_NE(from_manifest.out.find("red square"), std::string::npos) << from_manifest.out;

  std::string no_labels = folder_with(std::string("{\"type\": \"clip\", ") + kClipFiles + "}");
  expect_clean_failure(run_cli("classify --pipeline " + quote(no_labels) + " --image " + quote(good_image()), dir_),
                       "no labels: give --labels", "no labels anywhere");
  expect_clean_failure(run_cli(classify + " --labels 'a,,b'", dir_), "label 2 is empty", "empty label");
  expect_clean_failure(run_cli(classify + " --labels a,b --templates 'a photo'", dir_), "template 'a photo' has no {}",
                       "template without {}");
  expect_clean_failure(run_cli(classify + " --labels a,b --templates \"$(printf '{} \\377')\"", dir_),
                       "label 'a' in template 1: text is not valid UTF-8: byte 0xff at offset 2", "invalid UTF-8 template");
  expect_clean_failure(run_cli(classify + " --labels a,b --image " + quote(file("empty.png", "")), dir_), "empty.png",
                       "an empty image among good ones");
  CliResult usage = run_cli("classify --pipeline " + quote(MMINFER_CLIP_PIPELINE) + " --labels a", dir_);
  EXPECT_EQ(usage.exit_code, 2) << "no images: usage";
}

}  // namespace
}  // namespace robust
