// Binary element-wise ops with numpy broadcasting: arithmetic, Mod, BitShift, logic,
// comparisons, PRelu and Where. Pow and the variadic ops live in their own files.
#include <cstring>

#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/math/binary_kernel.h"
#include "kernels/cpu/math/map_kernel.h"

namespace mminfer::kernels {

namespace {

// Where(condition, X, Y): a byte-copying kernel, so one body serves every dtype.
class WhereKernel : public Kernel {
 public:
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& c = need_input(in, 0, "condition");
    const Tensor& x = need_input(in, 1, "X");
    const Tensor& y = need_input(in, 2, "Y");
    if (c.dtype() != DType::kBool) fail(std::string("condition must be bool, got ") + dtype_name(c.dtype()));
    if (x.dtype() != y.dtype())
      fail(std::string("X and Y have different dtypes: ") + dtype_name(x.dtype()) + " and " + dtype_name(y.dtype()));
    if (dtype_size(x.dtype()) == 0) fail(std::string("X dtype ") + dtype_name(x.dtype()) + " is not supported");
    out[0] = {x.dtype(), broadcast_shapes({c.shape(), x.shape(), y.shape()})};
  }
  // X may be overwritten when it already has the output's size (each element is read first).
  int inplace_input(int) const override { return 1; }

  void run(const Inputs& in, Outputs& out) override {
    switch (dtype_size(in[1]->dtype())) {
      case 1: run_sized<uint8_t>(in, out); break;
      case 2: run_sized<uint16_t>(in, out); break;
      case 4: run_sized<uint32_t>(in, out); break;
      case 8: run_sized<uint64_t>(in, out); break;
      default: fail(std::string("X dtype ") + dtype_name(in[1]->dtype()) + " is not supported");
    }
  }

 private:
  template <typename T>
  static void run_sized(const Inputs& in, Outputs& out) {
    const Tensor &c = *in[0], &x = *in[1], &y = *in[2];
    Tensor& o = *out[0];
    auto plan = make_broadcast_plan<3>({c.shape(), x.shape(), y.shape()}, o.shape());
    const uint8_t* cp = c.data<uint8_t>();
    const T* xp = x.data<T>();
    const T* yp = y.data<T>();
    T* op = o.data<T>();
    parallel_for(plan.numel, kGrainCheap, [&](int64_t begin, int64_t end) {
      for_each_segment<3>(plan, begin, end, [&](int64_t at, const std::array<int64_t, 3>& off, int64_t len) {
        const uint8_t* cs = cp + off[0];
        const T* xs = xp + off[1];
        const T* ys = yp + off[2];
        int64_t sc = plan.inner[0], sx = plan.inner[1], sy = plan.inner[2];
        T* os = op + at;
        for (int64_t i = 0; i < len; ++i) os[i] = cs[i * sc] ? xs[i * sx] : ys[i * sy];
      });
    });
  }
};

template <typename Op>
void add_binary(Registry& r, const std::string& name, int since, std::vector<DType> types, Op op = Op{}) {
  r.add(KernelDef{name, "", since, 1000, 0, std::move(types), [op](const KernelSpec& s) -> std::unique_ptr<Kernel> {
                    return std::make_unique<BinaryKernel<Op>>(s, op);
                  }});
}

}  // namespace

void register_elementwise_binary(Registry& r) {
  std::vector<DType> numeric = numeric_types_bf16();
  std::vector<DType> with_bool = numeric;
  with_bool.push_back(DType::kBool);
  add_binary<binop::Add>(r, "Add", 1, numeric);
  add_binary<binop::Sub>(r, "Sub", 1, numeric);
  add_binary<binop::Mul>(r, "Mul", 1, numeric);
  add_binary<binop::Div>(r, "Div", 1, numeric);
  add_binary<binop::And>(r, "And", 1, {DType::kBool});
  add_binary<binop::Or>(r, "Or", 1, {DType::kBool});
  add_binary<binop::Xor>(r, "Xor", 1, {DType::kBool});
  add_binary<binop::Equal>(r, "Equal", 1, with_bool);
  add_binary<binop::Greater>(r, "Greater", 1, numeric);
  add_binary<binop::Less>(r, "Less", 1, numeric);
  add_binary<binop::GreaterOrEqual>(r, "GreaterOrEqual", 12, numeric);
  add_binary<binop::LessOrEqual>(r, "LessOrEqual", 12, numeric);
  r.add(KernelDef{"Mod", "", 10, 1000, 0, numeric, [](const KernelSpec& s) -> std::unique_ptr<Kernel> {
                    binop::Mod op;
                    op.fmod = s.a().get_int("fmod", 0) != 0;
                    return std::make_unique<BinaryKernel<binop::Mod>>(s, op);
                  }});
  r.add(KernelDef{"BitShift", "", 11, 1000, 0, {DType::kUint8, DType::kUint16, DType::kUint32, DType::kUint64},
                  [](const KernelSpec& s) -> std::unique_ptr<Kernel> {
                    std::string dir = s.a().get_string("direction", "");
                    if (dir != "LEFT" && dir != "RIGHT") fail("attribute direction must be LEFT or RIGHT, got '" + dir + "'");
                    binop::BitShift op;
                    op.left = dir == "LEFT";
                    return std::make_unique<BinaryKernel<binop::BitShift>>(s, op);
                  }});
  r.add(KernelDef{"PRelu", "", 7, 1000, 0, numeric, [](const KernelSpec& s) -> std::unique_ptr<Kernel> {
                    return std::make_unique<BinaryKernel<binop::PRelu>>(s, binop::PRelu{}, true);
                  }});
  r.add(KernelDef{"Where", "", 9, 1000, 0, {DType::kBool},
                  [](const KernelSpec&) -> std::unique_ptr<Kernel> { return std::make_unique<WhereKernel>(); }});
}

}  // namespace mminfer::kernels
