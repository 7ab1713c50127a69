// A model folder's chat template: chat_template.jinja, chat_template.json's "chat_template", or
// tokenizer_config.json's "chat_template" (a string, or a list of {name, template} of which
// "default" is taken), in that order, rendered with the Jinja subset of generate/jinja_template.h
// as transformers' apply_chat_template renders it: `messages`, `add_generation_prompt`,
// `bos_token` and `eos_token` (tokenizer_config.json's).
#pragma once
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "generate/jinja_template.h"

namespace mminfer::pipelines {

class ChatTemplate {
 public:
  // nullopt when the folder has none. Throws Error naming the file for a template outside the
  // subset or a file that is not the JSON it should be.
  static std::optional<ChatTemplate> from_folder(const std::filesystem::path& dir);
  ChatTemplate(const std::string& source, std::string bos_token, std::string eos_token, std::string file);

  // messages: [{"role", "content": "text" or [{"type": "text", "text"}, {"type": "image"}]}].
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt) const;
  const std::string& file() const { return file_; }

  // One user turn: an image (when with_image) before the question, as SmolVLM's processor puts it.
  static nlohmann::ordered_json user_turn(const std::string& question, bool with_image);

 private:
  generate::jinja::Template template_;
  std::string bos_, eos_, file_;
};

}  // namespace mminfer::pipelines
