// The digest of a model version's files: it changes when any file's bytes or name change.
#include "serve/folder_digest.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "mminfer/status.h"

namespace mminfer::serve {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
}

TEST(FolderDigest, FollowsEveryFilesBytesAndName) {
  fs::path dir = fs::temp_directory_path() / ("mminfer_digest_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  fs::remove_all(dir);
  write(dir / "model.onnx", "weights v1");
  write(dir / "sub" / "tokenizer.json", "{}");
  std::string a = folder_digest(dir.string());
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(folder_digest(dir.string()), a);
  write(dir / "model.onnx", "weights v2");  // same size, other bytes
  std::string b = folder_digest(dir.string());
  EXPECT_NE(b, a);
  fs::rename(dir / "sub" / "tokenizer.json", dir / "sub" / "tokenizer2.json");
  EXPECT_NE(folder_digest(dir.string()), b);
  fs::remove_all(dir);
  EXPECT_THROW(folder_digest(dir.string()), Error);
}

}  // namespace
}  // namespace mminfer::serve
