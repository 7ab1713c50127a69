// A Jinja subset, enough for the chat templates model folders ship (tokenizer_config.json's
// chat_template, chat_template.json, chat_template.jinja), rendered as transformers renders them
// (trim_blocks and lstrip_blocks on). Values are JSON.
//
// The subset: {{ }} with variables, attribute and item access, slices, string / number / list
// literals, ~ and + - * / // %, comparisons, and / or / not, in / not in, `x if c else y`, filters
// (trim, length, count, upper, lower, capitalize, title, default, tojson, join, first, last,
// replace, string, int, list, safe, abs), tests (defined, undefined, none, string, number,
// integer, mapping, sequence, iterable, boolean, odd, even, true, false), the methods strip,
// lstrip, rstrip, startswith, endswith, upper, lower, items, keys, values, get, split;
// {% for %} (loop.index, index0, first, last, length, revindex, revindex0), {% if / elif / else %},
// {% set %}, whitespace control ({%- -%}, {{- -}}), comments, raise_exception(msg) and range(n).
// Anything else is one Error naming the construct and its line.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mminfer::generate::jinja {

struct Node;

class Template {
 public:
  // Throws Error "chat template line N: ..." for syntax outside the subset.
  explicit Template(std::string_view source);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // `context`: an object whose keys are the template's variables. Throws Error for a failed
  // raise_exception (its message), a type error or an undefined value used as a container.
  std::string render(const nlohmann::ordered_json& context) const;

 private:
  std::unique_ptr<Node> root_;
};

}  // namespace mminfer::generate::jinja
