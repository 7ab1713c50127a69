// Byte-pair encoding: a piece starts as one symbol per character and adjacent pairs merge in
// the order of the merge list until none applies. Covers byte-level BPE (GPT-2, Whisper,
// tiktoken tables) and CLIP's variant that marks the end of a word with "</w>".
#pragma once
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "modal/text/model.h"

namespace mminfer::text {

struct BpeOptions {
  std::optional<std::string> unk_token;    // characters outside the vocabulary; else dropped
  std::string continuing_subword_prefix;   // on every symbol but a word's first
  std::string end_of_word_suffix;          // on a word's last symbol ("</w>" for CLIP)
  bool fuse_unk = false;                   // runs of unknown characters give one unk
  bool byte_fallback = false;              // unknown characters as <0xNN> tokens
  bool ignore_merges = false;              // a piece that is itself a token skips merging
};

class BpeModel : public Model {
 public:
  // Throws Error naming the merge when one side or its result is not in the vocabulary.
  BpeModel(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options);
  void tokenize(std::string_view piece, std::vector<int32_t>& ids) const override;
  const Vocab& vocab() const override { return vocab_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  const Merge* find_merge(int32_t left, int32_t right) const;
  void merge_short(std::vector<int32_t>& symbols) const;
  void merge_long(std::vector<int32_t>& symbols) const;
  void initial_symbols(std::string_view piece, std::vector<int32_t>& symbols) const;
  int32_t code_point_id(char32_t cp, bool first, bool last) const;

  Vocab vocab_;
  BpeOptions options_;
  std::optional<int32_t> unk_id_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) -> merge
  // Ids of single code points below kDirectCodePoints, alone and with the word-end suffix
  // (-1: not a token), so byte-level pieces skip a string lookup per character.
  static constexpr char32_t kDirectCodePoints = 1024;
  std::vector<int32_t> direct_, direct_last_;

  // Words repeat a lot in real text; caching their ids skips the merge loop. Long words are
  // not cached so one odd input cannot fill memory.
  static constexpr size_t kShortWord = 24;  // symbols; longer words take the heap path
  static constexpr size_t kCacheEntries = 1 << 16;
  static constexpr size_t kCacheMaxWordBytes = 128;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace mminfer::text
