// RNN, GRU and LSTM (forward, reverse, bidirectional; sequence_lens; initial states;
// peepholes; layout 0/1). Computes in float, one batch row at a time.
#include <cmath>

#include "core/parallel.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/common/resample_float_io.h"

namespace mminfer::kernels {

namespace {

enum class CellKind { kRnn, kGru, kLstm };

struct Activation {
  std::string name;
  float alpha = 0, beta = 0;
  float operator()(float x) const {
    if (name == "Sigmoid") return 1.0f / (1.0f + std::exp(-x));
    if (name == "Tanh") return std::tanh(x);
    if (name == "Relu") return std::max(x, 0.0f);
    if (name == "LeakyRelu") return x >= 0 ? x : alpha * x;
    if (name == "ThresholdedRelu") return x > alpha ? x : 0.0f;
    if (name == "ScaledTanh") return alpha * std::tanh(beta * x);
    if (name == "HardSigmoid") return std::clamp(alpha * x + beta, 0.0f, 1.0f);
    if (name == "Elu") return x >= 0 ? x : alpha * (std::exp(x) - 1);
    if (name == "Softsign") return x / (1 + std::abs(x));
    if (name == "Softplus") return std::log1p(std::exp(x));
    if (name == "Affine") return alpha * x + beta;
    fail("unsupported activation '" + name + "'");
  }
};

class Recurrent final : public Kernel {
 public:
  Recurrent(const KernelSpec& spec, CellKind kind) : kind_(kind) {
    const Attributes& a = spec.a();
    hidden_ = a.get_int("hidden_size", 0);
    if (hidden_ < 1) fail("attribute hidden_size must be positive");
    std::string dir = a.get_string("direction", "forward");
    if (dir == "forward")
      dirs_ = 1;
    else if (dir == "reverse")
      dirs_ = 1, reverse_only_ = true;
    else if (dir == "bidirectional")
      dirs_ = 2;
    else
      fail("attribute direction has unknown value '" + dir + "'");
    layout_ = a.get_int("layout", 0);
    if (layout_ != 0 && layout_ != 1) fail("attribute layout must be 0 or 1");
    clip_ = a.has("clip") ? a.get_float("clip", 0) : -1.0f;
    linear_before_reset_ = a.get_int("linear_before_reset", 0) != 0;
    input_forget_ = a.get_int("input_forget", 0) != 0;
    gates_ = kind == CellKind::kRnn ? 1 : kind == CellKind::kGru ? 3 : 4;
    size_t per_dir = kind == CellKind::kRnn ? 1 : kind == CellKind::kGru ? 2 : 3;
    std::vector<std::string> names = a.get_strings("activations");
    if (names.empty()) {
      std::vector<std::string> def = kind == CellKind::kRnn   ? std::vector<std::string>{"Tanh"}
                                     : kind == CellKind::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                              : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
      for (int d = 0; d < dirs_; ++d) names.insert(names.end(), def.begin(), def.end());
    }
    if (names.size() != per_dir * dirs_)
      fail("attribute activations must have " + std::to_string(per_dir * dirs_) + " names");
    std::vector<float> alphas = a.get_floats("activation_alpha"), betas = a.get_floats("activation_beta");
    size_t ai = 0, bi = 0;
    for (const std::string& n : names) {
      Activation act{n};
      // Defaults from the ONNX spec; explicit values are consumed in order by the functions that use them.
      bool uses_alpha = n == "LeakyRelu" || n == "ThresholdedRelu" || n == "ScaledTanh" || n == "HardSigmoid" ||
                        n == "Elu" || n == "Affine";
      bool uses_beta = n == "ScaledTanh" || n == "HardSigmoid" || n == "Affine";
      act.alpha = n == "LeakyRelu" ? 0.01f : n == "HardSigmoid" ? 0.2f : 1.0f;
      act.beta = n == "HardSigmoid" ? 0.5f : 0.0f;
      if (uses_alpha && ai < alphas.size()) act.alpha = alphas[ai++];
      if (uses_beta && bi < betas.size()) act.beta = betas[bi++];
      act(0.0f);  // rejects unknown names now rather than at run time
      acts_.push_back(act);
    }
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    Dims d = dims(in);
    DType t = in[0]->dtype();
    if (out.size() > 0) out[0] = {t, layout_ == 0 ? Shape{d.T, dirs_, d.B, hidden_} : Shape{d.B, d.T, dirs_, hidden_}};
    Shape state = layout_ == 0 ? Shape{dirs_, d.B, hidden_} : Shape{d.B, dirs_, hidden_};
    for (size_t o = 1; o < out.size(); ++o) out[o] = {t, state};
  }

  void run(const Inputs& in, Outputs& out) override {
    Dims d = dims(in);
    const int64_t T = d.T, B = d.B, I = d.I, H = hidden_, G = gates_;
    std::vector<float> x = load_floats(*in[0]), w = load_floats(*in[1]), r = load_floats(*in[2]);
    auto optional = [&](size_t i, int64_t n) {
      std::vector<float> v;
      if (i < in.size() && in[i] && in[i]->defined()) {
        v = load_floats(*in[i]);
        if (static_cast<int64_t>(v.size()) != n)
          fail("input " + std::to_string(i) + " must have " + std::to_string(n) + " values");
      }
      return v;
    };
    std::vector<float> bias = optional(3, dirs_ * 2 * G * H);
    std::vector<float> h0 = optional(5, dirs_ * B * H),
                       c0 = kind_ == CellKind::kLstm ? optional(6, dirs_ * B * H) : std::vector<float>();
    std::vector<float> peep = kind_ == CellKind::kLstm ? optional(7, dirs_ * 3 * H) : std::vector<float>();
    std::vector<int64_t> lens(static_cast<size_t>(B), T);
    if (in.size() > 4 && in[4] && in[4]->defined()) {
      lens = read_int_tensor(*in[4], "sequence_lens");
      if (static_cast<int64_t>(lens.size()) != B) fail("input sequence_lens must have batch_size values");
      for (int64_t l : lens)
        if (l < 0 || l > T)
          fail("input sequence_lens has " + std::to_string(l) + ", outside [0, " + std::to_string(T) + "]");
    }
    std::vector<float> y(static_cast<size_t>(T * dirs_ * B * H), 0.0f), yh(static_cast<size_t>(dirs_ * B * H)),
        yc(static_cast<size_t>(dirs_ * B * H));
    auto x_at = [&](int64_t t, int64_t b) { return &x[(layout_ == 0 ? t * B + b : b * T + t) * I]; };
    parallel_for(dirs_ * B, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> h(H), c(H), gx(G * H), gh(G * H), hn(H);
      for (int64_t db = begin; db < end; ++db) {
        int64_t dir = db / B, b = db % B;
        bool backward = reverse_only_ || dir == 1;
        const float* W = &w[dir * G * H * I];
        const float* R = &r[dir * G * H * H];
        const float* wb = bias.empty() ? nullptr : &bias[dir * 2 * G * H];
        const float* rb = wb ? wb + G * H : nullptr;
        const Activation* act = &acts_[dir * (kind_ == CellKind::kRnn ? 1 : kind_ == CellKind::kGru ? 2 : 3)];
        for (int64_t j = 0; j < H; ++j) {
          h[j] = h0.empty() ? 0.0f : h0[(dir * B + b) * H + j];
          c[j] = c0.empty() ? 0.0f : c0[(dir * B + b) * H + j];
        }
        for (int64_t s = 0; s < lens[b]; ++s) {
          int64_t t = backward ? lens[b] - 1 - s : s;
          const float* xt = x_at(t, b);
          for (int64_t g = 0; g < G * H; ++g) {
            float ax = wb ? wb[g] : 0.0f, ah = rb ? rb[g] : 0.0f;
            for (int64_t i = 0; i < I; ++i) ax += W[g * I + i] * xt[i];
            for (int64_t k = 0; k < H; ++k) ah += R[g * H + k] * h[k];
            gx[g] = ax;
            gh[g] = ah;
          }
          step(act, h, c, gx, gh, hn, R, rb, peep.empty() ? nullptr : &peep[dir * 3 * H]);
          for (int64_t j = 0; j < H; ++j) {
            int64_t yi = layout_ == 0 ? ((t * dirs_ + dir) * B + b) * H + j : ((b * T + t) * dirs_ + dir) * H + j;
            y[yi] = h[j];
          }
        }
        for (int64_t j = 0; j < H; ++j) {
          int64_t si = layout_ == 0 ? (dir * B + b) * H + j : (b * dirs_ + dir) * H + j;
          yh[si] = h[j];
          yc[si] = c[j];
        }
      }
    });
    if (out.size() > 0 && out[0] && out[0]->defined()) store_floats(y.data(), *out[0]);
    if (out.size() > 1 && out[1] && out[1]->defined()) store_floats(yh.data(), *out[1]);
    if (out.size() > 2 && out[2] && out[2]->defined()) store_floats(yc.data(), *out[2]);
  }

 private:
  struct Dims {
    int64_t T, B, I;
  };
  Dims dims(const Inputs& in) const {
    const Tensor& x = need_input(in, 0, "X");
    const Tensor& w = need_input(in, 1, "W");
    const Tensor& r = need_input(in, 2, "R");
    if (x.rank() != 3) fail("input X must be 3-D, got " + shape_str(x.shape()));
    Dims d{layout_ == 0 ? x.dim(0) : x.dim(1), layout_ == 0 ? x.dim(1) : x.dim(0), x.dim(2)};
    if (w.shape() != Shape{dirs_, gates_ * hidden_, d.I})
      fail("input W has shape " + shape_str(w.shape()) + ", expected " + shape_str({dirs_, gates_ * hidden_, d.I}));
    if (r.shape() != Shape{dirs_, gates_ * hidden_, hidden_})
      fail("input R has shape " + shape_str(r.shape()) + ", expected " + shape_str({dirs_, gates_ * hidden_, hidden_}));
    return d;
  }

  float clip(float v) const { return clip_ > 0 ? std::clamp(v, -clip_, clip_) : v; }

  // One time step from pre-activations gx (input part + Wb) and gh (hidden part + Rb).
  void step(const Activation* act, std::vector<float>& h, std::vector<float>& c, const std::vector<float>& gx,
            const std::vector<float>& gh, std::vector<float>& hn, const float* R, const float* rb,
            const float* p) const {
    const int64_t H = hidden_;
    if (kind_ == CellKind::kRnn) {
      for (int64_t j = 0; j < H; ++j) h[j] = act[0](clip(gx[j] + gh[j]));
      return;
    }
    if (kind_ == CellKind::kGru) {  // gate order z, r, h
      for (int64_t j = 0; j < H; ++j) {
        float z = act[0](clip(gx[j] + gh[j])), rr = act[0](clip(gx[H + j] + gh[H + j]));
        float cand;
        if (linear_before_reset_) {
          cand = gx[2 * H + j] + rr * gh[2 * H + j];
        } else {
          float s = rb ? rb[2 * H + j] : 0.0f;
          for (int64_t k = 0; k < H; ++k) s += R[(2 * H + j) * H + k] * (act[0](clip(gx[H + k] + gh[H + k])) * h[k]);
          cand = gx[2 * H + j] + s;
        }
        hn[j] = (1 - z) * act[1](clip(cand)) + z * h[j];
      }
      h = hn;
      return;
    }
    // LSTM gate order i, o, f, c; peepholes i, o, f.
    for (int64_t j = 0; j < H; ++j) {
      float i = act[0](clip(gx[j] + gh[j] + (p ? p[j] * c[j] : 0.0f)));
      float f = input_forget_ ? 1 - i : act[0](clip(gx[2 * H + j] + gh[2 * H + j] + (p ? p[2 * H + j] * c[j] : 0.0f)));
      float g = act[1](clip(gx[3 * H + j] + gh[3 * H + j]));
      float cn = f * c[j] + i * g;
      float o = act[0](clip(gx[H + j] + gh[H + j] + (p ? p[H + j] * cn : 0.0f)));
      c[j] = cn;
      hn[j] = o * act[2](cn);
    }
    h = hn;
  }

  CellKind kind_;
  int64_t hidden_ = 0, layout_ = 0, gates_ = 1;
  int64_t dirs_ = 1;
  bool reverse_only_ = false, linear_before_reset_ = false, input_forget_ = false;
  float clip_ = -1.0f;
  std::vector<Activation> acts_;
};

}  // namespace

void register_recurrent(Registry& r) {
  const std::vector<DType> float_types = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
  r.add({"RNN", "", 7, 1000, 0, float_types,
         [](const KernelSpec& s) { return std::make_unique<Recurrent>(s, CellKind::kRnn); }}, kHeavy);
  r.add({"GRU", "", 7, 1000, 0, float_types,
         [](const KernelSpec& s) { return std::make_unique<Recurrent>(s, CellKind::kGru); }}, kHeavy);
  r.add({"LSTM", "", 7, 1000, 0, float_types,
         [](const KernelSpec& s) { return std::make_unique<Recurrent>(s, CellKind::kLstm); }}, kHeavy);
}

}  // namespace mminfer::kernels
