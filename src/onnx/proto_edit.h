// Small edits of an ONNX ModelProto shared by the writers of quantized forms.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "mminfer/tensor.h"

namespace mminfer::onnx_io {

// The ModelProto in `path`; throws Error when the file is missing or is not ONNX.
onnx::ModelProto read_model_proto(const std::string& path);

bool is_default_domain(const std::string& d);
// The default domain's opset version (0 when the model imports none).
int64_t default_opset(const onnx::ModelProto& model);
// Initializers and the values of Constant nodes, by name.
std::map<std::string, const onnx::TensorProto*> initializers(const onnx::GraphProto& g);
// The initializer `name` when it is float32 of the given rank, else null.
const onnx::TensorProto* float_initializer(const std::map<std::string, const onnx::TensorProto*>& inits,
                                           const std::string& name, int rank);

// Names already used by nodes, values, initializers and graph inputs; fresh() hands out new ones.
class NameSet {
 public:
  explicit NameSet(const onnx::GraphProto& g);
  std::string fresh(const std::string& base);

 private:
  std::set<std::string> taken_;
};

onnx::NodeProto make_node(const std::string& op, const std::vector<std::string>& in, const std::vector<std::string>& out,
                          const std::string& name);
// Float weights as int8, symmetric, one scale per index of `axis` (max |w| / 127; 1 for an
// all-zero or non-finite channel, whose non-finite values become 0): {int8 weights, scales}.
std::pair<Tensor, Tensor> symmetric_int8(const Tensor& w, int64_t axis);

// `t` named `name`, appended to `out` (initializers to add).
void add_initializer(std::vector<onnx::TensorProto>& out, const Tensor& t, const std::string& name);
// Cast(in, to = FLOAT) -> out.
onnx::NodeProto make_cast_to_float(const std::string& in, const std::string& out, const std::string& name);
void set_int_attribute(onnx::NodeProto* n, const std::string& name, int64_t value);

// Reads the main graph's initializers stored as external data (relative to base_dir) into the
// file itself, so a rewritten model written elsewhere needs no .data file beside it. Returns how
// many moved.
int inline_external_data(onnx::ModelProto& model, const std::string& base_dir);

// Drops initializers (and their graph-input entries, which older files have) and Constant nodes
// that nothing reads.
void drop_unused_initializers(onnx::GraphProto* g);
// The writers' last step: the graph's nodes become `nodes`, `initializers` join the others, and
// what nothing reads any more goes.
void replace_nodes(onnx::GraphProto* g, std::vector<onnx::NodeProto> nodes, std::vector<onnx::TensorProto> initializers);

}  // namespace mminfer::onnx_io
