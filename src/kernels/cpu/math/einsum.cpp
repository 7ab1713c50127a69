// Einsum, general form: any number of operands, repeated labels (diagonals), ellipsis broadcast,
// implicit output. A direct loop over output and summed labels; correct first, simple always.
#include <algorithm>
#include <map>

#include "core/ascii.h"
#include "core/parallel.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/math/matmul_common.h"

namespace mminfer::kernels {

namespace {

constexpr int kEllipsis = -1;
constexpr int kEllipsisBase = 256;  // ellipsis dim j (right-aligned) gets label kEllipsisBase + j

struct EinsumPlan {
  std::vector<int> out_labels, sum_labels;
  Shape out_shape, sum_shape;
  std::vector<std::vector<int64_t>> out_strides, sum_strides;  // per input, per label
};

std::vector<int> parse_term(const std::string& t) {
  std::vector<int> out;
  bool seen_ellipsis = false;
  for (size_t i = 0; i < t.size(); ++i) {
    char c = t[i];
    if (c == '.') {
      if (t.compare(i, 3, "...") != 0 || seen_ellipsis) fail("equation has a malformed ellipsis in '" + t + "'");
      seen_ellipsis = true;
      out.push_back(kEllipsis);
      i += 2;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      out.push_back(c);
    } else {
      fail(std::string("equation has an invalid character '") + c + "'");
    }
  }
  return out;
}

// Expands "..." into `e` labels for the trailing-aligned ellipsis dims out of `ell_rank`.
std::vector<int> expand(const std::vector<int>& term, int64_t e, int64_t ell_rank) {
  std::vector<int> out;
  for (int l : term) {
    if (l != kEllipsis) {
      out.push_back(l);
      continue;
    }
    for (int64_t j = 0; j < e; ++j) out.push_back(kEllipsisBase + static_cast<int>(ell_rank - e + j));
  }
  return out;
}

EinsumPlan make_plan(const std::string& equation, const Inputs& in) {
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq += c;
  size_t arrow = eq.find("->");
  std::vector<std::string> terms = split_list(arrow == std::string::npos ? eq : eq.substr(0, arrow), ',');
  if (terms.size() != in.size())
    fail("equation has " + std::to_string(terms.size()) + " operands but " + std::to_string(in.size()) + " inputs were given");
  std::vector<std::vector<int>> raw(in.size());
  std::vector<int64_t> ell(in.size(), 0);
  int64_t ell_rank = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    raw[i] = parse_term(terms[i]);
    int64_t rank = static_cast<int64_t>(in[i]->rank());
    int64_t letters = static_cast<int64_t>(std::count_if(raw[i].begin(), raw[i].end(), [](int l) { return l >= 0; }));
    bool has_ell = letters != static_cast<int64_t>(raw[i].size());
    if ((!has_ell && letters != rank) || letters > rank)
      fail("operand " + std::to_string(i) + " has rank " + std::to_string(rank) + " but its term is '" + terms[i] + "'");
    ell[i] = rank - letters;
    ell_rank = std::max(ell_rank, ell[i]);
  }
  std::map<int, int64_t> size;
  std::map<int, int> count;
  std::vector<std::vector<int>> labels(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    labels[i] = expand(raw[i], ell[i], ell_rank);
    for (size_t d = 0; d < labels[i].size(); ++d) {
      int l = labels[i][d];
      int64_t ext = in[i]->dim(d);
      auto it = size.find(l);
      if (it == size.end() || it->second == 1) {
        if (it == size.end() || ext != 1) size[l] = ext;
      } else if (ext != it->second && ext != 1) {
        fail("label '" + (l >= kEllipsisBase ? std::string("...") : std::string(1, static_cast<char>(l))) +
             "' has extents " + std::to_string(it->second) + " and " + std::to_string(ext));
      }
      ++count[l];
    }
  }
  EinsumPlan p;
  if (arrow != std::string::npos) {
    std::vector<int> t = parse_term(eq.substr(arrow + 2));
    if (std::count(t.begin(), t.end(), kEllipsis) && !ell_rank && std::any_of(ell.begin(), ell.end(), [](int64_t e) { return e; }))
      fail("output uses '...' but no operand does");
    p.out_labels = expand(t, ell_rank, ell_rank);
    for (int l : p.out_labels) {
      if (!size.count(l)) fail(std::string("output label '") + static_cast<char>(l) + "' appears in no operand");
      if (std::count(p.out_labels.begin(), p.out_labels.end(), l) > 1)
        fail(std::string("output label '") + static_cast<char>(l) + "' repeats");
    }
  } else {  // implicit: ellipsis dims, then labels seen once, in alphabetical order
    for (int64_t j = 0; j < ell_rank; ++j) p.out_labels.push_back(kEllipsisBase + static_cast<int>(j));
    for (auto& [l, c] : count)
      if (l < kEllipsisBase && c == 1) p.out_labels.push_back(l);
  }
  for (auto& [l, c] : count)
    if (std::find(p.out_labels.begin(), p.out_labels.end(), l) == p.out_labels.end()) p.sum_labels.push_back(l);
  for (int l : p.out_labels) p.out_shape.push_back(size[l]);
  for (int l : p.sum_labels) p.sum_shape.push_back(size[l]);
  // Strides: a repeated label in one operand walks its diagonal (strides add); a broadcast
  // dimension of extent 1 does not move.
  for (size_t i = 0; i < in.size(); ++i) {
    std::map<int, int64_t> st;
    int64_t s = 1;
    for (size_t d = labels[i].size(); d-- > 0;) {
      if (in[i]->dim(d) != 1) st[labels[i][d]] += s;
      s *= in[i]->dim(d);
    }
    std::vector<int64_t> os, ss;
    for (int l : p.out_labels) os.push_back(st.count(l) ? st[l] : 0);
    for (int l : p.sum_labels) ss.push_back(st.count(l) ? st[l] : 0);
    p.out_strides.push_back(os);
    p.sum_strides.push_back(ss);
  }
  return p;
}

template <typename T, typename Acc>
void einsum_loop(const EinsumPlan& p, const std::vector<const T*>& x, T* y) {
  int64_t n_out = shape_numel(p.out_shape), n_sum = shape_numel(p.sum_shape);
  size_t ni = x.size(), ro = p.out_shape.size(), rs = p.sum_shape.size();
  parallel_for(n_out, std::max<int64_t>(1, 4096 / std::max<int64_t>(n_sum, 1)), [&](int64_t o0, int64_t o1) {
    std::vector<int64_t> base(ni), off(ni), idx(rs);
    for (int64_t o = o0; o < o1; ++o) {
      std::fill(base.begin(), base.end(), 0);
      for (size_t d = ro, rem = static_cast<size_t>(o); d-- > 0;) {
        int64_t v = static_cast<int64_t>(rem) % p.out_shape[d];
        rem /= static_cast<size_t>(p.out_shape[d]);
        for (size_t i = 0; i < ni; ++i) base[i] += v * p.out_strides[i][d];
      }
      Acc acc = 0;
      std::fill(idx.begin(), idx.end(), 0);
      off = base;
      for (int64_t s = 0; s < n_sum; ++s) {
        Acc prod = 1;
        for (size_t i = 0; i < ni; ++i) prod *= static_cast<Acc>(x[i][off[i]]);
        acc += prod;
        for (size_t d = rs; d-- > 0;) {  // odometer step, keeping offsets in sync
          for (size_t i = 0; i < ni; ++i) off[i] += p.sum_strides[i][d];
          if (++idx[d] < p.sum_shape[d]) break;
          for (size_t i = 0; i < ni; ++i) off[i] -= p.sum_strides[i][d] * p.sum_shape[d];
          idx[d] = 0;
        }
      }
      y[o] = static_cast<T>(acc);
    }
  });
}

class EinsumKernel : public Kernel {
 public:
  explicit EinsumKernel(const KernelSpec& spec) : equation_(spec.a().get_string("equation", "")) {
    if (equation_.empty()) fail("attribute 'equation' is missing");
  }
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    if (in.empty()) fail("needs at least one input");
    for (size_t i = 0; i < in.size(); ++i) {
      need_input(in, i, "operand");
      if (in[i]->dtype() != in[0]->dtype()) fail("all operands must share one dtype");
    }
    out[0] = {in[0]->dtype(), make_plan(equation_, in).out_shape};
  }
  void run(const Inputs& in, Outputs& out) override {
    EinsumPlan p = make_plan(equation_, in);
    Tensor& y = *out[0];
    if (y.numel() == 0) return;
    switch (y.dtype()) {
      case DType::kFloat32: return loop<float, double>(p, in, y);
      case DType::kFloat64: return loop<double, double>(p, in, y);
      case DType::kInt32: return loop<int32_t, int64_t>(p, in, y);
      case DType::kInt64: return loop<int64_t, int64_t>(p, in, y);
      case DType::kFloat16:
      case DType::kBFloat16: {
        std::vector<std::vector<float>> xf;
        std::vector<const float*> xp;
        for (const Tensor* t : in) xf.push_back(to_f32(*t));
        for (auto& v : xf) xp.push_back(v.data());
        std::vector<float> yf(static_cast<size_t>(y.numel()));
        einsum_loop<float, double>(p, xp, yf.data());
        from_f32(yf.data(), y);
        return;
      }
      default: fail(std::string("unsupported dtype ") + dtype_name(y.dtype()));
    }
  }

 private:
  template <typename T, typename Acc>
  void loop(const EinsumPlan& p, const Inputs& in, Tensor& y) {
    std::vector<const T*> xp;
    for (const Tensor* t : in) xp.push_back(t->data<T>());
    einsum_loop<T, Acc>(p, xp, y.data<T>());
  }
  std::string equation_;
};

}  // namespace

void register_einsum(Registry& r) {
  r.add({"Einsum", "", 12, 1000, 0,
         {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt32, DType::kInt64},
         [](const KernelSpec& s) { return std::make_unique<EinsumKernel>(s); }},
        kHeavy);
}

}  // namespace mminfer::kernels
