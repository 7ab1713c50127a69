// ReverseSequence: reverses the first sequence_lens[b] steps along the time axis for each batch.
#include <cstring>

#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/common/strided_copy.h"

namespace mminfer::kernels {

namespace {

class ReverseSequenceKernel final : public Kernel {
 public:
  explicit ReverseSequenceKernel(const KernelSpec& s)
      : batch_axis_(s.a().get_int("batch_axis", 1)), time_axis_(s.a().get_int("time_axis", 0)) {
    if ((batch_axis_ != 0 && batch_axis_ != 1) || (time_axis_ != 0 && time_axis_ != 1) || batch_axis_ == time_axis_)
      fail("batch_axis and time_axis must be 0 and 1 in some order");
  }
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "input");
    if (x.rank() < 2) fail("input must have rank >= 2, got " + shape_str(x.shape()));
    lengths(in);
    out[0] = {x.dtype(), x.shape()};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    std::vector<int64_t> lens = lengths(in);
    std::memcpy(out[0]->raw(), x.raw(), x.nbytes());
    std::vector<int64_t> strides = layout::contiguous_strides(x.shape());
    size_t es = dtype_size(x.dtype());
    size_t chunk = static_cast<size_t>(strides[1]) * es;  // one (time, batch) cell
    int64_t st = strides[static_cast<size_t>(time_axis_)], sb = strides[static_cast<size_t>(batch_axis_)];
    const char* src = static_cast<const char*>(x.raw());
    char* dst = static_cast<char*>(out[0]->raw());
    for (size_t b = 0; b < lens.size(); ++b)
      for (int64_t t = 0; t < lens[b]; ++t)
        std::memcpy(dst + (t * st + static_cast<int64_t>(b) * sb) * static_cast<int64_t>(es),
                    src + ((lens[b] - 1 - t) * st + static_cast<int64_t>(b) * sb) * static_cast<int64_t>(es), chunk);
  }

 private:
  std::vector<int64_t> lengths(const Inputs& in) const {
    const Tensor& x = *in[0];
    std::vector<int64_t> lens = read_int_tensor(need_input(in, 1, "sequence_lens"), "sequence_lens");
    int64_t batch = x.dim(static_cast<size_t>(batch_axis_)), time = x.dim(static_cast<size_t>(time_axis_));
    if (static_cast<int64_t>(lens.size()) != batch)
      fail("sequence_lens has " + std::to_string(lens.size()) + " entries but the batch is " + std::to_string(batch));
    for (int64_t l : lens)
      if (l < 0 || l > time)
        fail("sequence_lens value " + std::to_string(l) + " is outside [0, " + std::to_string(time) + "]");
    return lens;
  }
  int64_t batch_axis_, time_axis_;
};

}  // namespace

void register_reverse_sequence(Registry& r) {
  r.add({"ReverseSequence", "", 10, 1000, 0, kAllTypes,
         [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<ReverseSequenceKernel>(s); }});
}

}  // namespace mminfer::kernels
