#include "kernels/cpu/common/registry.h"

#include <algorithm>

namespace mminfer::kernels {

// One line per kernel file: each registers its op family.
void register_elementwise_unary(Registry&);
void register_elementwise_binary(Registry&);
void register_activations(Registry&);
void register_cast(Registry&);
void register_shape_ops(Registry&);
void register_gather_scatter(Registry&);
void register_slice_concat(Registry&);
void register_generators(Registry&);
void register_reductions(Registry&);
void register_softmax(Registry&);
void register_normalization(Registry&);
void register_matmul(Registry&);
void register_conv(Registry&);
void register_pooling(Registry&);
void register_resize(Registry&);
void register_quantize(Registry&);
void register_non_max_suppression(Registry&);
void register_det(Registry&);
void register_signal(Registry&);
void register_recurrent(Registry&);
void register_attention(Registry&);

const std::vector<DType> kFloatTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16};
const std::vector<DType> kNumericTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt64,
                                          DType::kInt32,   DType::kInt16,   DType::kInt8,    DType::kUint8,
                                          DType::kUint16,  DType::kUint32,  DType::kUint64};
const std::vector<DType> kAllTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt64,
                                      DType::kInt32,   DType::kInt16,   DType::kInt8,    DType::kUint8,
                                      DType::kUint16,  DType::kUint32,  DType::kUint64,  DType::kBool,
                                      DType::kBFloat16};

Registry::Registry() {
  register_elementwise_unary(*this);
  register_elementwise_binary(*this);
  register_activations(*this);
  register_cast(*this);
  register_shape_ops(*this);
  register_gather_scatter(*this);
  register_slice_concat(*this);
  register_generators(*this);
  register_reductions(*this);
  register_softmax(*this);
  register_normalization(*this);
  register_matmul(*this);
  register_conv(*this);
  register_pooling(*this);
  register_resize(*this);
  register_quantize(*this);
  register_non_max_suppression(*this);
  register_det(*this);
  register_signal(*this);
  register_recurrent(*this);
  register_attention(*this);
}

Registry& Registry::instance() {
  static Registry r;
  return r;
}

void Registry::add(KernelDef def) {
  auto key = std::make_pair(def.domain, def.op);
  defs_[key].push_back(std::move(def));
}

bool Registry::has_op(const std::string& domain, const std::string& op) const {
  return defs_.count({domain, op}) != 0;
}

std::vector<std::string> Registry::ops() const {
  std::vector<std::string> out;
  for (auto& [k, v] : defs_) out.push_back(k.first.empty() ? k.second : k.first + "::" + k.second);
  return out;
}

std::unique_ptr<Kernel> Registry::create(const KernelSpec& spec) const {
  std::string where = "node '" + spec.name + "' (" + (spec.domain.empty() ? "" : spec.domain + "::") + spec.op_type +
                      ", opset " + std::to_string(spec.opset) + ")";
  auto it = defs_.find({spec.domain, spec.op_type});
  if (it == defs_.end()) throw Error(where + ": operator is not supported");
  bool opset_ok = false;
  std::string type_problem;
  for (const KernelDef& d : it->second) {
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
