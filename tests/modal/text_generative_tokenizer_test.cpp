// The tokenizers of the generative test models (tools/make_generative_models.py, ctest fixture
// generative_models) through our own tokenizer: the prompts encode to the ids the torch
// reference started from, the ids decode back to the prompts, every corpus line round-trips,
// the tokens torch generated decode, and the special ids agree with config.json.
#include <gtest/gtest.h>

#include <algorithm>

#include "modal/text/tokenizer.h"
#include "text_test_util.h"

namespace tx = mminfer::text;
using text_test::escaped;
using text_test::ids_of;
using text_test::read_file;

namespace {

std::string model_path(const std::string& model, const std::string& name) {
  return std::string(MMINFER_GENERATIVE_MODELS) + "/" + model + "/" + name;
}

nlohmann::json read_json(const std::string& path) {
  std::string text = read_file(path);
  if (text.empty()) ADD_FAILURE() << path << " is missing or empty (the generative_models fixture makes it)";
  return text.empty() ? nlohmann::json::object() : nlohmann::json::parse(text);
}

std::vector<int64_t> widen(const std::vector<int32_t>& v) { return std::vector<int64_t>(v.begin(), v.end()); }

class GenerativeTokenizer : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(GenerativeTokenizer, CorpusLinesRoundTrip) {
  auto t = tx::Tokenizer::from_file(model_path(GetParam(), "tokenizer.json"));
  auto lines = text_test::read_file(std::string(MMINFER_TEXT_DATA) + "/corpus.txt");
  ASSERT_FALSE(lines.empty());
  size_t start = 0, count = 0;
  while (start < lines.size()) {
    size_t end = lines.find('\n', start);
    std::string line = lines.substr(start, end == std::string::npos ? std::string::npos : end + 1 - start);
    EXPECT_EQ(t.decode(widen(t.tokenize(line)), false), line) << "line \"" << escaped(line) << "\"";
    ++count;
    start = end == std::string::npos ? lines.size() : end + 1;
  }
  EXPECT_GT(count, 40u);
}

TEST_P(GenerativeTokenizer, GeneratedTokensDecodeAndSpecialsMatchConfig) {
  auto t = tx::Tokenizer::from_file(model_path(GetParam(), "tokenizer.json"));
  auto config = read_json(model_path(GetParam(), "config.json"));
  auto ref = read_json(model_path(GetParam(), "reference/reference.json"));
  ASSERT_TRUE(config.contains("vocab_size"));
  EXPECT_EQ(t.vocab_end(), config["vocab_size"].get<int64_t>());
  auto tokenizer_config = read_json(model_path(GetParam(), "tokenizer_config.json"));
  EXPECT_EQ(t.id_to_token(config["eos_token_id"].get<int64_t>()),
            std::optional<std::string>(tokenizer_config["eos_token"].get<std::string>()));
  if (config.contains("decoder_start_token_id")) {
    EXPECT_EQ(t.id_to_token(config["decoder_start_token_id"].get<int64_t>()),
              std::optional<std::string>("<|startoftranscript|>"));
  }
  ASSERT_FALSE(ref["cases"].empty());
  for (const auto& c : ref["cases"]) {
    for (const auto& row : c["tokens"]) {
      // Random weights make random text: decoding must work, and what it decodes to re-encodes
      // to text that decodes the same (byte-level BPE loses nothing).
      std::string text = t.decode(ids_of(row), false);
      EXPECT_FALSE(text.empty());
      EXPECT_EQ(t.decode(widen(t.tokenize(text)), false), text);
    }
  }
}

TEST(GenerativeTokenizerLlama, PromptsEncodeToTheIdsTorchStartedFrom) {
  auto t = tx::Tokenizer::from_file(model_path("llama-tiny", "tokenizer.json"));
  auto ref = read_json(model_path("llama-tiny", "reference/reference.json"));
  size_t prompts = 0;
  for (const auto& c : ref["cases"]) {
    for (size_t i = 0; i < c["prompts"].size(); ++i) {
      const std::string prompt = c["prompts"][i];
      const auto want = ids_of(c["prompt_ids"][i]);
      EXPECT_EQ(widen(t.tokenize(prompt)), want) << "prompt \"" << prompt << "\"";
      EXPECT_EQ(t.decode(want), prompt);
      ++prompts;
    }
  }
  EXPECT_EQ(prompts, 4u);
}

TEST(GenerativeTokenizerVlm, ChatPromptsWithTheImageExpandedEncodeToTheIdsTorchStartedFrom) {
  // The processor's expansion for one image without splitting (reference.json states it):
  // <image> -> <fake_token_around_image><global-img>, image_seq_len x <image>, <fake_token_around_image>.
  auto t = tx::Tokenizer::from_file(model_path("vlm-tiny", "tokenizer.json"));
  auto ref = read_json(model_path("vlm-tiny", "reference/reference.json"));
  auto config = read_json(model_path("vlm-tiny", "config.json"));
  ASSERT_TRUE(ref.contains("image_seq_len"));
  const int64_t image_seq_len = ref["image_seq_len"], image_id = config["image_token_id"];
  EXPECT_EQ(t.token_to_id("<image>"), std::optional<int64_t>(image_id));
  std::string block = "<fake_token_around_image><global-img>";
  for (int64_t i = 0; i < image_seq_len; ++i) block += "<image>";
  block += "<fake_token_around_image>";
  size_t prompts = 0;
  for (const auto& c : ref["cases"]) {
    for (size_t i = 0; i < c["prompts"].size(); ++i) {
      std::string prompt = c["prompts"][i];
      ASSERT_EQ(prompt.find("<|im_start|>User:<image>"), 0u) << prompt;
      prompt.replace(prompt.find("<image>"), 7, block);
      const auto want = ids_of(c["prompt_ids"][i]);
      const auto got = widen(t.tokenize(prompt));
      EXPECT_EQ(got, want) << "prompt \"" << escaped(prompt) << "\"";
      EXPECT_EQ(std::count(got.begin(), got.end(), image_id), image_seq_len);
      EXPECT_EQ(t.decode(want, false), prompt);
      ++prompts;
    }
  }
  EXPECT_EQ(prompts, 4u);
}

INSTANTIATE_TEST_SUITE_P(Models, GenerativeTokenizer, ::testing::Values("llama-tiny", "whisper-tiny-test", "vlm-tiny"));
