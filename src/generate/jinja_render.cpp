// Rendering the syntax tree (jinja_ast.h) with Jinja's meaning: Python's truth, str() and
// operators on JSON values, undefined values as Jinja's Undefined (empty when printed, an error
// when read from), loop scopes that {% set %} inside a loop does not leak out of.
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "core/json_string.h"
#include "generate/jinja_ast.h"
#include "generate/jinja_template.h"
#include "mminfer/status.h"

namespace mminfer::generate::jinja {

namespace {

using Value = nlohmann::ordered_json;

Value undefined() { return Value(Value::value_t::discarded); }
bool is_undefined(const Value& v) { return v.is_discarded(); }

[[noreturn]] void fail(int line, const std::string& what) {
  throw Error("chat template line " + std::to_string(line) + ": " + what);
}

const char* type_name(const Value& v) {
  if (is_undefined(v)) return "undefined";
  switch (v.type()) {
    case Value::value_t::null: return "none";
    case Value::value_t::boolean: return "bool";
    case Value::value_t::string: return "str";
    case Value::value_t::array: return "list";
    case Value::value_t::object: return "dict";
    case Value::value_t::number_float: return "float";
    default: return "int";
  }
}

bool truthy(const Value& v) {
  if (is_undefined(v) || v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_float()) return v.get<double>() != 0;
  if (v.is_number()) return v.get<int64_t>() != 0;
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();  // json::empty() is false for strings
  if (v.is_array() || v.is_object()) return !v.empty();
  return true;
}

std::string float_text(double d) {
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e16) return std::to_string(static_cast<int64_t>(d)) + ".0";
  return Value(d).dump();
}

std::string repr(const Value& v);

// Python's str().
std::string str(const Value& v) {
  if (is_undefined(v)) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_number_float()) return float_text(v.get<double>());
  if (v.is_number()) return v.dump();
  return repr(v);
}

std::string repr(const Value& v) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
    std::string out(1, q);
    for (char c : s) {
      if (c == q || c == '\\') out += '\\', out += c;
      else if (c == '\n') out += "\\n";
      else if (c == '\t') out += "\\t";
      else if (c == '\r') out += "\\r";
      else out += c;
    }
    return out + q;
  }
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + repr(v[i]);
    return out + "]";
  }
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it, first = false) out += (first ? "" : ", ") + repr(Value(it.key())) + ": " + repr(it.value());
    return out + "}";
  }
  return str(v);
}

// Python's json.dumps(v, ensure_ascii=False, indent=indent), as transformers' tojson.
void dump_json(const Value& v, int indent, int depth, std::string& out) {
  auto newline = [&](int d) {
    out += '\n';
    out.append(static_cast<size_t>(indent * d), ' ');
  };
  if (v.is_string()) {
    out += '"';
    append_json_escaped(out, v.get_ref<const std::string&>());
    out += '"';
  } else if (v.is_array() || v.is_object()) {
    bool array = v.is_array();
    out += array ? '[' : '{';
    if (v.empty()) {
      out += array ? ']' : '}';
      return;
    }
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) out += indent >= 0 ? "," : ", ";
      first = false;
      if (indent >= 0) newline(depth + 1);
      if (!array) {
        dump_json(Value(it.key()), indent, depth + 1, out);
        out += ": ";
      }
      dump_json(it.value(), indent, depth + 1, out);
    }
    if (indent >= 0) newline(depth);
    out += array ? ']' : '}';
  } else if (v.is_null() || is_undefined(v)) {
    out += "null";
  } else if (v.is_boolean()) {
    out += v.get<bool>() ? "true" : "false";
  } else if (v.is_number_float()) {
    out += float_text(v.get<double>());
  } else {
    out += v.dump();
  }
}

bool is_int(const Value& v) { return v.is_number_integer() || v.is_number_unsigned(); }
bool is_num(const Value& v) { return v.is_number() || v.is_boolean(); }
double num(const Value& v) { return v.is_boolean() ? (v.get<bool>() ? 1 : 0) : v.get<double>(); }
int64_t whole(const Value& v) { return v.is_boolean() ? (v.get<bool>() ? 1 : 0) : v.get<int64_t>(); }

bool equal(const Value& a, const Value& b) {
  if (is_undefined(a) || is_undefined(b)) return is_undefined(a) && is_undefined(b);
  if (is_num(a) && is_num(b)) return num(a) == num(b);
  return a == b;
}

std::string strip(const std::string& s, const std::string& chars, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (left) while (b < e && chars.find(s[b]) != std::string::npos) ++b;
  if (right) while (e > b && chars.find(s[e - 1]) != std::string::npos) --e;
  return s.substr(b, e - b);
}
const std::string kSpace = " \t\n\r\f\v";

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

class Renderer {
 public:
  explicit Renderer(const Value& context) { scopes_.push_back({}); globals_ = &context; }

  void block(const std::vector<NodePtr>& nodes, std::string& out) {
    for (const NodePtr& n : nodes) node(*n, out);
  }

 private:
  void node(const Node& n, std::string& out) {
    switch (n.kind) {
      case Node::kBlock: for (const auto& b : n.bodies) block(b, out); break;
      case Node::kText: out += n.text; break;
      case Node::kOutput: out += str(eval(*n.exprs[0])); break;
      case Node::kSet: scopes_.back()[n.targets[0]] = eval(*n.exprs[0]); break;
      case Node::kIf: {
        for (size_t i = 0; i < n.exprs.size(); ++i)
          if (truthy(eval(*n.exprs[i]))) return block(n.bodies[i], out);
        if (n.bodies.size() > n.exprs.size()) block(n.bodies.back(), out);
        break;
      }
      case Node::kFor: loop(n, out); break;
    }
  }

  void loop(const Node& n, std::string& out) {
    Value seq = eval(*n.exprs[0]);
    std::vector<Value> items;
    if (seq.is_array()) items.assign(seq.begin(), seq.end());
    else if (seq.is_object()) for (auto it = seq.begin(); it != seq.end(); ++it) items.push_back(it.key());
    else if (seq.is_string()) for (char c : seq.get<std::string>()) items.push_back(std::string(1, c));
    else if (!is_undefined(seq)) fail(n.line, std::string("cannot loop over a value of type ") + type_name(seq));
    scopes_.push_back({});
    const int64_t count = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < count; ++i) {
      auto& scope = scopes_.back();
      if (n.targets.size() == 1) {
        scope[n.targets[0]] = items[i];
      } else {
        if (!items[i].is_array() || items[i].size() != n.targets.size())
          fail(n.line, "cannot unpack a loop item into " + std::to_string(n.targets.size()) + " names");
        for (size_t k = 0; k < n.targets.size(); ++k) scope[n.targets[k]] = items[i][k];
      }
      scope["loop"] = Value{{"index0", i}, {"index", i + 1}, {"first", i == 0}, {"last", i + 1 == count},
                            {"length", count}, {"revindex", count - i}, {"revindex0", count - i - 1}};
      block(n.bodies[0], out);
    }
    scopes_.pop_back();
  }

  Value lookup(const std::string& name) const {
    for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s)
      if (auto it = s->find(name); it != s->end()) return it->second;
    if (globals_->is_object())
      if (auto it = globals_->find(name); it != globals_->end()) return *it;
    return undefined();
  }

  Value item(const Value& obj, const Value& key, const Expr& e) {
    if (is_undefined(obj)) fail(e.line, "cannot read " + repr(key) + " of an undefined value");
    if (obj.is_object() && key.is_string()) {
      auto it = obj.find(key.get<std::string>());
      return it == obj.end() ? undefined() : *it;
    }
    if ((obj.is_array() || obj.is_string()) && is_int(key)) {
      int64_t n = obj.is_array() ? static_cast<int64_t>(obj.size()) : static_cast<int64_t>(obj.get_ref<const std::string&>().size());
      int64_t i = key.get<int64_t>();
      if (i < 0) i += n;
      if (i < 0 || i >= n) return undefined();
      if (obj.is_array()) return obj[static_cast<size_t>(i)];
      return std::string(1, obj.get_ref<const std::string&>()[static_cast<size_t>(i)]);
    }
    return undefined();
  }

  Value slice(const Value& obj, const Value& from, const Value& to, const Expr& e) {
    if (!obj.is_array() && !obj.is_string()) fail(e.line, std::string("cannot slice a value of type ") + type_name(obj));
    const int64_t n = obj.is_array() ? static_cast<int64_t>(obj.size()) : static_cast<int64_t>(obj.get_ref<const std::string&>().size());
    auto bound = [&](const Value& v, int64_t fallback) {
      if (v.is_null() || is_undefined(v)) return fallback;
      if (!is_int(v)) fail(e.line, "slice bounds must be whole numbers");
      int64_t i = v.get<int64_t>();
      if (i < 0) i += n;
      return std::clamp<int64_t>(i, 0, n);
    };
    int64_t b = bound(from, 0), end = std::max(b, bound(to, n));
    if (obj.is_string()) return obj.get_ref<const std::string&>().substr(static_cast<size_t>(b), static_cast<size_t>(end - b));
    Value out = Value::array();
    for (int64_t i = b; i < end; ++i) out.push_back(obj[static_cast<size_t>(i)]);
    return out;
  }

  Value binary(const Expr& e) {
    const std::string& op = e.op;
    if (op == "and") {
      Value a = eval(*e.args[0]);
      return truthy(a) ? eval(*e.args[1]) : a;
    }
    if (op == "or") {
      Value a = eval(*e.args[0]);
      return truthy(a) ? a : eval(*e.args[1]);
    }
    Value a = eval(*e.args[0]), b = eval(*e.args[1]);
    if (op == "~") return str(a) + str(b);
    if (op == "==") return equal(a, b);
    if (op == "!=") return !equal(a, b);
    if (op == "in" || op == "not in") {
      bool found = false;
      if (b.is_string() && a.is_string()) found = b.get<std::string>().find(a.get<std::string>()) != std::string::npos;
      else if (b.is_array()) found = std::any_of(b.begin(), b.end(), [&](const Value& x) { return equal(x, a); });
      else if (b.is_object() && a.is_string()) found = b.contains(a.get<std::string>());
      else if (!is_undefined(b)) fail(e.line, std::string("'in' needs a string, list or dict on its right, not ") + type_name(b));
      return op == "in" ? found : !found;
    }
    auto type_error = [&]() -> Value {
      fail(e.line, "unsupported operand types for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
    };
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int c;
      if (is_num(a) && is_num(b)) c = num(a) < num(b) ? -1 : num(a) > num(b) ? 1 : 0;
      else if (a.is_string() && b.is_string()) c = a.get<std::string>().compare(b.get<std::string>());
      else return type_error();
      return op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0;
    }
    if (op == "+") {
      if (a.is_string() && b.is_string()) return a.get<std::string>() + b.get<std::string>();
      if (a.is_array() && b.is_array()) {
        Value out = a;
        for (const auto& x : b) out.push_back(x);
        return out;
      }
    }
    if (op == "*" && a.is_string() && is_int(b)) {
      std::string out;
      for (int64_t i = 0; i < b.get<int64_t>(); ++i) out += a.get<std::string>();
      return out;
    }
    if (!is_num(a) || !is_num(b)) {
      if (op == "%" && a.is_string()) fail(e.line, "string formatting with % is not supported");
      return type_error();
    }
    const bool ints = !a.is_number_float() && !b.is_number_float();
    if (op == "/") {
      if (num(b) == 0) fail(e.line, "division by zero");
      return num(a) / num(b);
    }
    if (ints) {
      int64_t x = whole(a), y = whole(b);
      if (op == "+") return x + y;
      if (op == "-") return x - y;
      if (op == "*") return x * y;
      if (y == 0) fail(e.line, "division by zero");
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) --q, r += y;  // Python floors
      return op == "//" ? q : r;
    }
    double x = num(a), y = num(b);
    if (op == "+") return x + y;
    if (op == "-") return x - y;
    if (op == "*") return x * y;
    if (y == 0) fail(e.line, "division by zero");
    if (op == "//") return std::floor(x / y);
    return x - std::floor(x / y) * y;
  }

  // Positional argument i (after the subject for filters, methods and tests), or a keyword.
  Value arg(const Expr& e, size_t i, const char* keyword, Value fallback, size_t first = 1) {
    for (size_t k = first; k < e.args.size(); ++k)
      if (e.keywords.size() > k && e.keywords[k] == keyword) return eval(*e.args[k]);
    size_t at = first + i;
    if (at < e.args.size() && (e.keywords.size() <= at || e.keywords[at].empty())) return eval(*e.args[at]);
    return fallback;
  }

  Value filter(const Expr& e) {
    Value v = eval(*e.args[0]);
    const std::string& f = e.name;
    if (f == "default" || f == "d") {
      bool boolean = truthy(arg(e, 1, "boolean", false));
      return (is_undefined(v) || (boolean && !truthy(v))) ? arg(e, 0, "default_value", "") : v;
    }
    if (f == "safe" || (f == "string" && v.is_string())) return v;
    if (f == "string") return str(v);
    if (f == "trim") return strip(str(v), kSpace, true, true);
    if (f == "upper") return upper(str(v));
    if (f == "lower") return lower(str(v));
    if (f == "capitalize") {
      std::string s = lower(str(v));
      if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
      return s;
    }
    if (f == "title") {
      std::string s = str(v);
      bool start = true;
      for (char& c : s) {
        c = static_cast<char>(start ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
        start = !std::isalnum(static_cast<unsigned char>(c));
      }
      return s;
    }
    if (f == "length" || f == "count") {
      if (is_undefined(v)) return 0;
      if (v.is_string()) return static_cast<int64_t>(v.get_ref<const std::string&>().size());
      if (v.is_array() || v.is_object()) return static_cast<int64_t>(v.size());
      fail(e.line, std::string("a value of type ") + type_name(v) + " has no length");
    }
    if (f == "tojson") {
      Value indent = arg(e, 0, "indent", nullptr);
      std::string out;
      dump_json(v, is_int(indent) ? static_cast<int>(indent.get<int64_t>()) : -1, 0, out);
      return out;
    }
    if (f == "join") {
      if (!v.is_array()) fail(e.line, std::string("join needs a list, not ") + type_name(v));
      std::string sep = str(arg(e, 0, "d", "")), out;
      for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + str(v[i]);
      return out;
    }
    if (f == "first" || f == "last") {
      if (v.is_array()) return v.empty() ? undefined() : f == "first" ? v.front() : v.back();
      if (v.is_string()) {
        const std::string& s = v.get_ref<const std::string&>();
        return s.empty() ? undefined() : Value(std::string(1, f == "first" ? s.front() : s.back()));
      }
      fail(e.line, std::string(f) + " needs a list or string, not " + type_name(v));
    }
    if (f == "replace") return replace_all(str(v), str(arg(e, 0, "old", "")), str(arg(e, 1, "new", "")));
    if (f == "int") {
      if (is_num(v)) return static_cast<int64_t>(num(v));
      try {
        return static_cast<int64_t>(std::stoll(str(v)));
      } catch (...) {
        return arg(e, 0, "default", 0);
      }
    }
    if (f == "list") {
      if (v.is_array()) return v;
      Value out = Value::array();
      if (v.is_string()) for (char c : v.get<std::string>()) out.push_back(std::string(1, c));
      else if (v.is_object()) for (auto it = v.begin(); it != v.end(); ++it) out.push_back(it.key());
      else fail(e.line, std::string("list needs a sequence, not ") + type_name(v));
      return out;
    }
    if (f == "abs" && is_num(v)) return v.is_number_float() ? Value(std::fabs(v.get<double>())) : Value(std::llabs(whole(v)));
    fail(e.line, "the filter '" + f + "' is not supported");
  }

  Value test(const Expr& e) {
    Value v = eval(*e.args[0]);
    const std::string& t = e.name;
    bool r;
    if (t == "defined") r = !is_undefined(v);
    else if (t == "undefined") r = is_undefined(v);
    else if (t == "none") r = v.is_null();
    else if (t == "string") r = v.is_string();
    else if (t == "number") r = v.is_number();
    else if (t == "integer") r = is_int(v);
    else if (t == "float") r = v.is_number_float();
    else if (t == "boolean") r = v.is_boolean();
    else if (t == "true") r = v.is_boolean() && v.get<bool>();
    else if (t == "false") r = v.is_boolean() && !v.get<bool>();
    else if (t == "mapping") r = v.is_object();
    else if (t == "sequence" || t == "iterable") r = v.is_array() || v.is_string() || v.is_object();
    else if (t == "odd" || t == "even") {
      if (!is_int(v)) fail(e.line, "'" + t + "' needs a whole number");
      r = (v.get<int64_t>() % 2 != 0) == (t == "odd");
    } else if (t == "eq" || t == "equalto" || t == "sameas") r = equal(v, arg(e, 0, "other", undefined()));
    else fail(e.line, "the test '" + t + "' is not supported");
    return e.negate ? !r : r;
  }

  Value method(const Expr& e) {
    Value v = eval(*e.args[0]);
    const std::string& m = e.name;
    if (v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      if (m == "strip" || m == "lstrip" || m == "rstrip") {
        Value chars = arg(e, 0, "chars", nullptr);
        return strip(s, chars.is_string() ? chars.get<std::string>() : kSpace, m != "rstrip", m != "lstrip");
      }
      if (m == "startswith") return s.rfind(str(arg(e, 0, "prefix", "")), 0) == 0;
      if (m == "endswith") {
        std::string x = str(arg(e, 0, "suffix", ""));
        return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
      }
      if (m == "upper") return upper(s);
      if (m == "lower") return lower(s);
      if (m == "replace") return replace_all(s, str(arg(e, 0, "old", "")), str(arg(e, 1, "new", "")));
      if (m == "split") {
        Value sep = arg(e, 0, "sep", nullptr), out = Value::array();
        if (!sep.is_string()) {
          size_t i = 0;
          while (true) {
            i = s.find_first_not_of(kSpace, i);
            if (i == std::string::npos) break;
            size_t j = s.find_first_of(kSpace, i);
            out.push_back(s.substr(i, j == std::string::npos ? std::string::npos : j - i));
            if (j == std::string::npos) break;
            i = j;
          }
          return out;
        }
        const std::string d = sep.get<std::string>();
        if (d.empty()) fail(e.line, "split with an empty separator");
        size_t i = 0;
        for (size_t j; (j = s.find(d, i)) != std::string::npos; i = j + d.size()) out.push_back(s.substr(i, j - i));
        out.push_back(s.substr(i));
        return out;
      }
    }
    if (v.is_object()) {
      if (m == "items" || m == "keys" || m == "values") {
        Value out = Value::array();
        for (auto it = v.begin(); it != v.end(); ++it)
          out.push_back(m == "items" ? Value::array({it.key(), it.value()}) : m == "keys" ? Value(it.key()) : it.value());
        return out;
      }
      if (m == "get") {
        Value k = arg(e, 0, "key", nullptr);
        auto it = k.is_string() ? v.find(k.get<std::string>()) : v.end();
        return it == v.end() ? arg(e, 1, "default", nullptr) : *it;
      }
    }
    fail(e.line, std::string("the method ") + type_name(v) + "." + m + "() is not supported");
  }

  Value call(const Expr& e) {
    if (e.method) return method(e);
    if (e.name == "raise_exception") throw Error("chat template: " + str(arg(e, 0, "message", "", 0)));
    if (e.name == "range") {
      std::vector<Value> a;
      for (const auto& x : e.args) a.push_back(eval(*x));
      for (const auto& x : a)
        if (!is_int(x)) fail(e.line, "range needs whole numbers");
      int64_t from = a.size() >= 2 ? a[0].get<int64_t>() : 0, to = a.size() == 1 ? a[0].get<int64_t>() : a.size() >= 2 ? a[1].get<int64_t>() : 0;
      int64_t step = a.size() == 3 ? a[2].get<int64_t>() : 1;
      if (step == 0 || a.empty() || a.size() > 3) fail(e.line, "range takes 1 to 3 arguments and a step other than 0");
      Value out = Value::array();
      for (int64_t i = from; step > 0 ? i < to : i > to; i += step) out.push_back(i);
      return out;
    }
    fail(e.line, "the function " + e.name + "() is not supported (supported: raise_exception, range)");
  }

  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::kLiteral: return e.value;
      case Expr::kList: {
        Value out = Value::array();
        for (const auto& a : e.args) out.push_back(eval(*a));
        return out;
      }
      case Expr::kName: return lookup(e.name);
      case Expr::kAttr: {
        Value obj = eval(*e.args[0]);
        if (is_undefined(obj)) fail(e.line, "cannot read ." + e.name + " of an undefined value");
        return item(obj, e.name, e);
      }
      case Expr::kItem: return item(eval(*e.args[0]), eval(*e.args[1]), e);
      case Expr::kSlice: return slice(eval(*e.args[0]), eval(*e.args[1]), eval(*e.args[2]), e);
      case Expr::kCall: return call(e);
      case Expr::kFilter: return filter(e);
      case Expr::kTest: return test(e);
      case Expr::kUnary: {
        Value v = eval(*e.args[0]);
        if (e.op == "not") return !truthy(v);
        if (!is_num(v)) fail(e.line, std::string("bad operand type for unary ") + e.op + ": '" + type_name(v) + "'");
        if (e.op == "+") return v;
        return v.is_number_float() ? Value(-v.get<double>()) : Value(-whole(v));
      }
      case Expr::kBinary: return binary(e);
      case Expr::kCondition: return truthy(eval(*e.args[0])) ? eval(*e.args[1]) : eval(*e.args[2]);
    }
    return undefined();
  }

  const Value* globals_;
  std::vector<std::map<std::string, Value>> scopes_;
};

}  // namespace

std::string Template::render(const nlohmann::ordered_json& context) const {
  std::string out;
  Renderer(context).block(root_->bodies[0], out);
  return out;
}

}  // namespace mminfer::generate::jinja
