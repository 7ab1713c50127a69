// The syntax tree of a parsed Jinja template (jinja_template.h): what the parser makes and the
// renderer walks. Internal to the two.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mminfer::generate::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum Kind {
    kLiteral,    // value
    kList,       // args
    kName,       // name
    kAttr,       // args[0].name
    kItem,       // args[0][args[1]]
    kSlice,      // args[0][args[1]:args[2]] (null parts absent)
    kCall,       // name(args...) or, with method, args[0].name(args[1..])
    kFilter,     // args[0] | name(args[1..])
    kTest,       // args[0] is [not] name(args[1..])
    kUnary,      // op args[0]: "not", "-", "+"
    kBinary,     // args[0] op args[1]
    kCondition,  // args[1] if args[0] else args[2]
  };
  Kind kind = kLiteral;
  nlohmann::ordered_json value;
  std::string name, op;
  bool method = false, negate = false;
  std::vector<ExprPtr> args;
  std::vector<std::string> keywords;  // parallel to args for calls and filters: "" when positional
  int line = 0;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Node {
  enum Kind { kBlock, kText, kOutput, kIf, kFor, kSet };
  Kind kind = kBlock;
  std::string text;                       // kText
  std::vector<std::string> targets;       // kFor's loop variables, kSet's name
  std::vector<ExprPtr> exprs;             // kOutput: [value]; kIf: conditions; kFor: [iterable]; kSet: [value]
  std::vector<std::vector<NodePtr>> bodies;  // kBlock: [children]; kIf: one per branch (+ else); kFor: [body]
  int line = 0;
};

}  // namespace mminfer::generate::jinja
