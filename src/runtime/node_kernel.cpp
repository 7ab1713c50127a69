#include "runtime/node_kernel.h"

#include "runtime/kernel_registry.h"

namespace mminfer::runtime {

kernels::KernelSpec make_kernel_spec(const ir::Graph& graph, const ir::Node& node) {
  kernels::KernelSpec spec;
  spec.name = graph.label(node);
  spec.op_type = node.op_type;
  spec.domain = node.domain;
  spec.opset = node.opset;
  spec.attrs = &node.attrs;
  spec.num_inputs = node.inputs.size();
  spec.num_outputs = node.outputs.size();
  for (int v : node.inputs) {
    // Unknown dtypes (no shape inference for this value) are checked by the kernel at run time.
    spec.input_dtypes.push_back(v < 0 ? DType::kUndefined : graph.values[v].dtype);
    spec.constant_inputs.push_back(v >= 0 && graph.values[v].is_constant ? &graph.values[v].constant : nullptr);
  }
  return spec;
}

std::unique_ptr<kernels::Kernel> create_kernel(const ir::Graph& graph, const ir::Node& node) {
  return kernel_registry().create(make_kernel_spec(graph, node));
}

std::vector<Tensor> evaluate_node(const ir::Graph& graph, const ir::Node& node) {
  const kernels::KernelTraits* traits = kernel_registry().traits(node.domain, node.op_type);
  if (!traits || !traits->foldable) return {};
  auto kernel = create_kernel(graph, node);
  kernels::Inputs in;
  for (int v : node.inputs) in.push_back(v >= 0 ? &graph.values[v].constant : nullptr);
  std::vector<Tensor> results(node.outputs.size());
  kernels::Outputs out;
  for (auto& t : results) out.push_back(&t);
  if (kernel->outputs_need_run()) {
    kernel->run(in, out);
    return results;
  }
  std::vector<kernels::TensorDesc> descs(node.outputs.size());
  kernel->infer(in, descs);
  bool needs_run = false;
  for (size_t i = 0; i < results.size(); ++i) {
    int a = kernel->alias_input(static_cast<int>(i));
    if (a >= 0 && in[a]) {
      if (shape_numel(descs[i].shape) * dtype_size(descs[i].dtype) != in[a]->nbytes())
        throw Error("reinterpretation changes the element count");
      results[i] = Tensor::alias(*in[a], descs[i].dtype, descs[i].shape, const_cast<void*>(in[a]->raw()));
    } else {
      results[i] = Tensor::empty(descs[i].dtype, descs[i].shape);
      needs_run = true;
    }
  }
  if (needs_run) kernel->run(in, out);
  return results;
}

}  // namespace mminfer::runtime
