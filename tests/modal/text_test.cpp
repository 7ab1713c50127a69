// Tokenizer unit tests: each stage on small hand-made vocabularies whose right answers can be
// worked out by hand, the CLIP context formatting, and bad input. The comparisons against
// tiktoken and Python references are in text_reference_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <thread>

#include "mminfer/status.h"
#include "modal/text/byte_level.h"
#include "modal/text/normalizer.h"
#include "modal/text/pre_tokenizer.h"
#include "modal/text/tokenizer.h"
#include "modal/text/unicode.h"
#include "text_test_util.h"

using mminfer::Error;
using nlohmann::json;
namespace tx = mminfer::text;
using text_test::data_path;

namespace {

// A model with one token per printable ASCII character (id = code - 32) and no merges, so the
// ids of a text are easy to write down; extra fields are merged into the top level.
json char_level(const json& extra = json::object()) {
  json vocab = json::object();
  for (int c = 32; c < 127; ++c) vocab[std::string(1, static_cast<char>(c))] = c - 32;
  json j = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}};
  j.update(extra);
  return j;
}

std::vector<int64_t> chars(const std::string& s) {
  std::vector<int64_t> ids;
  for (char c : s) ids.push_back(c - 32);
  return ids;
}

tx::Tokenizer make(const json& j) { return tx::Tokenizer::from_json(j.dump()); }

std::vector<std::string> pre_tokenize(const tx::PreTokenizer& p, const std::string& text) {
  std::vector<std::string> pieces{text};
  p.pre_tokenize(pieces);
  return pieces;
}

// The one-line error a bad tokenizer.json gives, or "" when it loads.
std::string load_error(const std::string& text) {
  try {
    tx::Tokenizer::from_json(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// --- Unicode ---------------------------------------------------------------------------------

TEST(TextUnicode, FindsTheFirstInvalidByte) {
  EXPECT_EQ(tx::find_invalid_utf8("plain ascii"), std::string::npos);
  EXPECT_EQ(tx::find_invalid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), std::string::npos);
  EXPECT_EQ(tx::find_invalid_utf8("abc\xFF"), 3u);
  EXPECT_EQ(tx::find_invalid_utf8("\xC0\xAF"), 0u);              // overlong '/'
  EXPECT_EQ(tx::find_invalid_utf8("x\xED\xA0\x80"), 1u);         // UTF-16 surrogate
  EXPECT_EQ(tx::find_invalid_utf8("xy\xF4\x90\x80\x80"), 2u);    // past U+10FFFF
  EXPECT_EQ(tx::find_invalid_utf8("ok\xE2\x82"), 2u);            // cut short
  EXPECT_EQ(tx::find_invalid_utf8("\x80"), 0u);                  // lone continuation byte
}

TEST(TextUnicode, ReplacesEachMaximalInvalidSubpartWithOneReplacementCharacter) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(tx::replace_invalid_utf8("a\xFF" "b"), "a" + fffd + "b");
  EXPECT_EQ(tx::replace_invalid_utf8("a\xE2\x82" "b"), "a" + fffd + "b");  // one truncated sequence
  EXPECT_EQ(tx::replace_invalid_utf8("\xC0\xAF"), fffd + fffd);            // C0 starts nothing valid
  EXPECT_EQ(tx::replace_invalid_utf8("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
}

TEST(TextUnicode, NormalFormsAndFullLowercase) {
  const std::string composed = "caf\xC3\xA9", decomposed = "cafe\xCC\x81";
  EXPECT_EQ(tx::normalize(decomposed, tx::NormalForm::kNFC), composed);
  EXPECT_EQ(tx::normalize(composed, tx::NormalForm::kNFD), decomposed);
  EXPECT_EQ(tx::normalize("\xEF\xAC\x81", tx::NormalForm::kNFKC), "fi");  // the ligature
  EXPECT_EQ(tx::lowercase("\xC3\x85NGSTR\xC3\x96M \xCE\xA3"), "\xC3\xA5ngstr\xC3\xB6m \xCF\x83");
  EXPECT_EQ(tx::lowercase("\xC4\xB0"), "i\xCC\x87");  // U+0130 lowercases to two code points
}

TEST(TextUnicode, ByteLevelAlphabetRoundTripsEveryByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  std::string mapped = tx::to_byte_level(all);
  EXPECT_EQ(tx::find_invalid_utf8(mapped), std::string::npos);
  EXPECT_EQ(tx::from_byte_level(mapped), all);
  EXPECT_EQ(tx::to_byte_level(" hi\n"), "\xC4\xA0hi\xC4\x8A");  // "Ġhi" + "Ċ", as in GPT-2's vocabulary
}

// --- normalizers -----------------------------------------------------------------------------

TEST(TextNormalizer, BertCleansControlsSpacesChineseAndAccents) {
  tx::BertNormalizer uncased({});
  EXPECT_EQ(uncased.normalize("H\xC3\xA9llo\tW\x01orld"), "hello world");
  EXPECT_EQ(uncased.normalize("\xE4\xBD\xA0\xE5\xA5\xBD"), " \xE4\xBD\xA0  \xE5\xA5\xBD ");
  EXPECT_EQ(uncased.normalize("a\xC2\xA0" "b\r\n"), "a b  ");
  tx::BertNormalizer cased({true, true, false, false});
  EXPECT_EQ(cased.normalize("H\xC3\xA9llo"), "H\xC3\xA9llo");
}

TEST(TextNormalizer, ReplaceStripPrependAndSequence) {
  auto clip_spaces = tx::ReplaceNormalizer::regex(R"(\s+)", " ");
  EXPECT_EQ(clip_spaces->normalize("a \t\r\n b\xC2\xA0\xC2\xA0" "c"), "a b c");
  EXPECT_EQ(tx::ReplaceNormalizer::literal("ab", "X")->normalize("abcabab"), "XcXX");
  EXPECT_EQ(tx::StripNormalizer(true, false).normalize("  x  "), "x  ");
  EXPECT_EQ(tx::StripNormalizer(true, true).normalize("\xE3\x80\x80x\t"), "x");
  EXPECT_EQ(tx::PrependNormalizer("_").normalize("x"), "_x");
  EXPECT_EQ(tx::PrependNormalizer("_").normalize(""), "");
  std::vector<std::unique_ptr<tx::Normalizer>> steps;
  steps.push_back(std::make_unique<tx::UnicodeNormalizer>(tx::NormalForm::kNFD));
  steps.push_back(std::make_unique<tx::StripAccentsNormalizer>());
  steps.push_back(std::make_unique<tx::LowercaseNormalizer>());
  EXPECT_EQ(tx::SequenceNormalizer(std::move(steps)).normalize("R\xC3\xA9SUM\xC3\x89"), "resume");
}

// --- pre-tokenizers --------------------------------------------------------------------------

TEST(TextPreTokenizer, SplitBehaviorsAndInvert) {
  using B = tx::SplitBehavior;
  using V = std::vector<std::string>;
  auto split = [](B b, bool invert = false) { return pre_tokenize(*tx::SplitPreTokenizer::literal("-", b, invert), "a-b--c-"); };
  EXPECT_EQ(split(B::kRemoved), (V{"a", "b", "c"}));
  EXPECT_EQ(split(B::kIsolated), (V{"a", "-", "b", "-", "-", "c", "-"}));
  EXPECT_EQ(split(B::kMergedWithPrevious), (V{"a-", "b-", "-", "c-"}));
  EXPECT_EQ(split(B::kMergedWithNext), (V{"a", "-b", "-", "-c", "-"}));
  EXPECT_EQ(split(B::kContiguous), (V{"a", "-", "b", "--", "c", "-"}));
  EXPECT_EQ(split(B::kRemoved, true), (V{"-", "-", "-", "-"}));
  // CLIP keeps the regex matches and drops the whitespace between them.
  auto clip = tx::SplitPreTokenizer::regex(R"('s|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+)", B::kRemoved, true);
  EXPECT_EQ(pre_tokenize(*clip, "it's 42 caf\xC3\xA9s!!"), (V{"it", "'s", "4", "2", "caf\xC3\xA9s", "!!"}));
}

TEST(TextPreTokenizer, ByteLevelSplitsLikeGpt2AndMapsBytes) {
  using V = std::vector<std::string>;
  tx::ByteLevelPreTokenizer gpt2(false, true);
  EXPECT_EQ(pre_tokenize(gpt2, "Hello world's  end"), (V{"Hello", "\xC4\xA0world", "'s", "\xC4\xA0", "\xC4\xA0" "end"}));
  tx::ByteLevelPreTokenizer prefixed(true, false);
  EXPECT_EQ(pre_tokenize(prefixed, "hi"), (V{"\xC4\xA0hi"}));
}

TEST(TextPreTokenizer, BertWhitespaceDigitsAndPunctuation) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pre_tokenize(*tx::CharClassPreTokenizer::bert(), " Hi,there!\xC2\xA0\xE2\x80\x94ok "),
            (V{"Hi", ",", "there", "!", "\xE2\x80\x94", "ok"}));
  EXPECT_EQ(pre_tokenize(*tx::make_whitespace_pre_tokenizer(), "Hey man!! 12ab"), (V{"Hey", "man", "!!", "12ab"}));
  // A combining accent stays in its word (Rust's \w takes marks; plain PCRE2 \w would split).
  EXPECT_EQ(pre_tokenize(*tx::make_whitespace_pre_tokenizer(), "cafe\xCC\x81?"), (V{"cafe\xCC\x81", "?"}));
  EXPECT_EQ(pre_tokenize(*tx::CharClassPreTokenizer::digits(false), "a123b4"), (V{"a", "123", "b", "4"}));
  EXPECT_EQ(pre_tokenize(*tx::CharClassPreTokenizer::digits(true), "a12"), (V{"a", "1", "2"}));
}

// --- models ----------------------------------------------------------------------------------

namespace {

json small_bpe(const json& model_extra = json::object()) {
  json model = {{"type", "BPE"},
                {"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}, {"aa", 6}, {"aaaa", 7}, {"<unk>", 8}, {"<0x78>", 9}}},
                {"merges", {"b c", "a b", "a bc", "a a", "aa aa"}}};
  model.update(model_extra);
  return {{"model", model}};
}

}  // namespace

TEST(TextBpe, MergesLowestRankFirstAndLeftmostOnTies) {
  auto t = make(small_bpe());
  EXPECT_EQ(t.tokenize("abc"), (std::vector<int32_t>{5}));    // b+c (rank 0) before a+b (rank 1)
  EXPECT_EQ(t.tokenize("ab"), (std::vector<int32_t>{3}));
  EXPECT_EQ(t.tokenize("aaaaa"), (std::vector<int32_t>{7, 0}));  // aa aa a, then aaaa a
  EXPECT_EQ(t.tokenize("cab"), (std::vector<int32_t>{2, 3}));
  // Twice, so the second answer comes from the cache.
  EXPECT_EQ(t.tokenize("abc"), (std::vector<int32_t>{5}));
  // Short words rescan, long ones use a heap: both give n/4 "aaaa", then "aa", then "a".
  for (size_t n : {5, 8, 23, 24, 25, 30, 31, 101, 1002}) {
    std::vector<int32_t> want(n / 4, 7);
    if (n % 4 >= 2) want.push_back(6);
    if (n % 2) want.push_back(0);
    EXPECT_EQ(t.tokenize(std::string(n, 'a')), want) << n;
  }
}

TEST(TextBpe, UnknownCharactersUnkFusedOrByteFallback) {
  // No unk token: unknown characters are dropped, as Hugging Face does, and a+b then merge.
  EXPECT_EQ(make(small_bpe()).tokenize("axyb"), (std::vector<int32_t>{3}));
  EXPECT_EQ(make(small_bpe({{"unk_token", "<unk>"}})).tokenize("axyb"), (std::vector<int32_t>{0, 8, 8, 1}));
  EXPECT_EQ(make(small_bpe({{"unk_token", "<unk>"}, {"fuse_unk", true}})).tokenize("axyb"), (std::vector<int32_t>{0, 8, 1}));
  EXPECT_EQ(make(small_bpe({{"unk_token", "<unk>"}, {"byte_fallback", true}})).tokenize("axyb"),
            (std::vector<int32_t>{0, 9, 8, 1}));  // x has a byte token, y does not
}

TEST(TextBpe, IgnoreMergesTakesWholeTokensAndSuffixMarksWordEnds) {
  json j = small_bpe({{"ignore_merges", true}});
  j["model"]["vocab"]["abca"] = 10;  // no merge makes it
  EXPECT_EQ(make(j).tokenize("abca"), (std::vector<int32_t>{10}));
  EXPECT_EQ(make(small_bpe()).tokenize("abca"), (std::vector<int32_t>{5, 0}));
  json clip = {{"model", {{"type", "BPE"}, {"end_of_word_suffix", "</w>"},
                          {"vocab", {{"a", 0}, {"b", 1}, {"a</w>", 2}, {"b</w>", 3}, {"ab</w>", 4}, {"ab", 5}}},
                          {"merges", {"a b</w>", "a b"}}}}};
  EXPECT_EQ(make(clip).tokenize("ab"), (std::vector<int32_t>{4}));
  EXPECT_EQ(make(clip).tokenize("ba"), (std::vector<int32_t>{1, 2}));
}

TEST(TextBpe, LongWordStaysFast) {
  // 400,000 'a's in one piece: the heap merge loop does this in well under a second, where a
  // rescan per merge would take minutes. No timing assertion; the ctest timeout is the guard.
  auto t = make(small_bpe());
  auto ids = t.tokenize(std::string(400000, 'a'));
  ASSERT_EQ(ids.size(), 100000u);
  for (int32_t id : ids) ASSERT_EQ(id, 7);
}

TEST(TextWordPiece, GreedyLongestMatchUnknownsAndMaxChars) {
  json j = {{"normalizer", {{"type", "BertNormalizer"}, {"lowercase", true}}},
            {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
            {"model", {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"max_input_chars_per_word", 9},
                       {"vocab", {{"[UNK]", 0}, {"un", 1}, {"##aff", 2}, {"##able", 3}, {"affable", 4}, {"u", 5}, {"##n", 6},
                                  {",", 7}, {"##a", 8}, {"##ff", 9}}}}}};
  auto t = make(j);
  EXPECT_EQ(t.tokenize("UnAffable, affable"), (std::vector<int32_t>{1, 2, 3, 7, 4}));
  EXPECT_EQ(t.tokenize("unaffablex"), (std::vector<int32_t>{0}));       // 10 chars > 9
  EXPECT_EQ(t.tokenize("unx affable!"), (std::vector<int32_t>{0, 4, 0}));  // "##x" and "!" are missing
  EXPECT_EQ(t.tokenize("unaff"), (std::vector<int32_t>{1, 2}));
}

// --- added tokens, post-processing, truncation, padding, decoding ----------------------------

TEST(TextAddedTokens, FoundBeforeSplittingWithStripAndWordFlags) {
  json added = json::array({{{"id", 200}, {"content", "<mask>"}, {"lstrip", true}, {"special", true}},
                            {{"id", 201}, {"content", "<r>"}, {"rstrip", true}, {"special", true}},
                            {{"id", 202}, {"content", "[x]"}, {"normalized", true}},
                            {{"id", 203}, {"content", "tok"}, {"single_word", true}, {"special", true}}});
  auto t = make(char_level({{"added_tokens", added}, {"normalizer", {{"type", "Lowercase"}}}}));
  auto with = [](std::vector<int64_t> a, std::vector<int64_t> b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  auto ids = [&](const std::string& s) { auto v = t.tokenize(s); return std::vector<int64_t>(v.begin(), v.end()); };
  EXPECT_EQ(ids("hi  <mask> x"), with(with(chars("hi"), {200}), chars(" x")));
  EXPECT_EQ(ids("a<r>   b"), with(with(chars("a"), {201}), chars("b")));
  EXPECT_EQ(ids("A[X]"), with(chars("a"), {202}));  // matched after lowercasing
  EXPECT_EQ(ids("tok tokens"), with({203}, chars(" tokens")));
  EXPECT_EQ(t.decode({200, 72, 73}), "h i");  // special skipped; no decoder: spaces between tokens
  EXPECT_EQ(t.decode({200, 72}, false), "<mask> h");
}

TEST(TextPostProcessor, TemplatePairTypeIdsAndLongestFirstTruncation) {
  json pp = {{"type", "TemplateProcessing"},
             {"single", {{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                         {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}}}},
             {"pair", {{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                       {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "B"}, {"type_id", 1}}}},
                       {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 1}}}}}},
             {"special_tokens", {{"[CLS]", {{"id", "[CLS]"}, {"ids", {100}}, {"tokens", {"[CLS]"}}}},
                                 {"[SEP]", {{"id", "[SEP]"}, {"ids", {101}}, {"tokens", {"[SEP]"}}}}}}};
  auto t = make(char_level({{"post_processor", pp}}));
  auto e = t.encode_pair("abcdef", "xyz");
  EXPECT_EQ(e.special_tokens_mask, (std::vector<int64_t>{1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(e.type_ids, (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1}));
  t.set_truncation(tx::Truncation{8});
  e = t.encode_pair("abcdef", "xyz");  // budget 5: the shorter keeps 5/2 = 2, the longer 3
  std::vector<int64_t> want{100};
  for (int64_t id : chars("abc")) want.push_back(id);
  want.push_back(101);
  for (int64_t id : chars("xy")) want.push_back(id);
  want.push_back(101);
  EXPECT_EQ(e.ids, want);
  EXPECT_EQ(e.type_ids, (std::vector<int64_t>{0, 0, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(e.special_tokens_mask, (std::vector<int64_t>{1, 0, 0, 0, 1, 0, 0, 1}));
  t.set_truncation(tx::Truncation{5, tx::TruncationStrategy::kLongestFirst, tx::Side::kLeft});
  e = t.encode("abcdef");
  EXPECT_EQ(e.ids, (std::vector<int64_t>{100, 'd' - 32, 'e' - 32, 'f' - 32, 101}));
  EXPECT_EQ(t.encode("abcdef", false).ids, chars("bcdef"));  // no specials: the whole budget is text
  t.set_truncation(tx::Truncation{1});
  EXPECT_THROW(t.encode("abc"), Error);  // two special tokens cannot fit in one
}

TEST(TextTokenizer, PaddingToLongestFixedMultipleAndLeft) {
  auto t = make(char_level());
  tx::Padding p;
  p.pad_id = 99;
  t.set_padding(p);
  auto batch = t.encode_batch({"ab", "abcd", ""});
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_EQ(batch[0].ids, (std::vector<int64_t>{65, 66, 99, 99}));
  EXPECT_EQ(batch[0].attention_mask, (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(batch[2].ids, (std::vector<int64_t>{99, 99, 99, 99}));
  p.multiple_of = 3;
  p.direction = tx::Side::kLeft;
  t.set_padding(p);
  batch = t.encode_batch({"ab", "abcd"});
  EXPECT_EQ(batch[0].ids, (std::vector<int64_t>{99, 99, 99, 99, 65, 66}));
  EXPECT_EQ(batch[0].attention_mask, (std::vector<int64_t>{0, 0, 0, 0, 1, 1}));
  p = tx::Padding{};
  p.to_fixed_length = true;
  p.length = 3;
  t.set_padding(p);
  EXPECT_EQ(t.encode("a").ids, (std::vector<int64_t>{65, 0, 0}));
  EXPECT_EQ(t.encode("abcd").ids.size(), 4u);  // padding never cuts
}

TEST(TextDecoder, WordPieceCleanupByteFallbackAndPartialBytes) {
  json wp = {{"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
             {"model", {{"type", "WordPiece"}, {"vocab", {{"[UNK]", 0}, {"un", 1}, {"##aff", 2}, {"##able", 3}, {",", 4}, {"ok", 5}, {".", 6}}}}}};
  EXPECT_EQ(make(wp).decode({1, 2, 3, 4, 5, 6}), "unaffable, ok.");
  json fb = {{"decoder", {{"type", "Sequence"}, {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}}},
             {"model", {{"type", "BPE"}, {"merges", json::array()},
                        {"vocab", {{"<0xE2>", 0}, {"<0x82>", 1}, {"<0xAC>", 2}, {"<0xFF>", 3}, {"x", 4}}}}}};
  EXPECT_EQ(make(fb).decode({4, 0, 1, 2, 4}), "x\xE2\x82\xAC" "x");
  EXPECT_EQ(make(fb).decode({3, 4}), "\xEF\xBF\xBDx");
  // A byte-level id sequence cut inside a character decodes with U+FFFD, never invalid UTF-8.
  json bl = {{"decoder", {{"type", "ByteLevel"}}},
             {"model", {{"type", "BPE"}, {"merges", json::array()}, {"vocab", {{tx::to_byte_level("\xE2"), 0}, {tx::to_byte_level("\x82"), 1}, {"a", 2}}}}}};
  EXPECT_EQ(make(bl).decode({2, 0, 1}), "a\xEF\xBF\xBD");
  EXPECT_THROW(make(bl).decode({7}), Error);
}

// --- CLIP formatting on our trained CLIP-style tokenizer ----------------------------------------

TEST(TextClip, LowercasesCleansSpacesAndFitsSeventySevenTokens) {
  auto t = tx::Tokenizer::from_file(data_path("clip_bpe_tokenizer.json"));
  const int64_t sot = *t.token_to_id("<|startoftext|>"), eot = *t.token_to_id("<|endoftext|>");
  ASSERT_EQ(eot, sot + 1);
  ASSERT_EQ(eot + 1, t.vocab_end());  // CLIP's text model finds the end token by argmax
  t.set_truncation(tx::Truncation{77});
  tx::Padding p;
  p.to_fixed_length = true;
  p.length = 77;
  p.pad_id = eot;
  t.set_padding(p);

  auto e = t.encode("A Photo of a CAT.");
  EXPECT_EQ(e.ids, t.encode("  a   photo\tof\r\na cat. ").ids);
  EXPECT_EQ(e.ids, t.encode("a photo of a cat.").ids);
  ASSERT_EQ(e.ids.size(), 77u);
  ASSERT_EQ(e.attention_mask.size(), 77u);
  const size_t n = static_cast<size_t>(std::count(e.attention_mask.begin(), e.attention_mask.end(), 1));
  EXPECT_EQ(n, t.tokenize("a photo of a cat.").size() + 2);
  EXPECT_EQ(e.ids[0], sot);
  EXPECT_EQ(e.ids[n - 1], eot);
  for (size_t i = n; i < 77; ++i) {
    EXPECT_EQ(e.ids[i], eot);
    EXPECT_EQ(e.attention_mask[i], 0);
  }
  EXPECT_EQ(t.decode(e.ids), "a photo of a cat .");

  auto long_text = t.encode(text_test::read_file(data_path("corpus.txt")));
  ASSERT_EQ(long_text.ids.size(), 77u);
  EXPECT_EQ(long_text.ids.front(), sot);
  EXPECT_EQ(long_text.ids.back(), eot);
  EXPECT_EQ(std::count(long_text.attention_mask.begin(), long_text.attention_mask.end(), 1), 77);

  auto empty = t.encode("");
  EXPECT_EQ(empty.ids[0], sot);
  EXPECT_EQ(empty.ids[1], eot);
  EXPECT_EQ(std::count(empty.attention_mask.begin(), empty.attention_mask.end(), 1), 2);
  auto batch = t.encode_batch({"a dog", "", "two cats on a sofa"});
  for (const auto& b : batch) EXPECT_EQ(b.ids.size(), 77u);
}

TEST(TextTokenizer, ThreadsSharingOneTokenizerAgree) {
  // The BPE word cache is shared; four threads encoding at once must see what one thread sees.
  auto t = tx::Tokenizer::from_file(data_path("clip_bpe_tokenizer.json"));
  std::vector<std::string> lines;
  std::istringstream corpus(text_test::read_file(data_path("corpus.txt")));
  for (std::string line; std::getline(corpus, line);) lines.push_back(line);
  std::vector<std::vector<int32_t>> want;
  for (const auto& line : lines) want.push_back(t.tokenize(line));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (int round = 0; round < 20; ++round)
        for (size_t i = 0; i < lines.size(); ++i) {
          size_t j = (i * 7 + k * 13 + round) % lines.size();
          if (t.tokenize(lines[j]) != want[j]) ++mismatches[k];
        }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, (std::vector<int>{0, 0, 0, 0}));
}

// --- bad input -------------------------------------------------------------------------------

TEST(TextBadInput, InvalidUtf8IsRejectedNamingTheByte) {
  auto t = tx::Tokenizer::from_file(data_path("clip_bpe_tokenizer.json"));
  try {
    t.encode("good text \xC3(");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "text is not valid UTF-8: byte 0xc3 at offset 10 starts no valid sequence");
  }
  try {
    t.encode_batch({"fine", "also fine", "bad \xED\xA0\x80"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch item 2: text is not valid UTF-8: byte 0xed at offset 4"), std::string::npos) << e.what();
  }
  // Callers who prefer substitution clean the text first.
  EXPECT_NO_THROW(t.encode(tx::replace_invalid_utf8("good text \xC3(")));
}

TEST(TextBadInput, EmptyTextGivesOnlyTheSpecialTokens) {
  EXPECT_TRUE(make(small_bpe()).tokenize("").empty());
  EXPECT_TRUE(make(small_bpe()).encode("").ids.empty());
  EXPECT_EQ(make(small_bpe()).decode({}), "");
  auto clip = tx::Tokenizer::from_file(data_path("clip_bpe_tokenizer.json"));
  EXPECT_EQ(clip.encode("").ids.size(), 2u);
  EXPECT_EQ(clip.encode(" \t\n ").ids.size(), 2u);
}

TEST(TextBadInput, MalformedTokenizerJsonGivesOneLineErrors) {
  const std::string good = small_bpe().dump();
  ASSERT_EQ(load_error(good), "");
  struct Case {
    std::string json, expect;
  };
  auto with_model = [](const json& patch) {
    json j = small_bpe();
    j["model"].update(patch);
    return j.dump();
  };
  auto with = [](const json& patch) {
    json j = small_bpe();
    j.update(patch);
    return j.dump();
  };
  std::vector<Case> cases = {
      {"", "not valid JSON"},
      {good.substr(0, good.size() / 2), "not valid JSON"},
      {"[1, 2, 3]", "top level: expected an object, got array"},
      {"{}", "top level: missing 'model'"},
      {R"({"model": {"type": "Unigram", "vocab": []}})", "model type 'Unigram' is not supported"},
      {R"({"model": {"vocab": {}}})", "model: missing 'type'"},
      {with_model({{"vocab", json::array()}}), "model.vocab: expected an object"},
      {with_model({{"vocab", {{"a", "zero"}}}}), "model.vocab[\"a\"]: expected an integer, got string"},
      {with_model({{"vocab", {{"a", -1}}}}), "model.vocab[\"a\"]: expected an integer in [0, 16777215], got -1"},
      {with_model({{"vocab", {{"a", 1e12}}}}), "model.vocab[\"a\"]: expected an integer"},
      {with_model({{"merges", {"a"}}}), "model.merges[0]: merge 'a' is not two tokens separated by one space"},
      {with_model({{"merges", {"a b c"}}}), "merge 'a b c' is not two tokens"},
      {with_model({{"merges", {{"a"}}}}), "model.merges[0]: expected a pair of tokens, got 1 items"},
      {with_model({{"merges", {"a z"}}}), "merge 0 'a z': 'z' is not in the vocabulary"},
      {with_model({{"merges", {"c c"}}}), "merge 0 'c c': the merged token 'cc' is not in the vocabulary"},
      {with_model({{"merges", 7}}), "model.merges: expected an array, got number"},
      {with_model({{"unk_token", "<nope>"}}), "BPE unk_token '<nope>' is not in the vocabulary"},
      {with_model({{"dropout", 0.1}}), "model.dropout: BPE dropout is random at inference time"},
      {with_model({{"type", "WordPiece"}, {"unk_token", "[UNK]"}}), "WordPiece unk_token '[UNK]' is not in the vocabulary"},
      {with({{"normalizer", {{"type", "Precompiled"}}}}), "normalizer: normalizer type 'Precompiled' is not supported"},
      {with({{"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"kind", "NFD"}}}}}}}),
       "normalizer.normalizers[1]: missing 'type'"},
      {with({{"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}}}}),
       "pre_tokenizer: regex '(unclosed' does not compile at offset 9"},
      {with({{"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Sideways"}}}}),
       "pre_tokenizer.behavior: unknown split behavior 'Sideways'"},
      {with({{"pre_tokenizer", {{"type", "Split"}, {"pattern", "a"}, {"behavior", "Isolated"}}}}),
       "pre_tokenizer.pattern: expected an object, got string"},
      {with({{"post_processor", {{"type", "TemplateProcessing"}, {"single", {{{"SpecialToken", {{"id", "[CLS]"}}}}}},
                                 {"special_tokens", json::object()}}}}),
       "post_processor.single[0].SpecialToken: special token '[CLS]' is not in special_tokens"},
      {with({{"post_processor", {{"type", "BertProcessing"}, {"sep", {"[SEP]"}}, {"cls", {"[CLS]", 1}}}}}),
       "post_processor.sep: expected [token, id]"},
      {with({{"decoder", {{"type", "CTC"}}}}), "decoder type 'CTC' is not supported"},
      {with({{"added_tokens", {{{"id", 5}, {"content", ""}}}}}), "added_tokens[0]: empty content"},
      {with({{"added_tokens", {{{"content", "x"}}}}}), "added_tokens[0]: missing 'id'"},
      {with({{"truncation", {{"max_length", "77"}}}}), "truncation.max_length: expected an integer, got string"},
      {with({{"padding", {{"strategy", {{"Fixed", 0}}}}}}), "padding.strategy.Fixed: expected an integer in [1,"},
      {with({{"padding", {{"direction", "Up"}}}}), "padding.direction: expected Right or Left, got 'Up'"},
      {std::string("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a\\nb\"]}}"),
       "merge 'a\\nb' is not two tokens"},
  };
  json deep = {{"type", "Lowercase"}};
  for (int i = 0; i < 200; ++i) deep = {{"type", "Sequence"}, {"normalizers", {deep}}};
  cases.push_back({with({{"normalizer", deep}}), "nested more than 64 levels deep"});
  for (const auto& c : cases) {
    std::string error = load_error(c.json);
    EXPECT_NE(error.find(c.expect), std::string::npos) << "json: " << c.json.substr(0, 200) << "\nerror: " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
  EXPECT_THROW(tx::Tokenizer::from_file("/nonexistent/tokenizer.json"), Error);
}

TEST(TextBadInput, TruncatedAndMutatedFilesNeverCrash) {
  // Every prefix of a real file, and single-byte changes through it, load or fail with one line.
  const std::string text = text_test::read_file(data_path("clip_bpe_tokenizer.json"));
  ASSERT_FALSE(text.empty());
  size_t errors = 0, loads = 0;
  auto attempt = [&](const std::string& s) {
    std::string e = load_error(s);
    (e.empty() ? loads : errors)++;
    EXPECT_EQ(e.find('\n'), std::string::npos);
  };
  for (size_t cut = 0; cut < text.size(); cut += 97) attempt(text.substr(0, cut));
  const char replacements[] = {'"', '}', ']', '0', '-', 'x', ' ', '\\', '\0', '\xFF'};
  for (size_t at = 0, k = 0; at < text.size(); at += 53, ++k) {
    std::string s = text;
    s[at] = replacements[k % sizeof replacements];
    attempt(s);
  }
  EXPECT_GT(errors, 100u);
  std::cout << "[ mutated  ] " << errors << " rejected with one line, " << loads << " still load\n";
}
