// NonMaxSuppression: per batch and class, the highest-scoring boxes whose overlap with those
// already kept stays within the IoU threshold.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/common/resample_float_io.h"

namespace mminfer::kernels {

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

}  // namespace

void register_non_max_suppression(Registry& r) {
  r.add({"NonMaxSuppression",
         "",
         10,
         1000,
         0,
         {DType::kFloat32, DType::kFloat64, DType::kFloat16},
         [](const KernelSpec& s) { return std::make_unique<NonMaxSuppression>(s); }});
}

}  // namespace mminfer::kernels
