// Maps (domain, op, opset, dtype) to a kernel factory, and (domain, op) to the op's traits. The
// list of every op family's registration is runtime/kernel_registry.cpp.
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

// Facts about an op that the runtime and the passes act on, stated once where it is registered.
struct KernelTraits {
  // Its outputs follow from its inputs alone, so they may be computed ahead: folded at load when
  // every input is constant, frozen per shape signature when they derive from shapes only. Not
  // so for control flow (it runs subgraphs) and the fused mminfer ops (fusion builds them from
  // nodes folding already left alone; evaluating one would pack weights only to drop them).
  bool foldable = true;
  // Dominates run time (GEMM, convolution, attention, recurrence): what makes two branches of a
  // graph worth running at once (runtime/branches.cpp).
  bool heavy = false;
  bool operator==(const KernelTraits&) const = default;
};
inline constexpr KernelTraits kHeavy{.foldable = true, .heavy = true};
inline constexpr KernelTraits kNotFoldable{.foldable = false, .heavy = false};

class Registry {
 public:
  // Every definition of one op carries the same traits; a second add() that disagrees throws.
  void add(KernelDef def, KernelTraits traits = {});
  // Throws Error naming node, op, opset and dtype when nothing matches.
  std::unique_ptr<Kernel> create(const KernelSpec& spec) const;
  bool has_op(const std::string& domain, const std::string& op) const;
  // The op's traits, or null when no kernel implements it.
  const KernelTraits* traits(const std::string& domain, const std::string& op) const;
  std::vector<std::string> ops() const;

 private:
  struct Op {
    std::vector<KernelDef> defs;
    KernelTraits traits;
  };
  std::map<std::pair<std::string, std::string>, Op> ops_;
};

// Common dtype lists.
extern const std::vector<DType> kFloatTypes;    // float32, float64, float16
extern const std::vector<DType> kNumericTypes;  // all numeric
extern const std::vector<DType> kAllTypes;      // numeric + bool

}  // namespace mminfer::kernels
