// mminfer::RotateHalf: rotary position embedding in the form LLaMA-style exports spell out,
//   y = x · cos + rotate_half(x) · sin,   rotate_half(x) = concat(-x[..., D/2:], x[..., :D/2])
// which the fuse_rotate_half pass builds from its seven nodes. x is [..., S, D] (D even); cos
// and sin are full-width tables ([B, 1, S, D] in decoders) that broadcast to x without growing
// it: each of their dims equals x's or is 1. One pass over each row of D.
#include <array>

#include "core/parallel.h"
#include "kernels/cpu/common/registry.h"

namespace mminfer::kernels {

namespace {

constexpr size_t kMaxRank = 8;

// Where a table's row for each row of x starts: per leading dim of x an element stride (0 where
// the table broadcasts), and whether it holds D values per row or one.
struct TableWalk {
  const float* data = nullptr;
  std::array<int64_t, kMaxRank> stride{};
  int64_t step = 1;
};

void check_table(const Tensor& x, const Tensor& t, const char* what) {
  if (t.dtype() != DType::kFloat32) fail(std::string(what) + " must be float32, got " + dtype_name(t.dtype()));
  bool ok = t.rank() <= x.rank();
  for (size_t i = 0; ok && i < t.rank(); ++i) {
    int64_t d = t.dim(i), xd = x.dim(x.rank() - t.rank() + i);
    ok = d == xd || d == 1;
  }
  if (!ok) fail(std::string(what) + " of shape " + shape_str(t.shape()) + " does not broadcast to x's " + shape_str(x.shape()));
}

TableWalk walk(const Tensor& x, const Tensor& t) {
  TableWalk w;
  w.data = t.data<float>();
  size_t rank = x.rank(), lead = rank - 1, off = rank - t.rank();
  w.step = t.rank() > 0 && t.dim(t.rank() - 1) != 1 ? 1 : 0;
  int64_t running = t.rank() > 0 ? t.dim(t.rank() - 1) : 1;
  for (size_t i = lead; i-- > 0;) {
    if (i < off) break;
    int64_t d = t.dim(i - off);
    w.stride[i] = d == 1 ? 0 : running;
    running *= d;
  }
  return w;
}

int64_t row_offset(const Tensor& x, const TableWalk& w, int64_t row) {
  int64_t off = 0;
  for (size_t i = x.rank() - 1; i-- > 0;) {
    int64_t d = x.dim(i);
    off += (row % d) * w.stride[i];
    row /= d;
  }
  return off;
}

void rotate_row(const float* __restrict x, const float* __restrict c, const float* __restrict s, float* __restrict y,
                int64_t half) {
  for (int64_t k = 0; k < half; ++k) y[k] = x[k] * c[k] - x[k + half] * s[k];
  for (int64_t k = 0; k < half; ++k) y[k + half] = x[k + half] * c[k + half] + x[k] * s[k + half];
}

// A table with one value per row (last dim 1) on either side.
void rotate_row_strided(const float* x, const float* c, int64_t cstep, const float* s, int64_t sstep, float* y,
                        int64_t half) {
  for (int64_t k = 0; k < half; ++k) {
    y[k] = x[k] * c[k * cstep] - x[k + half] * s[k * sstep];
    y[k + half] = x[k + half] * c[(k + half) * cstep] + x[k] * s[(k + half) * sstep];
  }
}

class RotateHalfKernel final : public Kernel {
 public:
  explicit RotateHalfKernel(const KernelSpec&) {}

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "x");
    if (x.rank() < 1 || x.rank() > kMaxRank)
      fail("x must have rank 1 to " + std::to_string(kMaxRank) + ", got " + shape_str(x.shape()));
    if (x.dim(x.rank() - 1) % 2 != 0) fail("x's last dim must be even to rotate by halves, got " + shape_str(x.shape()));
    check_table(x, need_input(in, 1, "cos"), "cos");
    check_table(x, need_input(in, 2, "sin"), "sin");
    out[0] = {x.dtype(), x.shape()};
  }

  bool infers_from_shapes() const override { return true; }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    if (x.numel() == 0) return;
    int64_t d = x.dim(x.rank() - 1), half = d / 2, rows = x.numel() / d;
    TableWalk cw = walk(x, *in[1]), sw = walk(x, *in[2]);
    const float* src = x.data<float>();
    float* dst = out[0]->data<float>();
    parallel_for(rows, std::max<int64_t>(1, 8192 / d), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const float* c = cw.data + row_offset(x, cw, r);
        const float* s = sw.data + row_offset(x, sw, r);
        if (cw.step == 1 && sw.step == 1) rotate_row(src + r * d, c, s, dst + r * d, half);
        else rotate_row_strided(src + r * d, c, cw.step, s, sw.step, dst + r * d, half);
      }
    });
  }
};

}  // namespace

void register_rotate_half(Registry& r) {
  r.add({"RotateHalf", "mminfer", 1, 1000, 0, {DType::kFloat32},
         [](const KernelSpec& s) { return std::make_unique<RotateHalfKernel>(s); }},
        kNotFoldable);
}

}  // namespace mminfer::kernels
