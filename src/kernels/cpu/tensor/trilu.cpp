// Trilu: keeps the upper or lower triangle (offset by k) of the last two dims, zeroing the rest.
#include <algorithm>
#include <cstring>

#include "core/parallel.h"
#include "kernels/cpu/common/registry.h"

namespace mminfer::kernels {

namespace {

class TriluKernel final : public Kernel {
 public:
  explicit TriluKernel(const KernelSpec& s) : upper_(s.a().get_int("upper", 1) != 0) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "input");
    if (x.rank() < 2) fail("input must have rank >= 2, got " + shape_str(x.shape()));
    out[0] = {x.dtype(), x.shape()};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    int64_t k = 0;
    if (in.size() > 1 && in[1]) {
      std::vector<int64_t> kv = read_int_tensor(*in[1], "k");
      if (kv.size() != 1) fail("k must be a scalar, got " + shape_str(in[1]->shape()));
      k = kv[0];
    }
    int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
    int64_t total_rows = rows == 0 ? 0 : x.numel() / std::max<int64_t>(cols, 1);
    if (cols == 0) return;
    size_t es = dtype_size(x.dtype());
    const char* src = static_cast<const char*>(x.raw());
    char* dst = static_cast<char*>(out[0]->raw());
    parallel_for(total_rows, 64, [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) {
        int64_t i = row % rows;
        // Keep columns [keep0, keep1); zero (all-zero bits is 0 for every dtype) the rest.
        int64_t keep0 = upper_ ? std::clamp<int64_t>(i + k, 0, cols) : 0;
        int64_t keep1 = upper_ ? cols : std::clamp<int64_t>(i + k + 1, 0, cols);
        keep1 = std::max(keep0, keep1);
        char* d = dst + row * cols * static_cast<int64_t>(es);
        const char* s = src + row * cols * static_cast<int64_t>(es);
        std::memset(d, 0, static_cast<size_t>(keep0) * es);
        std::memcpy(d + keep0 * static_cast<int64_t>(es), s + keep0 * static_cast<int64_t>(es),
                    static_cast<size_t>(keep1 - keep0) * es);
        std::memset(d + keep1 * static_cast<int64_t>(es), 0, static_cast<size_t>(cols - keep1) * es);
      }
    });
  }

 private:
  bool upper_;
};

}  // namespace

void register_trilu(Registry& r) {
  r.add({"Trilu", "", 14, 1000, 0, kAllTypes,
         [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<TriluKernel>(s); }});
}

}  // namespace mminfer::kernels
