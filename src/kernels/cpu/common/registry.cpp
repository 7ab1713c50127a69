#include "kernels/cpu/common/registry.h"

#include <algorithm>
#include <stdexcept>

namespace mminfer::kernels {

const std::vector<DType> kFloatTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16};
const std::vector<DType> kNumericTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt64,
                                          DType::kInt32,   DType::kInt16,   DType::kInt8,    DType::kUint8,
                                          DType::kUint16,  DType::kUint32,  DType::kUint64};
const std::vector<DType> kAllTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt64,
                                      DType::kInt32,   DType::kInt16,   DType::kInt8,    DType::kUint8,
                                      DType::kUint16,  DType::kUint32,  DType::kUint64,  DType::kBool,
                                      DType::kBFloat16};

void Registry::add(KernelDef def, KernelTraits traits) {
  Op& op = ops_[{def.domain, def.op}];
  if (!op.defs.empty() && !(op.traits == traits))
    throw std::logic_error("kernel registry: " + def.op + " registered with two different sets of traits");
  op.traits = traits;
  op.defs.push_back(std::move(def));
}

bool Registry::has_op(const std::string& domain, const std::string& op) const {
  return ops_.count({domain, op}) != 0;
}

const KernelTraits* Registry::traits(const std::string& domain, const std::string& op) const {
  auto it = ops_.find({domain, op});
  return it == ops_.end() ? nullptr : &it->second.traits;
}

std::vector<std::string> Registry::ops() const {
  std::vector<std::string> out;
  for (auto& [k, v] : ops_) out.push_back(k.first.empty() ? k.second : k.first + "::" + k.second);
  return out;
}

std::unique_ptr<Kernel> Registry::create(const KernelSpec& spec) const {
  std::string where = "node '" + spec.name + "' (" + (spec.domain.empty() ? "" : spec.domain + "::") + spec.op_type +
                      ", opset " + std::to_string(spec.opset) + ")";
  auto it = ops_.find({spec.domain, spec.op_type});
  if (it == ops_.end()) throw Error(where + ": operator is not supported");
  bool opset_ok = false;
  std::string type_problem;
  for (const KernelDef& d : it->second.defs) {
    if (spec.opset < d.since || spec.opset > d.until) continue;
    opset_ok = true;
    if (!d.types.empty() && static_cast<size_t>(d.type_input) < spec.input_dtypes.size()) {
      DType t = spec.input_dtypes[d.type_input];
      if (t != DType::kUndefined && std::find(d.types.begin(), d.types.end(), t) == d.types.end()) {
        type_problem = "input " + std::to_string(d.type_input) + " has dtype " + dtype_name(t) + ", which is not supported";
        continue;
      }
    }
    try {
      return d.make(spec);
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
  }
  if (!opset_ok) throw Error(where + ": this opset version is not supported");
  throw Error(where + ": " + type_problem);
}

}  // namespace mminfer::kernels
