// Float32 views of float32 / float16 tensors for kernels that compute in float: FP16 models run
// through the same float path, converted once on the way in and once on the way out.
#pragma once
#include <algorithm>
#include <vector>

#include "core/half.h"
#include "kernels/cpu/common/kernel.h"

namespace mminfer::kernels {

// The tensor's floats: its own bytes when float32, else a converted copy.
class FloatIn {
 public:
  FloatIn() = default;
  explicit FloatIn(const Tensor* t) {
    if (!t) return;
    if (t->dtype() == DType::kFloat32) {
      p_ = t->data<float>();
      return;
    }
    own_.resize(static_cast<size_t>(t->numel()));
    const uint16_t* h = t->data<uint16_t>();
    for (size_t i = 0; i < own_.size(); ++i) own_[i] = half_to_float(h[i]);
    p_ = own_.data();
  }
  const float* data() const { return p_; }

 private:
  const float* p_ = nullptr;
  std::vector<float> own_;
};

// Where a kernel writes an output in float: the tensor itself when float32, else scratch that
// finish() converts into it. A missing (optional) output gets scratch of `numel` floats.
class FloatOut {
 public:
  FloatOut(Tensor* t, int64_t numel) : t_(t) {
    if (t && t->dtype() == DType::kFloat32) {
      p_ = t->data<float>();
      return;
    }
    own_.resize(static_cast<size_t>(numel));
    p_ = own_.data();
  }
  float* data() { return p_; }
  void finish() {
    if (!t_ || t_->dtype() == DType::kFloat32) return;
    uint16_t* h = t_->data<uint16_t>();
    for (size_t i = 0; i < own_.size(); ++i) h[i] = float_to_half(own_[i]);
  }

 private:
  Tensor* t_;
  float* p_ = nullptr;
  std::vector<float> own_;
};

}  // namespace mminfer::kernels
