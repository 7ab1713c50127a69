// The model turns one pre-tokenized piece into token ids (BPE, WordPiece). Vocab is the
// token <-> id table every model and the added tokens share.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mminfer::text {

// Lets maps keyed by std::string be searched with a string_view, without a copy.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class Vocab {
 public:
  // Move-only: the id -> token table points into the token -> id map.
  Vocab() = default;
  Vocab(Vocab&&) = default;
  Vocab& operator=(Vocab&&) = default;
  Vocab(const Vocab&) = delete;
  Vocab& operator=(const Vocab&) = delete;
  // Throws Error on a negative id or one past the 2^24 ids any real vocabulary stays under.
  void add(std::string token, int32_t id);
  void reserve(size_t n) {
    ids_.reserve(n);
    tokens_.reserve(n);
  }
  std::optional<int32_t> find(std::string_view token) const {
    auto it = ids_.find(token);
    return it == ids_.end() ? std::nullopt : std::optional<int32_t>(it->second);
  }
  const std::string* token(int32_t id) const {  // nullptr for ids nothing maps to
    auto it = tokens_.find(id);
    return it == tokens_.end() ? nullptr : it->second;
  }
  size_t size() const { return ids_.size(); }
  int32_t end_id() const { return end_id_; }  // one past the largest id
  size_t longest_token_bytes() const { return longest_; }

 private:
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> ids_;
  // Points at the keys of ids_ (map nodes never move). A map, not a vector, so a file with one
  // huge id cannot make us allocate a table that large.
  std::unordered_map<int32_t, const std::string*> tokens_;
  int32_t end_id_ = 0;
  size_t longest_ = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of one piece (non-empty, valid UTF-8).
  virtual void tokenize(std::string_view piece, std::vector<int32_t>& ids) const = 0;
  virtual const Vocab& vocab() const = 0;
};

}  // namespace mminfer::text
