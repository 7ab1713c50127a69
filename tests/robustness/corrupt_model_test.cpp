// Broken model files: every one must end in a one-line Status error (or a clean success),
// never a crash, hang or sanitizer report.
#include <filesystem>

#include <gtest/gtest.h>

#include "robust_util.h"

namespace robust {
namespace {

using mminfer::Session;
using mminfer::SessionOptions;
using mminfer::Status;

Status load_path(const std::string& path) {
  std::unique_ptr<Session> s;
  return Session::load(path, SessionOptions{}, &s);
}

Status load_bytes(const std::string& bytes, const std::string& dir = ".") {
  std::unique_ptr<Session> s;
  return Session::load_from_bytes(bytes, dir, SessionOptions{}, &s);
}

std::vector<std::string> seeds() {
  return {serialize(mlp_model()), serialize(conv_model()), serialize(gather_model())};
}

TEST(CorruptModel, SeedsAreValid) {
  for (const std::string& bytes : seeds()) {
    Status s = load_bytes(bytes);
    // The kernels may still be missing while the engine grows; the file itself must parse.
    if (!s.is_ok()) {
      EXPECT_EQ(s.message().find("not a valid ONNX"), std::string::npos) << s.message();
    }
    EXPECT_EQ(status_problem(s), "");
  }
}

TEST(CorruptModel, EveryTruncation) {
  int failures = 0;
  for (const std::string& bytes : seeds()) {
    size_t stride = bytes.size() > 2000 ? 7 : 1;
    for (size_t len = 0; len < bytes.size(); len += stride) {
      Outcome o = load_and_run(bytes.substr(0, len), ".");
      EXPECT_EQ(o.problem, "") << "prefix of " << len << " of " << bytes.size() << " bytes";
      failures += !o.loaded;
    }
  }
  EXPECT_GT(failures, 0);
}

TEST(CorruptModel, BitFlips) {
  Rng rng(0xB17F11B5);
  int loaded = 0, total = 0;
  for (const std::string& seed : seeds()) {
    for (int variant = 0; variant < 1200; ++variant) {
      std::string bytes = seed;
      int flips = 1 + static_cast<int>(rng.below(4));
      for (int f = 0; f < flips; ++f) bytes[rng.below(bytes.size())] ^= static_cast<char>(1u << rng.below(8));
      Outcome o = load_and_run(bytes, ".");
      EXPECT_EQ(o.problem, "") << "seed of " << seed.size() << " bytes, variant " << variant;
      loaded += o.loaded;
      ++total;
    }
  }
  std::printf("bit flips: %d of %d variants still loaded\n", loaded, total);
}

TEST(CorruptModel, RandomBytes) {
  Rng rng(42);
  for (int i = 0; i < 500; ++i) {
    std::string bytes(1 + rng.below(4096), '\0');
    for (char& c : bytes) c = static_cast<char>(rng.next());
    Outcome o = load_and_run(bytes, ".");
    EXPECT_EQ(o.problem, "") << "random file " << i;
  }
}

TEST(CorruptModel, EmptyFile) {
  TempDir dir("empty");
  write_file(dir.file("empty.onnx"), "");
  Status s = load_path(dir.file("empty.onnx"));
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(status_problem(s, "empty"), "");
  s = load_bytes("");
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(status_problem(s, "empty"), "");
}

TEST(CorruptModel, DirectoryAsModel) {
  TempDir dir("dir");
  std::filesystem::create_directories(dir.file("model.onnx"));
  Status s = load_path(dir.file("model.onnx"));
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(status_problem(s, "model.onnx"), "");
}

TEST(CorruptModel, MissingFileAndSpecialFiles) {
  Status s = load_path("/nonexistent/dir/model.onnx");
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(status_problem(s, "/nonexistent/dir/model.onnx"), "");
  // Devices must be refused, not read forever.
  for (const char* dev : {"/dev/zero", "/dev/null", "/dev/urandom"}) {
    s = load_path(dev);
    EXPECT_FALSE(s.is_ok()) << dev;
    EXPECT_EQ(status_problem(s), "") << dev;
  }
  s = load_path("");
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(status_problem(s), "");
}

TEST(CorruptModel, NotProtobufText) {
  for (const std::string& text : {std::string("ir_version: 7\ngraph { }\n"), std::string("\x93NUMPY\x01\x00", 8),
                                  std::string(1000, '\xff'), std::string(1000, '\0')}) {
    Outcome o = load_and_run(text, ".");
    EXPECT_EQ(o.problem, "");
    EXPECT_FALSE(o.loaded);
  }
}

// --- external data ------------------------------------------------------------------

// mlp_model with W moved to external data at `location` (offset/length optional).
std::string external_mlp(const std::string& location, const std::string& offset = "", const std::string& length = "") {
  onnx::ModelProto m = mlp_model();
  auto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_raw_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const char* k, const std::string& v) {
    auto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", location);
  if (!offset.empty()) add("offset", offset);
  if (!length.empty()) add("length", length);
  return serialize(m);
}

std::string w_bytes() { return mlp_model().graph().initializer(0).raw_data(); }

TEST(ExternalData, ValidFileLoads) {
  TempDir dir("ext-ok");
  write_file(dir.file("w.bin"), "junk" + w_bytes());
  write_file(dir.file("m.onnx"), external_mlp("w.bin", "4", "48"));
  Status s = load_path(dir.file("m.onnx"));
  EXPECT_EQ(status_problem(s), "");
  if (!s.is_ok()) {
    EXPECT_EQ(s.message().find("external"), std::string::npos) << s.message();
  }
}

struct ExternalCase {
  const char* what;
  std::string location, offset, length;
  const char* mention;
};

TEST(ExternalData, BadReferencesFailCleanly) {
  TempDir outer("ext-bad");
  std::string dir = outer.file("model");
  std::filesystem::create_directories(dir + "/sub");
  write_file(outer.file("secret.bin"), w_bytes());
  write_file(dir + "/short.bin", w_bytes().substr(0, 20));
  write_file(dir + "/w.bin", w_bytes());
  std::error_code ec;
  std::filesystem::create_symlink(outer.file("secret.bin"), dir + "/link.bin", ec);
  std::filesystem::create_symlink(outer.path(), dir + "/up", ec);
  const std::vector<ExternalCase> cases = {
      {"parent folder", "../secret.bin", "", "", "../secret.bin"},
      {"nested parent", "sub/../../secret.bin", "", "", "secret.bin"},
      {"absolute", outer.file("secret.bin"), "", "", "secret.bin"},
      {"missing", "missing.bin", "", "", "missing.bin"},
      {"short", "short.bin", "", "", "short.bin"},
      {"directory", "sub", "", "", "'W'"},
      {"empty location", "", "", "", "'W'"},
      {"offset past end", "w.bin", "4096", "", "'W'"},
      {"negative offset", "w.bin", "-8", "", "'W'"},
      {"offset not a number", "w.bin", "abc", "", "offset"},
      {"huge length", "w.bin", "0", "99999999999999999", "'W'"},
      {"overflowing length", "w.bin", "8", "9223372036854775807", "'W'"},
      {"length too small", "w.bin", "0", "8", "'W'"},
      {"symlink out of the folder", "link.bin", "", "", "link.bin"},
      {"symlinked folder out", "up/secret.bin", "", "", "secret.bin"},
  };
  for (const ExternalCase& c : cases) {
    std::string path = dir + "/m.onnx";
    write_file(path, external_mlp(c.location, c.offset, c.length));
    Status s = load_path(path);
    EXPECT_FALSE(s.is_ok()) << c.what;
    EXPECT_EQ(status_problem(s, c.mention), "") << c.what;
    // The same bytes through load_from_bytes with the folder as base.
    s = load_bytes(external_mlp(c.location, c.offset, c.length), dir);
    EXPECT_FALSE(s.is_ok()) << c.what;
    EXPECT_EQ(status_problem(s, c.mention), "") << c.what;
  }
}

TEST(ExternalData, HugeDeclaredShapeIsRefusedBeforeAllocating) {
  // 4e9 x 4 floats claimed, 48 bytes present: must fail fast on the size, not allocate 16 GiB.
  onnx::ModelProto m = mlp_model();
  auto* w = m.mutable_graph()->mutable_initializer(0);
  w->set_dims(0, 4000000000LL);
  Status s = load_bytes(serialize(m));
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(status_problem(s, "'W'"), "");
  w->set_dims(0, 1LL << 62);
  w->set_dims(1, 1LL << 62);
  s = load_bytes(serialize(m));
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(status_problem(s, "'W'"), "");
}

}  // namespace
}  // namespace robust
