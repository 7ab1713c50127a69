#include "pipelines/generation/chat_template.h"

#include <fstream>
#include <sstream>

#include "mminfer/status.h"
#include "pipelines/generation/folder_files.h"

namespace mminfer::pipelines {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A special token as tokenizer_config.json writes it: a string or {"content": ...}.
std::string token_text(const json& config, const char* key) {
  if (!config.contains(key)) return "";
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

// chat_template as a string, or the "default" of a list of {name, template}; "" when absent.
std::string template_in(const json& config, const fs::path& file) {
  if (!config.contains("chat_template") || config["chat_template"].is_null()) return "";
  const json& t = config["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    for (const json& named : t)
      if (named.is_object() && named.value("name", "") == "default" && named.contains("template") && named["template"].is_string())
        return named["template"].get<std::string>();
    throw Error(file.string() + ": chat_template lists no \"default\" template");
  }
  throw Error(file.string() + ": chat_template must be a string or a list of {name, template}");
}

}  // namespace

std::optional<ChatTemplate> ChatTemplate::from_folder(const fs::path& dir) {
  json tokenizer = read_json_object(dir / "tokenizer_config.json", false);
  std::string bos = token_text(tokenizer, "bos_token"), eos = token_text(tokenizer, "eos_token");
  std::string source;
  fs::path file = dir / "chat_template.jinja";
  if (fs::is_regular_file(file)) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) throw Error(file.string() + ": cannot be read");
    source = text.str();
  }
  if (source.empty()) {
    file = dir / "chat_template.json";
    source = template_in(read_json_object(file, false), file);
  }
  if (source.empty()) {
    file = dir / "tokenizer_config.json";
    source = template_in(tokenizer, file);
  }
  if (source.empty()) return std::nullopt;
  return ChatTemplate(source, bos, eos, file.string());
}

ChatTemplate::ChatTemplate(const std::string& source, std::string bos_token, std::string eos_token, std::string file)
    : template_([&] {
        try {
          return generate::jinja::Template(source);
        } catch (const Error& e) {
          throw Error(file + ": " + e.what());
        }
      }()),
      bos_(std::move(bos_token)),
      eos_(std::move(eos_token)),
      file_(std::move(file)) {}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt) const {
  nlohmann::ordered_json context = {{"messages", messages},
                                    {"add_generation_prompt", add_generation_prompt},
                                    {"bos_token", bos_},
                                    {"eos_token", eos_}};
  try {
    return template_.render(context);
  } catch (const Error& e) {
    throw Error(file_ + ": " + e.what());
  }
}

nlohmann::ordered_json ChatTemplate::user_turn(const std::string& question, bool with_image) {
  nlohmann::ordered_json content = nlohmann::ordered_json::array();
  if (with_image) content.push_back({{"type", "image"}});
  content.push_back({{"type", "text"}, {"text", question}});
  return nlohmann::ordered_json::array({{{"role", "user"}, {"content", content}}});
}

}  // namespace mminfer::pipelines
