// Ops without a family of their own: NonMaxSuppression and Det. Also registers the signal
// (DFT, STFT, windows, mel) and recurrent (RNN, GRU, LSTM) kernels.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/cpu/registry.h"
#include "kernels/cpu/resample_float_io.h"

namespace mminfer::kernels {

void register_signal(Registry& r);
void register_recurrent(Registry& r);

namespace {

// Greedy per-(batch, class) selection: highest scores first, dropping boxes whose IoU with
// an already selected box exceeds the threshold.
class NonMaxSuppression final : public Kernel {
 public:
  explicit NonMaxSuppression(const KernelSpec& spec) { center_point_ = spec.a().get_int("center_point_box", 0) != 0; }
  bool outputs_need_run() const override { return true; }
  void infer(const Inputs&, std::vector<TensorDesc>&) override {}

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& boxes_t = need_input(in, 0, "boxes");
    const Tensor& scores_t = need_input(in, 1, "scores");
    if (boxes_t.rank() != 3 || boxes_t.dim(2) != 4)
      fail("input boxes must be (batch, spatial, 4), got " + shape_str(boxes_t.shape()));
    if (scores_t.rank() != 3 || scores_t.dim(0) != boxes_t.dim(0) || scores_t.dim(2) != boxes_t.dim(1))
      fail("input scores must be (batch, classes, spatial) matching boxes, got " + shape_str(scores_t.shape()));
    int64_t max_out = 0;
    if (in.size() > 2 && in[2] && in[2]->defined() && in[2]->numel() > 0)
      max_out = static_cast<int64_t>(read_scalar(*in[2], "max_output_boxes_per_class"));
    float iou_threshold = 0.0f, score_threshold = 0.0f;
    bool use_score = false;
    if (in.size() > 3 && in[3] && in[3]->defined() && in[3]->numel() > 0)
      iou_threshold = static_cast<float>(read_scalar(*in[3], "iou_threshold"));
    if (in.size() > 4 && in[4] && in[4]->defined() && in[4]->numel() > 0) {
      score_threshold = static_cast<float>(read_scalar(*in[4], "score_threshold"));
      use_score = true;
    }
    std::vector<float> boxes = load_floats(boxes_t), scores = load_floats(scores_t);
    const int64_t B = boxes_t.dim(0), S = boxes_t.dim(1), C = scores_t.dim(1);
    // Corner form with y1 <= y2 and x1 <= x2, whatever the input order.
    std::vector<float> corners(boxes.size());
    for (int64_t i = 0; i < B * S; ++i) {
      const float* b = &boxes[i * 4];
      float y1, x1, y2, x2;
      if (center_point_) {
        x1 = b[0] - b[2] / 2;
        x2 = b[0] + b[2] / 2;
        y1 = b[1] - b[3] / 2;
        y2 = b[1] + b[3] / 2;
      } else {
        y1 = b[0];
        x1 = b[1];
        y2 = b[2];
        x2 = b[3];
      }
      float* c = &corners[i * 4];
      c[0] = std::min(y1, y2);
      c[1] = std::min(x1, x2);
      c[2] = std::max(y1, y2);
      c[3] = std::max(x1, x2);
    }
    std::vector<int64_t> selected;
    std::vector<int64_t> order, kept;
    for (int64_t b = 0; b < B && max_out > 0; ++b)
      for (int64_t c = 0; c < C; ++c) {
        const float* sc = &scores[(b * C + c) * S];
        order.clear();
        for (int64_t i = 0; i < S; ++i)
          if (!use_score || sc[i] > score_threshold) order.push_back(i);
        std::stable_sort(order.begin(), order.end(), [&](int64_t l, int64_t r) { return sc[l] > sc[r]; });
        kept.clear();
        for (int64_t i : order) {
          if (static_cast<int64_t>(kept.size()) >= max_out) break;
          bool keep = true;
          for (int64_t k : kept)
            if (iou(&corners[(b * S + i) * 4], &corners[(b * S + k) * 4]) > iou_threshold) {
              keep = false;
              break;
            }
          if (!keep) continue;
          kept.push_back(i);
          selected.insert(selected.end(), {b, c, i});
        }
      }
    Tensor result = Tensor::empty(DType::kInt64, {static_cast<int64_t>(selected.size() / 3), 3});
    std::copy(selected.begin(), selected.end(), result.data<int64_t>());
    *out[0] = std::move(result);
  }

 private:
  static float iou(const float* a, const float* b) {
    float ih = std::min(a[2], b[2]) - std::max(a[0], b[0]);
    float iw = std::min(a[3], b[3]) - std::max(a[1], b[1]);
    if (ih <= 0 || iw <= 0) return 0.0f;
    float inter = ih * iw;
    float uni = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    return uni > 0 ? inter / uni : 0.0f;
  }
  bool center_point_ = false;
};

// Determinant of each trailing square matrix via LU with partial pivoting, in double.
class Det final : public Kernel {
 public:
  explicit Det(const KernelSpec&) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "X");
    if (x.rank() < 2 || x.dim(x.rank() - 1) != x.dim(x.rank() - 2))
      fail("input X must end in a square matrix, got " + shape_str(x.shape()));
    out[0] = {x.dtype(), Shape(x.shape().begin(), x.shape().end() - 2)};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    int64_t n = x.dim(x.rank() - 1);
    // float64 keeps its precision; the other float types are exact in float.
    std::vector<double> xs;
    if (x.dtype() == DType::kFloat64) {
      xs.assign(x.data<double>(), x.data<double>() + x.numel());
    } else {
      std::vector<float> f = load_floats(x);
      xs.assign(f.begin(), f.end());
    }
    int64_t count = out[0]->numel();
    std::vector<double> dets(static_cast<size_t>(count));
    std::vector<double> m(static_cast<size_t>(n * n));
    for (int64_t b = 0; b < count; ++b) {
      for (int64_t i = 0; i < n * n; ++i) m[i] = xs[b * n * n + i];
      double det = 1;
      for (int64_t k = 0; k < n; ++k) {
        int64_t piv = k;
        for (int64_t r = k + 1; r < n; ++r)
          if (std::abs(m[r * n + k]) > std::abs(m[piv * n + k])) piv = r;
        if (m[piv * n + k] == 0) {
          det = 0;
          break;
        }
        if (piv != k) {
          for (int64_t c = 0; c < n; ++c) std::swap(m[k * n + c], m[piv * n + c]);
          det = -det;
        }
        det *= m[k * n + k];
        for (int64_t r = k + 1; r < n; ++r) {
          double f = m[r * n + k] / m[k * n + k];
          for (int64_t c = k; c < n; ++c) m[r * n + c] -= f * m[k * n + c];
        }
      }
      dets[b] = det;
    }
    if (out[0]->dtype() == DType::kFloat64) {
      std::copy(dets.begin(), dets.end(), out[0]->data<double>());
    } else {
      std::vector<float> f(dets.begin(), dets.end());
      store_floats(f.data(), *out[0]);
    }
  }
};

}  // namespace

void register_misc(Registry& r) {
  const std::vector<DType> float_types = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
  r.add({"NonMaxSuppression",
         "",
         10,
         1000,
         0,
         {DType::kFloat32, DType::kFloat64, DType::kFloat16},
         [](const KernelSpec& s) { return std::make_unique<NonMaxSuppression>(s); }});
  r.add({"Det", "", 11, 1000, 0, float_types, [](const KernelSpec& s) { return std::make_unique<Det>(s); }});
  register_signal(r);
  register_recurrent(r);
}

}  // namespace mminfer::kernels
