// The kernel interface: created once per node (weights packed then), asked for output
// shapes once per input-shape signature, run many times. Kernels never see the IR.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/attributes.h"
#include "mminfer/status.h"
#include "mminfer/tensor.h"

namespace mminfer::kernels {

struct KernelSpec {
  std::string name;     // node name, for messages
  std::string op_type;
  std::string domain;
  int opset = 0;
  const Attributes* attrs = nullptr;
  std::vector<DType> input_dtypes;            // kUndefined when omitted or unknown
  std::vector<const Tensor*> constant_inputs;  // non-null where the input is an initializer
  size_t num_inputs = 0;
  size_t num_outputs = 0;

  const Attributes& a() const { return *attrs; }
  bool has_input(size_t i) const { return i < num_inputs && input_dtypes[i] != DType::kUndefined; }
};

struct TensorDesc {
  DType dtype = DType::kUndefined;
  Shape shape;
};

using Inputs = std::vector<const Tensor*>;  // nullptr where an optional input is omitted
using Outputs = std::vector<Tensor*>;

class Kernel {
 public:
  virtual ~Kernel() = default;
  // Output dtypes and shapes from the inputs. May read the values of inputs that decide
  // shapes (Reshape's target, Slice's starts); must not touch other inputs' data.
  virtual void infer(const Inputs& in, std::vector<TensorDesc>& out) = 0;
  // Computes outputs, already allocated to the inferred shapes.
  virtual void run(const Inputs& in, Outputs& out) = 0;

  // Output `o` may overwrite input returned here (same byte size); -1: never.
  virtual int inplace_input(int /*o*/) const { return -1; }
  // Output `o` is input returned here with a new shape: the executor aliases, never runs.
  virtual int alias_input(int /*o*/) const { return -1; }
  // For these shapes (`out` as infer gave them), output `o` is a stretch of the input returned
  // here, starting *byte_offset bytes in: a Transpose that moves only dimensions of size 1, a
  // Split whose dimensions before the axis are all 1. The executor may then alias instead of
  // copying; -1: a copy is needed.
  virtual int view_input(int /*o*/, const Inputs& /*in*/, const std::vector<TensorDesc>& /*out*/,
                         int64_t* /*byte_offset*/) const {
    return -1;
  }
  // True when infer's outputs follow from the inputs' dtypes and shapes alone and infer keeps
  // nothing for run: a planned run whose inputs have the planned shapes then takes the planned
  // outputs instead of asking again (a decode step's ~200 small ops).
  virtual bool infers_from_shapes() const { return false; }
  // True when output shapes depend on input values (NonZero): infer is not called and
  // run allocates the outputs itself (out tensors arrive undefined).
  virtual bool outputs_need_run() const { return false; }
  // True when run hands its work to oneDNN, whose own OpenMP regions run single-threaded inside
  // a held spin team (core/spin_team.h), so the executor never tries one for such a graph.
  virtual bool runs_onednn() const { return false; }
};

// Helpers shared by kernels for argument checks; they throw Error with a clear message.
[[noreturn]] void fail(const std::string& message);
const Tensor& need_input(const Inputs& in, size_t i, const char* what);
// `what` names the value in the error: "axis", "axes value", "DFT axis" ("axes value 5 is out ...").
int64_t normalize_axis(int64_t axis, int64_t rank, const char* what);
std::vector<int64_t> read_int_tensor(const Tensor& t, const char* what);  // int32/int64 → int64
double read_scalar(const Tensor& t, const char* what);                   // any numeric dtype

}  // namespace mminfer::kernels
