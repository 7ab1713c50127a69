// Our tokenizers against independent references on the test corpus (tests/data/text/corpus.txt):
// tiktoken itself (Rust core, via its npm package) for GPT-2/r50k, cl100k and o200k tables
// converted to tokenizer.json, a plain Python BERT tokenizer for WordPiece, and a Python
// OpenAI-style CLIP encoder for our trained CLIP tokenizer. The data comes from the
// text_reference_* ctest fixtures (tools/tiktoken_reference.js, make_wordpiece_vocab.py,
// train_bpe.py). Also the 1 MB timings (CPU ms of one thread), printed, never asserted.
#include <gtest/gtest.h>

#include <iostream>
#include <random>

#include "modal/text/tokenizer.h"
#include "text_test_util.h"

namespace tx = mminfer::text;
using text_test::escaped;
using text_test::generated_path;
using text_test::ids_of;

namespace {

std::vector<int64_t> widen(const std::vector<int32_t>& v) { return std::vector<int64_t>(v.begin(), v.end()); }

class TextReferenceTiktoken : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(TextReferenceTiktoken, IdsMatchTiktokenOnTheCorpus) {
  const std::string name = GetParam();
  auto t = tx::Tokenizer::from_file(generated_path(name + ".tokenizer.json"));
  auto cases = text_test::read_cases(generated_path(name + ".expected.json"));
  ASSERT_GT(cases.size(), 40u);
  size_t identical = 0, tokens = 0, round_trips = 0;
  for (const auto& c : cases) {
    const std::string text = c["text"];
    const auto want = ids_of(c["ids"]);
    const auto got = widen(t.tokenize(text));
    tokens += want.size();
    if (got == want) ++identical;
    else ADD_FAILURE() << name << " differs from tiktoken on \"" << escaped(text) << "\"";
    if (t.decode(got, false) == text) ++round_trips;  // byte-level BPE loses nothing
  }
  std::cout << "[ " << name << " ] identical ids on " << identical << "/" << cases.size() << " cases ("
            << tokens << " tokens), decode round trips " << round_trips << "/" << cases.size() << "\n";
  EXPECT_EQ(round_trips, cases.size());
}

INSTANTIATE_TEST_SUITE_P(Encodings, TextReferenceTiktoken,
                         ::testing::Values("gpt2", "r50k_base", "cl100k_base", "o200k_base"));

TEST(TextReferenceWordPiece, IdsMatchPythonBertOnTheCorpus) {
  for (const std::string name : {"wordpiece_uncased", "wordpiece_cased"}) {
    auto t = tx::Tokenizer::from_file(generated_path(name + ".tokenizer.json"));
    auto cases = text_test::read_cases(generated_path(name + ".expected.json"));
    ASSERT_GT(cases.size(), 40u);
    size_t identical = 0, unknown = 0;
    const int64_t unk = *t.token_to_id("[UNK]");
    for (const auto& c : cases) {
      const std::string text = c["text"];
      tx::Encoding e = c.contains("pair") ? t.encode_pair(text, c["pair"].get<std::string>()) : t.encode(text);
      const auto want = ids_of(c["ids"]);
      unknown += std::count(want.begin(), want.end(), unk);
      if (e.ids == want && e.type_ids == ids_of(c["type_ids"])) ++identical;
      else ADD_FAILURE() << name << " differs from the Python reference on \"" << escaped(text) << "\"";
    }
    std::cout << "[ " << name << " ] identical ids and type ids on " << identical << "/" << cases.size()
              << " cases, " << unknown << " [UNK] among them\n";
    EXPECT_GT(unknown, 0u);  // the unknown-word paths ran
  }
}

TEST(TextReferenceClip, IdsAndContextOf77MatchPythonClipEncoder) {
  auto t = tx::Tokenizer::from_file(text_test::data_path("clip_bpe_tokenizer.json"));
  auto cases = text_test::read_cases(generated_path("clip_bpe_expected.json"));
  ASSERT_GT(cases.size(), 40u);
  size_t identical = 0;
  for (const auto& c : cases) {
    const std::string text = c["text"];
    if (t.encode(text).ids == ids_of(c["ids"])) ++identical;
    else ADD_FAILURE() << "clip differs from the Python reference on \"" << escaped(text) << "\"";
  }
  tx::Padding p;
  p.to_fixed_length = true;
  p.length = 77;
  p.pad_id = *t.token_to_id("<|endoftext|>");
  t.set_padding(p);
  t.set_truncation(tx::Truncation{77});
  for (const auto& c : cases) {
    tx::Encoding e = t.encode(c["text"].get<std::string>());
    EXPECT_EQ(e.ids, ids_of(c["ids_77"])) << escaped(c["text"]);
    EXPECT_EQ(e.attention_mask, ids_of(c["mask_77"])) << escaped(c["text"]);
  }
  std::cout << "[ clip ] identical ids on " << identical << "/" << cases.size() << " cases\n";
}

// --- speed ------------------------------------------------------------------------------------

namespace {

// About 1 MB of text three ways: the corpus repeated (words repeat, as in real text), random
// words (every word new, so the BPE cache misses), and one 1 MB word (no whitespace at all).
std::vector<std::pair<std::string, std::string>> megabyte_texts() {
  const size_t size = 1 << 20;
  std::string corpus = text_test::read_file(text_test::data_path("corpus.txt")), repeated;
  while (repeated.size() < size) repeated += corpus;
  std::mt19937 rng(7);
  std::string random_words;
  while (random_words.size() < size) {
    int n = 2 + static_cast<int>(rng() % 10);
    for (int i = 0; i < n; ++i) random_words += static_cast<char>('a' + rng() % 26);
    random_words += ' ';
  }
  std::string one_word;
  while (one_word.size() < size) one_word += static_cast<char>('a' + rng() % 26);
  return {{"corpus repeated", repeated}, {"random words", random_words}, {"one 1 MB word", one_word}};
}

}  // namespace

TEST(TextReferenceSpeed, OneMegabyteOfText) {
  struct Named {
    std::string name, path;
  };
  const std::vector<Named> tokenizers = {{"cl100k_base", generated_path("cl100k_base.tokenizer.json")},
                                         {"gpt2", generated_path("gpt2.tokenizer.json")},
                                         {"clip (ours)", text_test::data_path("clip_bpe_tokenizer.json")},
                                         {"wordpiece", generated_path("wordpiece_uncased.tokenizer.json")}};
  const auto texts = megabyte_texts();
  for (const auto& [name, path] : tokenizers) {
    double t0 = text_test::thread_cpu_ms();
    auto t = tx::Tokenizer::from_file(path);
    const double load_ms = text_test::thread_cpu_ms() - t0;
    std::cout << "[ speed ] " << name << ": load " << static_cast<int>(load_ms) << " ms";
    for (const auto& [label, text] : texts) {
      t0 = text_test::thread_cpu_ms();
      size_t n = t.tokenize(text).size();
      const double ms = text_test::thread_cpu_ms() - t0;
      EXPECT_GT(n, 0u);
      std::cout << "; " << label << " " << static_cast<int>(ms) << " ms (" << n << " tokens)";
    }
    std::cout << "\n";
  }
}
