// Decoders turn token strings back into text: undo the byte-level alphabet, glue "##" pieces,
// turn CLIP's "</w>" into spaces. Each mirrors the Hugging Face tokenizers decoder of that name.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace mminfer::text {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the token strings in place; the caller concatenates what is left.
  virtual void decode(std::vector<std::string>& tokens) const = 0;
};

class ByteLevelDecoder : public Decoder {  // bytes may be partial UTF-8 until all are joined
 public:
  void decode(std::vector<std::string>& tokens) const override;
};

class WordPieceDecoder : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode(std::vector<std::string>& tokens) const override;

 private:
  std::string prefix_;
  bool cleanup_;  // "word ." -> "word.", " n't" -> "n't" and the like
};

class BpeSuffixDecoder : public Decoder {  // HF "BPEDecoder": suffix -> space, none at the end
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode(std::vector<std::string>& tokens) const override;

 private:
  std::string suffix_;
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(std::string pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode(std::vector<std::string>& tokens) const override;

 private:
  std::string pattern_, content_;
};

class StripDecoder : public Decoder {  // up to `start` copies of `content` off the front, `stop` off the back
 public:
  StripDecoder(std::string content, size_t start, size_t stop) : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode(std::vector<std::string>& tokens) const override;

 private:
  std::string content_;
  size_t start_, stop_;
};

class FuseDecoder : public Decoder {
 public:
  void decode(std::vector<std::string>& tokens) const override;
};

class ByteFallbackDecoder : public Decoder {  // "<0xE2><0x82><0xAC>" -> "€"
 public:
  void decode(std::vector<std::string>& tokens) const override;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode(std::vector<std::string>& tokens) const override {
    for (const auto& s : steps_) s->decode(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

}  // namespace mminfer::text
