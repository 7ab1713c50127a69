// Jinja source -> syntax tree: the template cut into text and tags (whitespace control,
// trim_blocks and lstrip_blocks as transformers sets them), tags' expressions tokenized and parsed
// with Jinja's precedence (or < and < not < comparisons < + - < ~ < * / // % < unary < filters,
// tests and postfix).
#include <cctype>

#include "generate/jinja_ast.h"
#include "generate/jinja_template.h"
#include "mminfer/status.h"

namespace mminfer::generate::jinja {

namespace {

[[noreturn]] void fail(int line, const std::string& what) {
  throw Error("chat template line " + std::to_string(line) + ": " + what);
}

// --- Cutting the source into text and tags ---------------------------------------------------

struct Piece {
  enum Kind { kText, kExpr, kStmt, kComment } kind = kText;
  std::string body;  // the text, or what is inside the tag without its markers
  int line = 1;
  bool strip_left = false, strip_right = false, plus = false;
};

int count_lines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Where the tag opened at `from` closes (the index of `closer`), strings inside skipped.
size_t find_close(std::string_view src, size_t from, std::string_view closer, bool strings, int line) {
  for (size_t i = from; i < src.size(); ++i) {
    if (strings && (src[i] == '\'' || src[i] == '"')) {
      char q = src[i];
      for (++i; i < src.size() && src[i] != q; ++i)
        if (src[i] == '\\') ++i;
      continue;
    }
    if (src.compare(i, closer.size(), closer) == 0) return i;
  }
  fail(line, "a tag is not closed (no '" + std::string(closer) + "')");
}

std::vector<Piece> cut(std::string_view src) {
  std::vector<Piece> raw;
  size_t pos = 0;
  int line = 1;
  while (pos < src.size()) {
    size_t open = std::string_view::npos;
    for (size_t i = pos; i + 1 < src.size(); ++i)
      if (src[i] == '{' && (src[i + 1] == '{' || src[i + 1] == '%' || src[i + 1] == '#')) {
        open = i;
        break;
      }
    if (open == std::string_view::npos) open = src.size();
    if (open > pos) raw.push_back({Piece::kText, std::string(src.substr(pos, open - pos)), line, false, false, false});
    line += count_lines(src.substr(pos, open - pos));
    if (open == src.size()) break;
    Piece p;
    p.line = line;
    char c = src[open + 1];
    p.kind = c == '{' ? Piece::kExpr : c == '%' ? Piece::kStmt : Piece::kComment;
    std::string_view closer = c == '{' ? "}}" : c == '%' ? "%}" : "#}";
    size_t start = open + 2;
    if (start < src.size() && src[start] == '-') p.strip_left = true, ++start;
    else if (start < src.size() && src[start] == '+') p.plus = true, ++start;
    size_t close = find_close(src, start, closer, p.kind != Piece::kComment, line);
    size_t end = close;
    if (end > start && src[end - 1] == '-') p.strip_right = true, --end;
    else if (end > start && src[end - 1] == '+') --end;
    p.body = std::string(src.substr(start, end - start));
    line += count_lines(src.substr(open, close + 2 - open));
    pos = close + 2;
    raw.push_back(std::move(p));
  }

  // Whitespace: '-' strips all of it beside the tag; trim_blocks drops the newline after a block
  // or comment tag; lstrip_blocks drops spaces and tabs between a line's start and such a tag.
  auto is_space = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v'; };
  bool line_start = true;  // the next text piece begins a line
  for (size_t i = 0; i < raw.size(); ++i) {
    Piece& p = raw[i];
    if (p.kind == Piece::kText) {
      if (i + 1 < raw.size()) {
        const Piece& next = raw[i + 1];
        if (next.strip_left) {
          while (!p.body.empty() && is_space(p.body.back())) p.body.pop_back();
        } else if (next.kind != Piece::kExpr && !next.plus) {
          size_t nl = p.body.rfind('\n');
          size_t from = nl == std::string::npos ? 0 : nl + 1;
          if ((nl != std::string::npos || line_start) &&
              p.body.find_first_not_of(" \t", from) == std::string::npos)
            p.body.erase(from);
        }
      }
      line_start = false;
      continue;
    }
    line_start = false;
    if (i + 1 < raw.size() && raw[i + 1].kind == Piece::kText) {
      std::string& next = raw[i + 1].body;
      if (p.strip_right) {
        size_t k = 0;
        while (k < next.size() && is_space(next[k])) ++k;
        next.erase(0, k);
      } else if (p.kind != Piece::kExpr) {
        if (next.rfind("\r\n", 0) == 0) next.erase(0, 2), line_start = true;
        else if (next.rfind("\n", 0) == 0) next.erase(0, 1), line_start = true;
      }
    }
  }
  return raw;
}

// --- Tokens of an expression ------------------------------------------------------------------

struct Token {
  enum Kind { kName, kString, kNumber, kOp, kEnd } kind = kEnd;
  std::string text;
  nlohmann::ordered_json number;
};

std::vector<Token> tokenize(const std::string& s, int line) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Token::kName, s.substr(i, j - i), {}});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      bool real = false;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_' ||
                              (s[j] == '.' && !real && j + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[j + 1])))))
        real |= s[j] == '.', ++j;
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {  // an exponent: 1e5, 2.5E-3
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
          while (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) ++k;
          real = true;
          j = k;
        }
      }
      std::string digits;
      for (size_t k = i; k < j; ++k)
        if (s[k] != '_') digits += s[k];
      Token t{Token::kNumber, digits, {}};
      try {
        t.number = real ? nlohmann::ordered_json(std::stod(digits)) : nlohmann::ordered_json(std::stoll(digits));
      } catch (const std::exception&) {
        fail(line, "the number " + digits + " is out of range");
      }
      out.push_back(std::move(t));
      i = j;
    } else if (c == '\'' || c == '"') {
      std::string text;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != c; ++j) {
        if (s[j] != '\\' || j + 1 >= s.size()) {
          text += s[j];
          continue;
        }
        char e = s[++j];
        switch (e) {
          case 'n': text += '\n'; break;
          case 't': text += '\t'; break;
          case 'r': text += '\r'; break;
          case '\\': case '\'': case '"': text += e; break;
          default: text += '\\', text += e;
        }
      }
      if (j >= s.size()) fail(line, "a string literal is not closed");
      out.push_back({Token::kString, text, {}});
      i = j + 1;
    } else {
      static const char* const ops[] = {"//", "==", "!=", "<=", ">=", "**", "+", "-", "*", "/", "%", "~", "<", ">",
                                        "(", ")", "[", "]", ".", ",", ":", "|", "=", "{", "}"};
      bool found = false;
      for (const char* op : ops) {
        std::string_view v(op);
        if (s.compare(i, v.size(), v) == 0) {
          out.push_back({Token::kOp, std::string(v), {}});
          i += v.size();
          found = true;
          break;
        }
      }
      if (!found) fail(line, std::string("unexpected character '") + c + "'");
    }
  }
  out.push_back({Token::kEnd, "", {}});
  return out;
}

// --- Expressions ------------------------------------------------------------------------------

class ExprParser {
 public:
  ExprParser(std::vector<Token> tokens, int line) : t_(std::move(tokens)), line_(line) {}

  ExprPtr expression() {
    ExprPtr e = or_expr();
    if (is_name("if")) {
      ++i_;
      auto cond = make(Expr::kCondition);
      cond->args.push_back(or_expr());
      cond->args.push_back(std::move(e));
      if (is_name("else")) ++i_, cond->args.push_back(or_expr());
      else cond->args.push_back(literal(nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded)));
      return cond;
    }
    return e;
  }
  bool done() const { return t_[i_].kind == Token::kEnd; }
  const Token& peek() const { return t_[i_]; }
  bool is_name(const char* n) const { return t_[i_].kind == Token::kName && t_[i_].text == n; }
  bool is_op(const char* o) const { return t_[i_].kind == Token::kOp && t_[i_].text == o; }
  std::string name() {
    if (t_[i_].kind != Token::kName) fail(line_, "expected a name, got '" + t_[i_].text + "'");
    return t_[i_++].text;
  }
  void expect(const char* op) {
    if (!is_op(op)) fail(line_, std::string("expected '") + op + "', got '" + (done() ? "end of tag" : t_[i_].text) + "'");
    ++i_;
  }
  void expect_end() {
    if (!done()) fail(line_, "unexpected '" + t_[i_].text + "'");
  }

 private:
  ExprPtr make(Expr::Kind k) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line_;
    return e;
  }
  ExprPtr literal(nlohmann::ordered_json v) {
    auto e = make(Expr::kLiteral);
    e->value = std::move(v);
    return e;
  }
  ExprPtr binary(std::string op, ExprPtr a, ExprPtr b) {
    auto e = make(Expr::kBinary);
    e->op = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }
  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (is_name("or")) ++i_, e = binary("or", std::move(e), and_expr());
    return e;
  }
  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (is_name("and")) ++i_, e = binary("and", std::move(e), not_expr());
    return e;
  }
  ExprPtr not_expr() {
    if (is_name("not")) {
      ++i_;
      auto e = make(Expr::kUnary);
      e->op = "not";
      e->args.push_back(not_expr());
      return e;
    }
    return compare();
  }
  ExprPtr compare() {
    ExprPtr e = math1();
    for (;;) {
      if (is_op("==") || is_op("!=") || is_op("<") || is_op(">") || is_op("<=") || is_op(">=")) {
        std::string op = t_[i_++].text;
        e = binary(op, std::move(e), math1());
      } else if (is_name("in")) {
        ++i_;
        e = binary("in", std::move(e), math1());
      } else if (is_name("not") && t_[i_ + 1].kind == Token::kName && t_[i_ + 1].text == "in") {
        i_ += 2;
        e = binary("not in", std::move(e), math1());
      } else {
        return e;
      }
    }
  }
  ExprPtr math1() {
    ExprPtr e = concat();
    while (is_op("+") || is_op("-")) {
      std::string op = t_[i_++].text;
      e = binary(op, std::move(e), concat());
    }
    return e;
  }
  ExprPtr concat() {
    ExprPtr e = math2();
    while (is_op("~")) ++i_, e = binary("~", std::move(e), math2());
    return e;
  }
  ExprPtr math2() {
    ExprPtr e = unary();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = t_[i_++].text;
      e = binary(op, std::move(e), unary());
    }
    if (is_op("**")) fail(line_, "the operator ** is not supported");
    return e;
  }
  ExprPtr unary() {
    if (is_op("-") || is_op("+")) {
      auto e = make(Expr::kUnary);
      e->op = t_[i_++].text;
      e->args.push_back(unary());
      return e;
    }
    return filters(postfix(primary()));
  }
  // After '(': the arguments into e->args (from its current end), their keywords alongside.
  void call_args(Expr& e) {
    e.keywords.resize(e.args.size());
    while (!is_op(")")) {
      std::string keyword;
      if (t_[i_].kind == Token::kName && t_[i_ + 1].kind == Token::kOp && t_[i_ + 1].text == "=") keyword = t_[i_].text, i_ += 2;
      e.args.push_back(expression());
      e.keywords.push_back(keyword);
      if (!is_op(")")) expect(",");
    }
    ++i_;
    e.keywords.resize(e.args.size());
  }
  ExprPtr primary() {
    const Token& t = t_[i_];
    if (t.kind == Token::kString) {
      ++i_;
      std::string s = t.text;
      while (t_[i_].kind == Token::kString) s += t_[i_++].text;  // adjacent literals join
      return literal(s);
    }
    if (t.kind == Token::kNumber) return ++i_, literal(t.number);
    if (t.kind == Token::kName) {
      ++i_;
      if (t.text == "true" || t.text == "True") return literal(true);
      if (t.text == "false" || t.text == "False") return literal(false);
      if (t.text == "none" || t.text == "None") return literal(nullptr);
      if (is_op("(")) {
        ++i_;
        auto e = make(Expr::kCall);
        e->name = t.text;
        call_args(*e);
        return e;
      }
      auto e = make(Expr::kName);
      e->name = t.text;
      return e;
    }
    if (is_op("(")) {
      ++i_;
      ExprPtr e = expression();
      if (is_op(",")) fail(line_, "tuples are not supported");
      expect(")");
      return e;
    }
    if (is_op("[")) {
      ++i_;
      auto e = make(Expr::kList);
      while (!is_op("]")) {
        e->args.push_back(expression());
        if (!is_op("]")) expect(",");
      }
      ++i_;
      return e;
    }
    if (is_op("{")) fail(line_, "dict literals are not supported");
    fail(line_, done() ? "an expression is missing" : "unexpected '" + t.text + "'");
  }
  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      if (is_op(".")) {
        ++i_;
        std::string n = name();
        if (is_op("(")) {
          ++i_;
          auto call = make(Expr::kCall);
          call->name = n;
          call->method = true;
          call->args.push_back(std::move(e));
          call_args(*call);
          e = std::move(call);
        } else {
          auto attr = make(Expr::kAttr);
          attr->name = n;
          attr->args.push_back(std::move(e));
          e = std::move(attr);
        }
      } else if (is_op("[")) {
        ++i_;
        ExprPtr first = is_op(":") ? literal(nullptr) : expression();
        if (is_op(":")) {
          ++i_;
          auto slice = make(Expr::kSlice);
          slice->args.push_back(std::move(e));
          slice->args.push_back(std::move(first));
          slice->args.push_back(is_op("]") ? literal(nullptr) : expression());
          if (is_op(":")) fail(line_, "slices with a step are not supported");
          e = std::move(slice);
        } else {
          auto item = make(Expr::kItem);
          item->args.push_back(std::move(e));
          item->args.push_back(std::move(first));
          e = std::move(item);
        }
        expect("]");
      } else if (is_op("(")) {
        fail(line_, "calling a value is not supported");
      } else {
        return e;
      }
    }
  }
  ExprPtr filters(ExprPtr e) {
    for (;;) {
      if (is_op("|")) {
        ++i_;
        auto f = make(Expr::kFilter);
        f->name = name();
        f->args.push_back(std::move(e));
        if (is_op("(")) ++i_, call_args(*f);
        f->keywords.resize(f->args.size());
        e = std::move(f);
      } else if (is_name("is")) {
        ++i_;
        auto test = make(Expr::kTest);
        if (is_name("not")) ++i_, test->negate = true;
        test->name = name();
        test->args.push_back(std::move(e));
        if (is_op("(")) {
          ++i_;
          call_args(*test);
        } else if (t_[i_].kind == Token::kNumber || t_[i_].kind == Token::kString) {
          test->args.push_back(primary());  // `is divisibleby 3`, `is sameas "x"`
        }
        e = std::move(test);
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int line_;
};

// --- Statements -------------------------------------------------------------------------------

class Parser {
 public:
  explicit Parser(std::vector<Piece> pieces) : p_(std::move(pieces)) {}

  // Nodes up to one of `ends` (its keyword in *end; "" at the end of the source).
  std::vector<NodePtr> body(std::initializer_list<const char*> ends, std::string* end, ExprParser** end_tag,
                            std::unique_ptr<ExprParser>* holder) {
    std::vector<NodePtr> out;
    while (i_ < p_.size()) {
      const Piece& piece = p_[i_++];
      if (piece.kind == Piece::kComment) continue;
      if (piece.kind == Piece::kText) {
        if (piece.body.empty()) continue;
        auto n = std::make_unique<Node>();
        n->kind = Node::kText;
        n->text = piece.body;
        out.push_back(std::move(n));
        continue;
      }
      auto x = std::make_unique<ExprParser>(tokenize(piece.body, piece.line), piece.line);
      if (piece.kind == Piece::kExpr) {
        auto n = std::make_unique<Node>();
        n->kind = Node::kOutput;
        n->line = piece.line;
        n->exprs.push_back(x->expression());
        x->expect_end();
        out.push_back(std::move(n));
        continue;
      }
      if (x->done()) fail(piece.line, "an empty {% %} tag");
      std::string keyword = x->name();
      for (const char* e : ends)
        if (keyword == e) {
          *end = keyword;
          *holder = std::move(x);
          *end_tag = holder->get();
          return out;
        }
      if (keyword == "if") out.push_back(if_node(*x, piece.line));
      else if (keyword == "for") out.push_back(for_node(*x, piece.line));
      else if (keyword == "set") out.push_back(set_node(*x, piece.line));
      else if (keyword == "elif" || keyword == "else" || keyword == "endif" || keyword == "endfor")
        fail(piece.line, "{% " + keyword + " %} without its opening tag");
      else
        fail(piece.line, "{% " + keyword + " %} is not supported (supported: if, elif, else, for, set)");
    }
    if (ends.size()) fail(p_.empty() ? 1 : p_.back().line, std::string("{% ") + *ends.begin() + " %} is missing");
    *end = "";
    return out;
  }

 private:
  NodePtr if_node(ExprParser& x, int line) {
    auto n = std::make_unique<Node>();
    n->kind = Node::kIf;
    n->line = line;
    n->exprs.push_back(x.expression());
    x.expect_end();
    for (;;) {
      std::string end;
      ExprParser* tag = nullptr;
      std::unique_ptr<ExprParser> holder;
      n->bodies.push_back(body({"endif", "elif", "else"}, &end, &tag, &holder));
      if (end == "endif") {
        tag->expect_end();
        return n;
      }
      if (end == "elif") {
        n->exprs.push_back(tag->expression());
        tag->expect_end();
        continue;
      }
      tag->expect_end();  // else
      n->bodies.push_back(body({"endif"}, &end, &tag, &holder));
      tag->expect_end();
      return n;
    }
  }
  NodePtr for_node(ExprParser& x, int line) {
    auto n = std::make_unique<Node>();
    n->kind = Node::kFor;
    n->line = line;
    n->targets.push_back(x.name());
    while (x.is_op(",")) x.expect(","), n->targets.push_back(x.name());
    if (!x.is_name("in")) fail(line, "expected 'in' in {% for %}");
    x.name();
    n->exprs.push_back(x.expression());
    if (x.is_name("recursive")) fail(line, "recursive loops are not supported");
    x.expect_end();
    std::string end;
    ExprParser* tag = nullptr;
    std::unique_ptr<ExprParser> holder;
    n->bodies.push_back(body({"endfor", "else"}, &end, &tag, &holder));
    if (end == "else") fail(line, "{% for %} ... {% else %} is not supported");
    tag->expect_end();
    return n;
  }
  NodePtr set_node(ExprParser& x, int line) {
    auto n = std::make_unique<Node>();
    n->kind = Node::kSet;
    n->line = line;
    n->targets.push_back(x.name());
    if (x.is_op(".")) fail(line, "{% set x.attribute %} (namespace assignment) is not supported");
    if (!x.is_op("=")) fail(line, "block {% set %} ... {% endset %} is not supported");
    x.expect("=");
    n->exprs.push_back(x.expression());
    x.expect_end();
    return n;
  }

  std::vector<Piece> p_;
  size_t i_ = 0;
};

}  // namespace

Template::Template(std::string_view source) {
  // Jinja's keep_trailing_newline=False: one newline at the very end is not output.
  if (source.ends_with("\r\n")) source.remove_suffix(2);
  else if (source.ends_with('\n')) source.remove_suffix(1);
  Parser parser(cut(source));
  root_ = std::make_unique<Node>();
  root_->kind = Node::kBlock;
  std::string end;
  ExprParser* tag = nullptr;
  std::unique_ptr<ExprParser> holder;
  root_->bodies.push_back(parser.body({}, &end, &tag, &holder));
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

}  // namespace mminfer::generate::jinja
