// Creating and running one node's kernel outside a plan (for executors and constant folding).
#pragma once
#include <memory>
#include <vector>

#include "ir/graph.h"
#include "kernels/cpu/common/kernel.h"

namespace mminfer::runtime {

// The spec the registry needs for `node`; it points into `graph`, which must outlive it.
kernels::KernelSpec make_kernel_spec(const ir::Graph& graph, const ir::Node& node);
std::unique_ptr<kernels::Kernel> create_kernel(const ir::Graph& graph, const ir::Node& node);

// Runs a node whose inputs are all constants; returns its outputs (owning their bytes), or
// nothing when its kernel may not be computed ahead (KernelTraits::foldable) or there is none.
std::vector<Tensor> evaluate_node(const ir::Graph& graph, const ir::Node& node);

}  // namespace mminfer::runtime
