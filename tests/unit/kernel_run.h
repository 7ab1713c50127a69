// Runs one kernel straight through the registry, for kernel tests.
#pragma once
#include <algorithm>
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

// A float32 tensor of `shape` holding `v` (its size must match).
inline Tensor floats(Shape shape, const std::vector<float>& v) {
  Tensor t = Tensor::empty(DType::kFloat32, std::move(shape));
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

// Creates the kernel for `op` with the inputs whose `constant` flag is set offered as constants
// (so weights are packed at creation), infers and runs it `runs` times (a second run covers state
// the kernel caches); returns the last run's outputs. Float outputs it allocates start as garbage,
// so an element the kernel fails to write shows. An output given in `into` is written there (the
// returned tensor for it is then left unwritten).
inline std::vector<Tensor> run_kernel(const std::string& op, const std::string& domain, int opset, const Attributes& attrs,
                                      const std::vector<const Tensor*>& inputs, size_t num_outputs,
                                      const std::vector<bool>& constant = {}, const std::vector<Tensor*>& into = {},
                                      int runs = 1) {
  kernels::KernelSpec spec;
  spec.name = spec.op_type = op;
  spec.domain = domain;
  spec.opset = opset;
  spec.attrs = &attrs;
  spec.num_inputs = inputs.size();
  spec.num_outputs = num_outputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    spec.input_dtypes.push_back(inputs[i] ? inputs[i]->dtype() : DType::kUndefined);
    spec.constant_inputs.push_back(i < constant.size() && constant[i] ? inputs[i] : nullptr);
  }
  auto kernel = runtime::kernel_registry().create(spec);
  kernels::Inputs in(inputs.begin(), inputs.end());
  std::vector<Tensor> owned;
  for (int run = 0; run < runs; ++run) {
    std::vector<kernels::TensorDesc> d(num_outputs);
    kernel->infer(in, d);
    owned.clear();
    for (size_t i = 0; i < num_outputs; ++i) {
      owned.push_back(Tensor::empty(d[i].dtype, d[i].shape));
      if (d[i].dtype == DType::kFloat32) std::fill_n(owned.back().data<float>(), owned.back().numel(), 12345.f);
    }
    kernels::Outputs out;
    for (size_t i = 0; i < num_outputs; ++i) out.push_back(i < into.size() && into[i] ? into[i] : &owned[i]);
    kernel->run(in, out);
  }
  return owned;
}

// The same for a kernel's first output alone.
inline Tensor run_kernel_once(const std::string& op, const std::string& domain, int opset, const Attributes& attrs,
                              const std::vector<const Tensor*>& inputs, const std::vector<bool>& constant) {
  return run_kernel(op, domain, opset, attrs, inputs, 1, constant).at(0);
}

}  // namespace mminfer::testing
