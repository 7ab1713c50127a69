// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (= log-softmax over the class axis,
// then NLL). Inputs are [N, C, d1...] with targets [N, d1...]; reduction none/sum/mean,
// optional class weights and ignore_index; SCE can also return the log-probabilities.
#include <string>

#include "kernels/cpu/common/numeric_visit.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/math/softmax_generic.h"
#include "kernels/cpu/math/softmax_simd.h"

namespace mminfer::kernels {

namespace {

enum class Reduction { kNone, kSum, kMean };

class LossKernel final : public Kernel {
 public:
  LossKernel(const KernelSpec& s, bool with_softmax)
      : with_softmax_(with_softmax), has_ignore_(s.a().has("ignore_index")), ignore_(s.a().get_int("ignore_index", 0)) {
    std::string r = s.a().get_string("reduction", "mean");
    if (r == "none") reduction_ = Reduction::kNone;
    else if (r == "sum") reduction_ = Reduction::kSum;
    else if (r == "mean") reduction_ = Reduction::kMean;
    else fail("reduction '" + r + "' is not one of none, sum, mean");
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, with_softmax_ ? "scores" : "input");
    const Tensor& t = need_input(in, 1, with_softmax_ ? "labels" : "target");
    if (x.rank() < 2) fail("scores must have rank >= 2 ([N, C, ...]), got " + shape_str(x.shape()));
    if (t.dtype() != DType::kInt32 && t.dtype() != DType::kInt64) fail("labels must be int32 or int64");
    Shape want = {x.dim(0)};
    want.insert(want.end(), x.shape().begin() + 2, x.shape().end());
    if (t.shape() != want)
      fail("labels have shape " + shape_str(t.shape()) + ", expected " + shape_str(want) + " for scores " +
           shape_str(x.shape()));
    const Tensor* w = in.size() > 2 ? in[2] : nullptr;
    if (w && w->defined()) {
      if (w->rank() != 1 || w->dim(0) != x.dim(1))
        fail("weights must have shape [" + std::to_string(x.dim(1)) + "], got " + shape_str(w->shape()));
      if (w->dtype() != x.dtype()) fail("weights dtype differs from the scores dtype");
    }
    out[0] = {x.dtype(), reduction_ == Reduction::kNone ? t.shape() : Shape{}};
    if (out.size() > 1) out[1] = {x.dtype(), x.shape()};
  }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    const Tensor* w = in.size() > 2 && in[2] && in[2]->defined() ? in[2] : nullptr;
    int64_t n = x.dim(0), c = x.dim(1), d = shape_numel(Shape(x.shape().begin() + 2, x.shape().end()));
    const Tensor* lp = &x;
    Tensor scratch;
    if (with_softmax_) {
      Tensor* dst = out.size() > 1 && out[1] && out[1]->defined() ? out[1] : nullptr;
      if (!dst) {
        scratch = Tensor::empty(x.dtype(), x.shape());
        dst = &scratch;
      }
      log_softmax(x, *dst, n, c, d);
      lp = dst;
    }
    std::vector<int64_t> labels = read_int_tensor(*in[1], "labels");
    switch (x.dtype()) {
      case DType::kFloat32: nll<Num<float>>(*lp, labels, w, *out[0], n, c, d); break;
      case DType::kFloat64: nll<Num<double>>(*lp, labels, w, *out[0], n, c, d); break;
      case DType::kFloat16: nll<NumHalf>(*lp, labels, w, *out[0], n, c, d); break;
      case DType::kBFloat16: nll<NumBf16>(*lp, labels, w, *out[0], n, c, d); break;
      default: fail(std::string("scores have unsupported dtype ") + dtype_name(x.dtype()));
    }
  }

 private:
  static void log_softmax(const Tensor& x, Tensor& y, int64_t n, int64_t c, int64_t d) {
    switch (x.dtype()) {
      case DType::kFloat32: softmax_simd::softmax_f32(x.data<float>(), y.data<float>(), n, c, d, true); break;
      case DType::kFloat64:
        softmax_generic::softmax<Num<double>>(x.data<double>(), y.data<double>(), n, c, d, true);
        break;
      case DType::kFloat16:
        softmax_generic::softmax<NumHalf>(x.data<uint16_t>(), y.data<uint16_t>(), n, c, d, true);
        break;
      case DType::kBFloat16:
        softmax_generic::softmax<NumBf16>(x.data<uint16_t>(), y.data<uint16_t>(), n, c, d, true);
        break;
      default: fail(std::string("scores have unsupported dtype ") + dtype_name(x.dtype()));
    }
  }

  template <typename N>
  void nll(const Tensor& lp, const std::vector<int64_t>& labels, const Tensor* w, Tensor& loss, int64_t n, int64_t c,
           int64_t d) const {
    using S = typename N::Storage;
    const S* p = lp.data<S>();
    const S* wp = w ? w->data<S>() : nullptr;
    S* out = loss.data<S>();
    double total = 0, weight_sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < d; ++j) {
        int64_t t = labels[static_cast<size_t>(i * d + j)];
        double value = 0, weight = 0;
        if (!(has_ignore_ && t == ignore_)) {
          if (t < 0 || t >= c)
            fail("label " + std::to_string(t) + " is outside [0, " + std::to_string(c) + ") and is not ignore_index");
          weight = wp ? static_cast<double>(N::load(wp[t])) : 1.0;
          value = -static_cast<double>(N::load(p[(i * c + t) * d + j])) * weight;
        }
        if (reduction_ == Reduction::kNone) out[i * d + j] = N::store(static_cast<typename N::Compute>(value));
        total += value;
        weight_sum += weight;
      }
    }
    if (reduction_ == Reduction::kSum) out[0] = N::store(static_cast<typename N::Compute>(total));
    if (reduction_ == Reduction::kMean) out[0] = N::store(static_cast<typename N::Compute>(total / weight_sum));
  }

  bool with_softmax_;
  bool has_ignore_;
  int64_t ignore_;
  Reduction reduction_ = Reduction::kMean;
};

}  // namespace

void register_losses(Registry& r) {
  std::vector<DType> floats = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
  r.add({"NegativeLogLikelihoodLoss", "", 12, 1000, 0, floats, [](const KernelSpec& s) -> std::unique_ptr<Kernel> {
           return std::make_unique<LossKernel>(s, false);
         }});
  r.add({"SoftmaxCrossEntropyLoss", "", 12, 1000, 0, floats, [](const KernelSpec& s) -> std::unique_ptr<Kernel> {
           return std::make_unique<LossKernel>(s, true);
         }});
}

}  // namespace mminfer::kernels
