// Maps (domain, op, opset, dtype) to a kernel factory.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kernels/cpu/common/kernel.h"

namespace mminfer::kernels {

using KernelFactory = std::function<std::unique_ptr<Kernel>(const KernelSpec&)>;

struct KernelDef {
  std::string op;
  std::string domain;          // "" is the default ONNX domain
  int since = 1;               // opset range this kernel implements, inclusive
  int until = 1000;
  int type_input = 0;          // which input's dtype the list below constrains
  std::vector<DType> types;    // empty: any dtype
  KernelFactory make;
};

class Registry {
 public:
  static Registry& instance();
  void add(KernelDef def);
  // Throws Error naming node, op, opset and dtype when nothing matches.
  std::unique_ptr<Kernel> create(const KernelSpec& spec) const;
  bool has_op(const std::string& domain, const std::string& op) const;
  std::vector<std::string> ops() const;

 private:
  Registry();
  std::map<std::pair<std::string, std::string>, std::vector<KernelDef>> defs_;
};

// Common dtype lists.
extern const std::vector<DType> kFloatTypes;    // float32, float64, float16
extern const std::vector<DType> kNumericTypes;  // all numeric
extern const std::vector<DType> kAllTypes;      // numeric + bool

}  // namespace mminfer::kernels
