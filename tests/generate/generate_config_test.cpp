// generation_config.json and config.json: the fields decoding uses, overrides, and one-line errors.
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include <unistd.h>

#include <gtest/gtest.h>

#include "generate/generation_config.h"
#include "generate/token_stream.h"

namespace mminfer::generate {
namespace {

std::string error_of(const std::string& config, const std::string& generation) {
  try {
    parse_generation_config(config, generation);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

TEST(GenerationConfig, ReadsAWhisperStyleFileAndIgnoresUnknownFields) {
  const GenerationConfig c = parse_generation_config(
      R"({"model_type": "whisper", "eos_token_id": 1, "bos_token_id": 1, "decoder_start_token_id": 50257, "pad_token_id": 50256})",
      R"({"alignment_heads": [[2, 2]], "begin_suppress_tokens": [220, 50256], "decoder_start_token_id": 50258,
          "eos_token_id": 50257, "forced_decoder_ids": [[1, null], [2, 50359], [3, 50363]], "is_multilingual": true,
          "lang_to_id": {"<|en|>": 50259}, "max_length": 448, "no_timestamps_token_id": 50363, "pad_token_id": 50257,
          "suppress_tokens": [1, 2, 7], "transformers_version": "4.31.0.dev0", "num_beams": 5,
          "early_stopping": "never", "length_penalty": 0.8})");
  EXPECT_EQ(c.eos_token_ids, (std::vector<TokenId>{50257}));
  EXPECT_EQ(c.bos_token_id, 1);  // from config.json, not overridden
  EXPECT_EQ(c.decoder_start_token_id, 50258);
  EXPECT_EQ(c.pad_token_id, 50257);
  EXPECT_EQ(c.max_length, 448u);
  EXPECT_EQ(c.begin_suppress_tokens, (std::vector<TokenId>{220, 50256}));
  EXPECT_EQ(c.suppress_tokens, (std::vector<TokenId>{1, 2, 7}));
  ASSERT_EQ(c.forced_decoder_ids.size(), 2u);  // the open language slot forces nothing
  EXPECT_EQ(c.forced_decoder_ids[1], (std::pair<size_t, TokenId>{3, 50363}));
  EXPECT_EQ(c.begin_suppress_index(1), 4u);
  EXPECT_EQ(c.num_beams, 5u);
  EXPECT_EQ(c.early_stopping, EarlyStopping::kNever);
  EXPECT_FLOAT_EQ(c.length_penalty, 0.8f);
}

TEST(GenerationConfig, SamplingFieldsEosListsAndLengths) {
  const GenerationConfig c = parse_generation_config(
      "", R"({"do_sample": true, "temperature": 0.6, "top_k": 20, "top_p": 0.9, "min_p": 0.05,
              "repetition_penalty": 1.1, "eos_token_id": [2, 32000], "max_new_tokens": 64, "max_length": 100,
              "no_repeat_ngram_size": 3, "stop_strings": ["</s>", "\n\n"], "min_new_tokens": 2})");
  EXPECT_TRUE(c.do_sample);
  EXPECT_FLOAT_EQ(c.temperature, 0.6f);
  EXPECT_EQ(c.top_k, 20u);
  EXPECT_EQ(c.eos_token_ids, (std::vector<TokenId>{2, 32000}));
  EXPECT_EQ(c.max_total_length(10), 74u);  // max_new_tokens wins over max_length
  EXPECT_EQ(c.stop_strings.size(), 2u);
  const StopRules rules = StopRules::from_config(c);
  EXPECT_EQ(rules.max_new_tokens, 64u);
  EXPECT_EQ(rules.stop_token_ids, c.eos_token_ids);
}

TEST(GenerationConfig, OlderFoldersKeepGenerationFieldsInConfigJson) {
  const GenerationConfig c = parse_generation_config(
      R"({"num_beams": 4, "max_length": 32, "text_config": {"eos_token_id": 7}, "decoder": {"pad_token_id": 3}})", "");
  EXPECT_EQ(c.num_beams, 4u);
  EXPECT_EQ(c.max_length, 32u);
  EXPECT_EQ(c.eos_token_ids, (std::vector<TokenId>{7}));
  EXPECT_EQ(c.pad_token_id, 3);
}

TEST(GenerationConfig, BadValuesNameTheFileAndField) {
  EXPECT_EQ(error_of("", R"({"temperature": 0})"), "generation_config.json: temperature: must be > 0, got 0");
  EXPECT_EQ(error_of("", R"({"top_p": 1.5})"), "generation_config.json: top_p: must be in (0, 1], got 1.5");
  EXPECT_EQ(error_of("", R"({"top_k": -1})"), "generation_config.json: top_k: must be an integer >= 0, got -1");
  EXPECT_EQ(error_of("", R"({"num_beams": 0})"), "generation_config.json: num_beams: must be an integer >= 1, got 0");
  EXPECT_EQ(error_of("", R"({"eos_token_id": "x"})"),
            "generation_config.json: eos_token_id: must be a token id (integer >= 0), got \"x\"");
  EXPECT_EQ(error_of("", R"({"early_stopping": "sometimes"})"),
            "generation_config.json: early_stopping: must be true, false or \"never\", got \"sometimes\"");
  EXPECT_EQ(error_of("", R"({"forced_decoder_ids": [[2, 5], [1, 6]]})"),
            "generation_config.json: forced_decoder_ids: indices must increase, got [[2,5],[1,6]]");
  EXPECT_EQ(error_of("", R"({"do_sample": "yes"})"), "generation_config.json: do_sample: must be true or false, got \"yes\"");
  EXPECT_EQ(error_of(R"({"eos_token_id": -3})", "{}"),
            "config.json: eos_token_id: must be a token id (integer >= 0), got -3");
  EXPECT_EQ(error_of("", "[1, 2]"), "generation_config.json: must be a JSON object");
  EXPECT_EQ(error_of("", "{").rfind("generation_config.json: not valid JSON", 0), 0u);
}

TEST(GenerationConfig, ReadsTheFilesOfAFolder) {
  const auto dir = std::filesystem::temp_directory_path() / ("mminfer_genconfig_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"eos_token_id": 5, "pad_token_id": 0})";
  std::ofstream(dir / "generation_config.json") << R"({"max_new_tokens": 9})";
  const GenerationConfig c = read_generation_config(dir);
  EXPECT_EQ(c.eos_token_ids, (std::vector<TokenId>{5}));
  EXPECT_EQ(c.max_new_tokens, 9u);
  std::filesystem::remove_all(dir);
  const GenerationConfig defaults = read_generation_config(dir);  // no files: Hugging Face's defaults
  EXPECT_EQ(defaults.max_length, 20u);
  EXPECT_EQ(defaults.top_k, 50u);
}

}  // namespace
}  // namespace mminfer::generate
