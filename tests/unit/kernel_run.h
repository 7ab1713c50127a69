// Runs one kernel straight through the registry, for kernel tests.
#pragma once
#include <random>
#include <string>
#include <vector>

#include "runtime/kernel_registry.h"

namespace mminfer::testing {

// n normally distributed floats, fixed by `seed`.
inline std::vector<float> normal(size_t n, unsigned seed, float scale = 1.f, float mean = 0.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(mean, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Creates the kernel for `op` with the inputs whose `constant` flag is set offered as constants
// (so weights are packed at creation), infers and runs it once; returns its first output.
inline Tensor run_kernel_once(const std::string& op, const std::string& domain, int opset, const Attributes& attrs,
                              const std::vector<const Tensor*>& inputs, const std::vector<bool>& constant) {
  kernels::KernelSpec spec;
  spec.name = spec.op_type = op;
  spec.domain = domain;
  spec.opset = opset;
  spec.attrs = &attrs;
  spec.num_inputs = inputs.size();
  spec.num_outputs = 1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    spec.input_dtypes.push_back(inputs[i] ? inputs[i]->dtype() : DType::kUndefined);
    spec.constant_inputs.push_back(i < constant.size() && constant[i] ? inputs[i] : nullptr);
  }
  auto kernel = runtime::kernel_registry().create(spec);
  kernels::Inputs in(inputs.begin(), inputs.end());
  std::vector<kernels::TensorDesc> d(1);
  kernel->infer(in, d);
  Tensor y = Tensor::empty(d[0].dtype, d[0].shape);
  kernels::Outputs out = {&y};
  kernel->run(in, out);
  return y;
}

}  // namespace mminfer::testing
