// The Jinja subset's meaning where chat templates lean on it (check_chat_templates.py compares
// whole templates with jinja2), and where a folder's template is found.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "generate/jinja_template.h"
#include "mminfer/status.h"
#include "pipelines/generation/chat_template.h"

namespace mminfer {
namespace {

using nlohmann::ordered_json;

std::string render(const std::string& source, const ordered_json& context = ordered_json::object()) {
  return generate::jinja::Template(source).render(context);
}

std::string error_of(const std::string& source, const ordered_json& context = ordered_json::object()) {
  try {
    render(source, context);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JinjaTemplate, LoopVariablesAndScopes) {
  ordered_json c = {{"xs", {"a", "b", "c"}}};
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index0 }}{{ x }}{% if loop.first %}^{% elif loop.last %}${% else %},{% endif %}{% endfor %}", c),
            "0a^1b,2c$");
  // {% set %} in a loop stays in it; at the top it stays for the rest.
  EXPECT_EQ(render("{% set n = 'out' %}{% for x in xs %}{% set n = x %}{% endfor %}{{ n }}", c), "out");
  EXPECT_EQ(render("{{ xs[1:] | join('-') }} {{ xs[-1] }} {{ xs | length }} {{ 'b' in xs }} {{ 'z' not in xs }}", c), "b-c c 3 True True");
}

TEST(JinjaTemplate, WhitespaceAsTransformersRendersIt) {
  // trim_blocks drops the newline after a tag, lstrip_blocks the indent before it, '-' all of it.
  EXPECT_EQ(render("{% if true %}\n  yes\n  {% endif %}\nend"), "  yes\nend");
  EXPECT_EQ(render("a  {{- ' b ' -}}  c"), "a b c");
  EXPECT_EQ(render("x\n"), "x");  // one trailing newline is not output
  EXPECT_EQ(render("{# a comment #}\nx"), "x");
}

TEST(JinjaTemplate, ValuesPrintAsPython) {
  ordered_json c = {{"m", {{"role", "user"}, {"n", 2}}}};
  EXPECT_EQ(render("{{ m.role | capitalize }}{{ m['n'] * 2 }}{{ m.missing }}{{ none }}{{ 1.0 }}{{ 7 // 2 }}{{ -7 % 3 }}", c),
            "User4None1.032");
  EXPECT_EQ(render("{{ m.missing | default('d') }}{{ '' | default('e', true) }}{{ m | tojson }}", c),
            "de{\"role\": \"user\", \"n\": 2}");
  EXPECT_EQ(render("{{ m.role ~ 1 }} {{ 'x' if m.n > 1 else 'y' }} {{ m.missing is defined }} {{ m.role is string }}", c),
            "user1 x False True");
  EXPECT_EQ(render("{{ 1e5 }} {{ 2.5E-3 }}"), "100000.0 0.0025");
  EXPECT_EQ(render("{{ '  hi ' | trim | upper }} {{ ' a b '.strip().split(' ') }}"), "HI ['a', 'b']");
}

TEST(JinjaTemplate, ErrorsNameTheConstruct) {
  EXPECT_EQ(error_of("{{ raise_exception('no system role') }}"), "chat template: no system role");
  EXPECT_NE(error_of("line\n{% macro m() %}{% endmacro %}").find("chat template line 2: {% macro %} is not supported"), std::string::npos);
  EXPECT_NE(error_of("{{ x | wordwrap }}").find("the filter 'wordwrap' is not supported"), std::string::npos);
  EXPECT_NE(error_of("{{ 'a' + 1 }}").find("unsupported operand types for +: 'str' and 'int'"), std::string::npos);
  EXPECT_NE(error_of("{{ m.a.b }}", {{"m", ordered_json::object()}}).find("undefined"), std::string::npos);
  EXPECT_NE(error_of("{% if x %}").find("{% endif %} is missing"), std::string::npos);
  EXPECT_NE(error_of("{% endfor %}").find("without its opening tag"), std::string::npos);
  EXPECT_NE(error_of("{{ 99999999999999999999 }}").find("the number 99999999999999999999 is out of range"), std::string::npos);
}

namespace fs = std::filesystem;

TEST(ChatTemplateFolder, FoundInTransformersOrder) {
  fs::path dir = fs::temp_directory_path() / "mminfer_chat_template_folder";
  fs::remove_all(dir);
  fs::create_directories(dir);
  EXPECT_FALSE(pipelines::ChatTemplate::from_folder(dir).has_value());
  auto user = pipelines::ChatTemplate::user_turn("hi", false);
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"bos_token": {"content": "<s>"}, "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "{{ bos_token }}C"}]})";
  EXPECT_EQ(pipelines::ChatTemplate::from_folder(dir)->render(user, true), "<s>C");
  std::ofstream(dir / "chat_template.json") << R"({"chat_template": "J{{ messages[0].content[0].text }}"})";
  EXPECT_EQ(pipelines::ChatTemplate::from_folder(dir)->render(user, true), "Jhi");
  std::ofstream(dir / "chat_template.jinja") << "{% if add_generation_prompt %}G{% endif %}";
  EXPECT_EQ(pipelines::ChatTemplate::from_folder(dir)->render(user, true), "G");
  std::ofstream(dir / "chat_template.jinja") << "{% filter upper %}x{% endfilter %}";
  try {
    pipelines::ChatTemplate::from_folder(dir);
    ADD_FAILURE() << "a template outside the subset loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chat_template.jinja: chat template line 1: {% filter %} is not supported"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mminfer
