#include "modal/text/bpe_model.h"

#include <cstdio>
#include <queue>

#include "core/one_line.h"
#include "modal/text/unicode.h"
#include "mminfer/status.h"

namespace mminfer::text {

namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

BpeModel::BpeModel(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options)
    : vocab_(std::move(vocab)), options_(std::move(options)) {
  if (options_.unk_token) {
    unk_id_ = vocab_.find(*options_.unk_token);
    if (!unk_id_) throw Error("BPE unk_token '" + one_line(*options_.unk_token) + "' is not in the vocabulary");
  }
  merges_.reserve(merges.size());
  const std::string& prefix = options_.continuing_subword_prefix;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    auto where = [&] { return "merge " + std::to_string(rank) + " '" + one_line(left + " " + right) + "': "; };
    auto left_id = vocab_.find(left), right_id = vocab_.find(right);
    if (!left_id) throw Error(where() + "'" + one_line(left) + "' is not in the vocabulary");
    if (!right_id) throw Error(where() + "'" + one_line(right) + "' is not in the vocabulary");
    // The right side carries the continuation prefix, which the merged token has only once.
    bool strip = !prefix.empty() && right.compare(0, prefix.size(), prefix) == 0;
    std::string merged = left;
    merged.append(right, strip ? prefix.size() : 0);
    auto merged_id = vocab_.find(merged);
    if (!merged_id) throw Error(where() + "the merged token '" + one_line(merged) + "' is not in the vocabulary");
    // A repeated pair keeps its first (highest-priority) rank.
    merges_.emplace(pair_key(*left_id, *right_id), Merge{static_cast<int32_t>(rank), *merged_id});
  }
  direct_.assign(kDirectCodePoints, -1);
  direct_last_.assign(kDirectCodePoints, -1);
  for (char32_t cp = 0; cp < kDirectCodePoints; ++cp) {
    std::string ch;
    append_utf8(ch, cp);
    if (auto id = vocab_.find(ch)) direct_[cp] = *id;
    if (auto id = vocab_.find(ch + options_.end_of_word_suffix)) direct_last_[cp] = *id;
  }
}

// Id of one code point as a symbol of a word, or -1 when the vocabulary lacks it.
int32_t BpeModel::code_point_id(char32_t cp, bool first, bool last) const {
  const bool prefixed = !first && !options_.continuing_subword_prefix.empty();
  if (cp < kDirectCodePoints && !prefixed) return last ? direct_last_[cp] : direct_[cp];
  std::string symbol = prefixed ? options_.continuing_subword_prefix : std::string();
  append_utf8(symbol, cp);
  if (last) symbol += options_.end_of_word_suffix;
  auto id = vocab_.find(symbol);
  return id ? *id : -1;
}

const BpeModel::Merge* BpeModel::find_merge(int32_t left, int32_t right) const {
  auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::initial_symbols(std::string_view piece, std::vector<int32_t>& symbols) const {
  bool previous_unk = false;
  for (size_t pos = 0; pos < piece.size();) {
    const size_t start = pos;
    const char32_t cp = next_code_point(piece, pos);
    const int32_t id = code_point_id(cp, start == 0, pos == piece.size());
    if (id >= 0) {
      symbols.push_back(id);
      previous_unk = false;
      continue;
    }
    if (options_.byte_fallback) {
      const std::string_view ch = piece.substr(start, pos - start);
      std::vector<int32_t> bytes;
      for (unsigned char b : ch) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        if (auto byte_id = vocab_.find(name)) bytes.push_back(*byte_id);
        else break;
      }
      if (bytes.size() == ch.size()) {
        symbols.insert(symbols.end(), bytes.begin(), bytes.end());
        previous_unk = false;
        continue;
      }
    }
    if (!unk_id_) continue;  // as Hugging Face does: no unk token, the character is dropped
    if (!(options_.fuse_unk && previous_unk)) symbols.push_back(*unk_id_);
    previous_unk = true;
  }
}

// Short words (nearly all of them): rescan for the lowest-ranked pair, leftmost on ties, and
// merge it. Quadratic, but with no allocation it beats the heap below for a few dozen symbols.
void BpeModel::merge_short(std::vector<int32_t>& symbols) const {
  for (;;) {
    const Merge* best = nullptr;
    size_t at = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const Merge* m = find_merge(symbols[i], symbols[i + 1]);
      if (m && (!best || m->rank < best->rank)) {
        best = m;
        at = i;
      }
    }
    if (!best) return;
    symbols[at] = best->result;
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
}

// The same merge order for long words: a heap of candidate pairs over a linked list of
// symbols keeps this O(n log n); stale heap entries (a side merged since) are skipped when
// they surface.
void BpeModel::merge_long(std::vector<int32_t>& symbols) const {
  const int n = static_cast<int>(symbols.size());
  if (n < 2) return;
  std::vector<int> next(n), prev(n);
  for (int i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  struct Candidate {
    int32_t rank;
    int left, right;
    int32_t left_id, right_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    if (const Merge* m = find_merge(symbols[left], symbols[right])) heap.push({m->rank, left, right, symbols[left], symbols[right]});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i, i + 1);
  while (!heap.empty()) {
    Candidate c = heap.top();
    heap.pop();
    if (symbols[c.left] != c.left_id || next[c.left] != c.right || symbols[c.right] != c.right_id) continue;
    symbols[c.left] = find_merge(c.left_id, c.right_id)->result;
    symbols[c.right] = -1;
    next[c.left] = next[c.right];
    if (next[c.right] >= 0) prev[next[c.right]] = c.left;
    consider(prev[c.left], c.left);
    consider(c.left, next[c.left]);
  }
  int out = 0;
  for (int i = 0; i >= 0 && i < n; i = next[i]) symbols[out++] = symbols[i];
  symbols.resize(out);
}

void BpeModel::tokenize(std::string_view piece, std::vector<int32_t>& ids) const {
  if (options_.ignore_merges) {
    if (auto id = vocab_.find(piece)) {
      ids.push_back(*id);
      return;
    }
  }
  bool cacheable = piece.size() <= kCacheMaxWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(piece);
    if (it != cache_.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> symbols;
  symbols.reserve(piece.size());
  initial_symbols(piece, symbols);
  if (symbols.size() <= kShortWord) merge_short(symbols);
  else merge_long(symbols);
  ids.insert(ids.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kCacheEntries) cache_.clear();
    cache_.emplace(std::string(piece), std::move(symbols));
  }
}

}  // namespace mminfer::text
