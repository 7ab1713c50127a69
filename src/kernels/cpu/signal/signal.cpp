// Signal ops: DFT, STFT, the Hann/Hamming/Blackman windows and MelWeightMatrix. Transforms
// run in double; power-of-two lengths use a radix-2 FFT, others a direct sum over a
// twiddle table.
#include <cmath>
#include <complex>
#include <numbers>

#include "core/parallel.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/common/resample_float_io.h"

namespace mminfer::kernels {

namespace {

using cplx = std::complex<double>;

void store_doubles(const std::vector<double>& v, Tensor& t) {
  size_t n = v.size();
  switch (t.dtype()) {
    case DType::kFloat64:
      std::copy(v.begin(), v.end(), t.data<double>());
      return;
    case DType::kInt64:
      for (size_t i = 0; i < n; ++i) t.data<int64_t>()[i] = static_cast<int64_t>(v[i]);
      return;
    case DType::kInt32:
      for (size_t i = 0; i < n; ++i) t.data<int32_t>()[i] = static_cast<int32_t>(v[i]);
      return;
    case DType::kInt16:
      for (size_t i = 0; i < n; ++i) t.data<int16_t>()[i] = static_cast<int16_t>(v[i]);
      return;
    case DType::kInt8:
      for (size_t i = 0; i < n; ++i) t.data<int8_t>()[i] = static_cast<int8_t>(v[i]);
      return;
    case DType::kUint8:
      for (size_t i = 0; i < n; ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(v[i]);
      return;
    case DType::kUint16:
      for (size_t i = 0; i < n; ++i) t.data<uint16_t>()[i] = static_cast<uint16_t>(v[i]);
      return;
    case DType::kUint32:
      for (size_t i = 0; i < n; ++i) t.data<uint32_t>()[i] = static_cast<uint32_t>(v[i]);
      return;
    case DType::kUint64:
      for (size_t i = 0; i < n; ++i) t.data<uint64_t>()[i] = static_cast<uint64_t>(v[i]);
      return;
    default: {
      std::vector<float> f(v.begin(), v.end());
      store_floats(f.data(), t);
    }
  }
}

std::vector<double> load_doubles(const Tensor& t) {
  if (t.dtype() == DType::kFloat64) return std::vector<double>(t.data<double>(), t.data<double>() + t.numel());
  std::vector<float> f = load_floats(t);
  return std::vector<double>(f.begin(), f.end());
}

DType output_dtype(const KernelSpec& spec) {
  int64_t code = spec.a().get_int("output_datatype", 1);
  DType t = static_cast<DType>(code);
  if (dtype_size(t) == 0 || t == DType::kBool)
    fail("attribute output_datatype " + std::to_string(code) + " is not a numeric type");
  return t;
}

// Transforms one sequence of length n in place (out = sum x[j] e^{-+2 pi i jk/n}).
class Transform {
 public:
  Transform(int64_t n, bool inverse) : n_(n), inverse_(inverse), pow2_(n > 0 && (n & (n - 1)) == 0) {
    double sign = inverse ? 1.0 : -1.0;
    twiddle_.resize(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k)
      twiddle_[k] = std::polar(1.0, sign * 2 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(n));
  }
  void apply(std::vector<cplx>& x, std::vector<cplx>& scratch) const {
    if (n_ <= 1) return;
    if (pow2_) {
      fft(x);
    } else {
      scratch.assign(x.size(), cplx());
      for (int64_t k = 0; k < n_; ++k) {
        cplx s = 0;
        for (int64_t j = 0, idx = 0; j < n_; ++j, idx = (idx + k) % n_) s += x[j] * twiddle_[idx];
        scratch[k] = s;
      }
      x.swap(scratch);
    }
    if (inverse_)
      for (cplx& v : x) v /= static_cast<double>(n_);
  }

 private:
  void fft(std::vector<cplx>& x) const {
    for (int64_t i = 1, j = 0; i < n_; ++i) {  // bit reversal
      int64_t bit = n_ >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(x[i], x[j]);
    }
    for (int64_t len = 2; len <= n_; len <<= 1) {
      int64_t step = n_ / len;
      for (int64_t i = 0; i < n_; i += len)
        for (int64_t k = 0; k < len / 2; ++k) {
          cplx u = x[i + k], v = x[i + k + len / 2] * twiddle_[k * step];
          x[i + k] = u + v;
          x[i + k + len / 2] = u - v;
        }
    }
  }
  int64_t n_;
  bool inverse_, pow2_;
  std::vector<cplx> twiddle_;
};

class Dft final : public Kernel {
 public:
  explicit Dft(const KernelSpec& spec) : opset_(spec.opset) {
    axis_ = spec.a().get_int("axis", opset_ >= 20 ? -2 : 1);
    inverse_ = spec.a().get_int("inverse", 0) != 0;
    onesided_ = spec.a().get_int("onesided", 0) != 0;
    if (inverse_ && onesided_) fail("attributes inverse and onesided cannot both be set");
  }
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "input");
    Geometry g = geometry(in);
    Shape s = x.shape();
    s[g.axis] = onesided_ ? g.length / 2 + 1 : g.length;
    s.back() = 2;
    out[0] = {x.dtype(), s};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    Geometry g = geometry(in);
    std::vector<double> xs = load_doubles(x);
    const Shape& s = x.shape();
    const int64_t comps = s.back(), n = s[g.axis], L = g.length;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < g.axis; ++d) outer *= s[d];
    for (size_t d = g.axis + 1; d + 1 < s.size(); ++d) inner *= s[d];
    const int64_t bins = onesided_ ? L / 2 + 1 : L;
    std::vector<double> ys(static_cast<size_t>(outer * bins * inner * 2));
    Transform tr(L, inverse_);
    parallel_for(outer * inner, 1, [&](int64_t begin, int64_t end) {
      std::vector<cplx> line(static_cast<size_t>(L)), scratch;
      for (int64_t oi = begin; oi < end; ++oi) {
        int64_t o = oi / inner, i = oi % inner;
        std::fill(line.begin(), line.end(), cplx());
        for (int64_t j = 0; j < std::min(n, L); ++j) {
          const double* p = &xs[((o * n + j) * inner + i) * comps];
          line[j] = cplx(p[0], comps == 2 ? p[1] : 0.0);
        }
        tr.apply(line, scratch);
        for (int64_t k = 0; k < bins; ++k) {
          double* q = &ys[((o * bins + k) * inner + i) * 2];
          q[0] = line[k].real();
          q[1] = line[k].imag();
        }
      }
    });
    store_doubles(ys, *out[0]);
  }

 private:
  struct Geometry {
    int64_t axis, length;
  };
  Geometry geometry(const Inputs& in) const {
    const Tensor& x = need_input(in, 0, "input");
    int64_t r = static_cast<int64_t>(x.rank());
    if (r < 2 || (x.dim(r - 1) != 1 && x.dim(r - 1) != 2))
      fail("input must end in a dim of 1 (real) or 2 (complex), got " + shape_str(x.shape()));
    int64_t axis = axis_;
    if (opset_ >= 20 && in.size() > 2 && in[2] && in[2]->defined())
      axis = static_cast<int64_t>(read_scalar(*in[2], "axis"));
    axis = normalize_axis(axis, r, "DFT axis");
    if (axis == r - 1 || (opset_ < 20 && axis == 0)) fail("DFT axis " + std::to_string(axis) + " is not a signal dim");
    int64_t length = x.dim(axis);
    if (in.size() > 1 && in[1] && in[1]->defined() && in[1]->numel() > 0)
      length = static_cast<int64_t>(read_scalar(*in[1], "dft_length"));
    if (length < 1) fail("dft_length must be positive, got " + std::to_string(length));
    if (onesided_ && x.dim(r - 1) == 2) fail("onesided needs a real input");
    return {axis, length};
  }
  int opset_;
  int64_t axis_;
  bool inverse_, onesided_;
};

class Stft final : public Kernel {
 public:
  explicit Stft(const KernelSpec& spec) { onesided_ = spec.a().get_int("onesided", 1) != 0; }
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    Geometry g = geometry(in);
    out[0] = {in[0]->dtype(), {in[0]->dim(0), g.frames, g.bins, 2}};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    Geometry g = geometry(in);
    std::vector<double> xs = load_doubles(x);
    std::vector<double> window(static_cast<size_t>(g.frame_length), 1.0);
    if (in.size() > 2 && in[2] && in[2]->defined() && in[2]->numel() > 0) window = load_doubles(*in[2]);
    const int64_t B = x.dim(0), len = x.dim(1), comps = x.dim(2);
    std::vector<double> ys(static_cast<size_t>(B * g.frames * g.bins * 2));
    Transform tr(g.frame_length, false);
    parallel_for(B * g.frames, 1, [&](int64_t begin, int64_t end) {
      std::vector<cplx> line(static_cast<size_t>(g.frame_length)), scratch;
      for (int64_t bf = begin; bf < end; ++bf) {
        int64_t b = bf / g.frames, f = bf % g.frames;
        for (int64_t j = 0; j < g.frame_length; ++j) {
          const double* p = &xs[(b * len + f * g.step + j) * comps];
          line[j] = cplx(p[0], comps == 2 ? p[1] : 0.0) * window[j];
        }
        tr.apply(line, scratch);
        for (int64_t k = 0; k < g.bins; ++k) {
          ys[(bf * g.bins + k) * 2] = line[k].real();
          ys[(bf * g.bins + k) * 2 + 1] = line[k].imag();
        }
      }
    });
    store_doubles(ys, *out[0]);
  }

 private:
  struct Geometry {
    int64_t step, frame_length, frames, bins;
  };
  Geometry geometry(const Inputs& in) const {
    const Tensor& x = need_input(in, 0, "signal");
    if (x.rank() != 3 || (x.dim(2) != 1 && x.dim(2) != 2))
      fail("input signal must be (batch, length, 1 or 2), got " + shape_str(x.shape()));
    Geometry g{};
    g.step = static_cast<int64_t>(read_scalar(need_input(in, 1, "frame_step"), "frame_step"));
    if (g.step < 1) fail("frame_step must be positive");
    int64_t wlen = -1;
    if (in.size() > 2 && in[2] && in[2]->defined()) {
      if (in[2]->rank() != 1) fail("input window must be 1-D");
      wlen = in[2]->dim(0);
    }
    g.frame_length = wlen;
    if (in.size() > 3 && in[3] && in[3]->defined()) {
      g.frame_length = static_cast<int64_t>(read_scalar(*in[3], "frame_length"));
      if (wlen >= 0 && wlen != g.frame_length) fail("window length does not match frame_length");
    }
    if (g.frame_length < 1) fail("one of window or frame_length is required and must be positive");
    if (g.frame_length > x.dim(1)) fail("frame_length is longer than the signal");
    if (onesided_ && x.dim(2) == 2) fail("onesided needs a real signal");
    g.frames = (x.dim(1) - g.frame_length) / g.step + 1;
    g.bins = onesided_ ? g.frame_length / 2 + 1 : g.frame_length;
    return g;
  }
  bool onesided_ = true;
};

enum class WindowKind { kHann, kHamming, kBlackman };

class Window final : public Kernel {
 public:
  Window(const KernelSpec& spec, WindowKind kind) : kind_(kind), dtype_(output_dtype(spec)) {
    periodic_ = spec.a().get_int("periodic", 1) != 0;
  }
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    int64_t n = static_cast<int64_t>(read_scalar(need_input(in, 0, "size"), "size"));
    if (n < 0) fail("window size must not be negative");
    out[0] = {dtype_, {n}};
  }
  void run(const Inputs& in, Outputs& out) override {
    int64_t n = out[0]->dim(0);
    double denom = static_cast<double>(periodic_ ? n : n - 1);
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      double a = denom > 0 ? 2 * std::numbers::pi * static_cast<double>(i) / denom : 0.0;
      switch (kind_) {
        case WindowKind::kHann:
          v[i] = 0.5 - 0.5 * std::cos(a);
          break;
        case WindowKind::kHamming:
          v[i] = 25.0 / 46.0 - 21.0 / 46.0 * std::cos(a);
          break;
        case WindowKind::kBlackman:
          v[i] = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
          break;
      }
    }
    store_doubles(v, *out[0]);
  }

 private:
  WindowKind kind_;
  DType dtype_;
  bool periodic_ = true;
};

// Triangular mel filter bank mapping dft_length/2+1 linear bins to num_mel_bins.
class MelWeightMatrix final : public Kernel {
 public:
  explicit MelWeightMatrix(const KernelSpec& spec) : dtype_(output_dtype(spec)) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    int64_t mels = static_cast<int64_t>(read_scalar(need_input(in, 0, "num_mel_bins"), "num_mel_bins"));
    int64_t dft = static_cast<int64_t>(read_scalar(need_input(in, 1, "dft_length"), "dft_length"));
    if (mels < 1 || dft < 1) fail("num_mel_bins and dft_length must be positive");
    out[0] = {dtype_, {dft / 2 + 1, mels}};
  }
  void run(const Inputs& in, Outputs& out) override {
    int64_t mels = out[0]->dim(1), bins = out[0]->dim(0);
    int64_t dft = static_cast<int64_t>(read_scalar(*in[1], "dft_length"));
    double rate = read_scalar(need_input(in, 2, "sample_rate"), "sample_rate");
    double lo = read_scalar(need_input(in, 3, "lower_edge_hertz"), "lower_edge_hertz");
    double hi = read_scalar(need_input(in, 4, "upper_edge_hertz"), "upper_edge_hertz");
    if (!(rate > 0) || lo < 0 || hi < lo) fail("need sample_rate > 0 and 0 <= lower_edge_hertz <= upper_edge_hertz");
    auto to_mel = [](double hz) { return 2595.0 * std::log10(1 + hz / 700.0); };
    double lo_mel = to_mel(lo), step = (to_mel(hi) - lo_mel) / static_cast<double>(mels + 2);
    std::vector<int64_t> edge(static_cast<size_t>(mels + 2));
    for (int64_t i = 0; i < mels + 2; ++i) {
      double hz = 700.0 * (std::pow(10.0, (static_cast<double>(i) * step + lo_mel) / 2595.0) - 1);
      edge[i] = static_cast<int64_t>(std::floor(static_cast<double>(dft + 1) * hz / rate));
    }
    std::vector<double> w(static_cast<size_t>(bins * mels), 0.0);
    auto set = [&](int64_t j, int64_t m, double v) {
      if (j >= 0 && j < bins) w[j * mels + m] = v;
    };
    for (int64_t m = 0; m < mels; ++m) {
      int64_t l = edge[m], c = edge[m + 1], h = edge[m + 2];
      if (c == l)
        set(c, m, 1.0);
      else
        for (int64_t j = l; j <= c; ++j) set(j, m, static_cast<double>(j - l) / static_cast<double>(c - l));
      if (h > c)
        for (int64_t j = c; j < h; ++j) set(j, m, static_cast<double>(h - j) / static_cast<double>(h - c));
    }
    store_doubles(w, *out[0]);
  }

 private:
  DType dtype_;
};

}  // namespace

void register_signal(Registry& r) {
  const std::vector<DType> float_types = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
  r.add({"DFT", "", 17, 1000, 0, float_types, [](const KernelSpec& s) { return std::make_unique<Dft>(s); }});
  r.add({"STFT", "", 17, 1000, 0, float_types, [](const KernelSpec& s) { return std::make_unique<Stft>(s); }});
  r.add({"HannWindow", "", 17, 1000, 0, {}, [](const KernelSpec& s) {
           return std::make_unique<Window>(s, WindowKind::kHann);
         }});
  r.add({"HammingWindow", "", 17, 1000, 0, {}, [](const KernelSpec& s) {
           return std::make_unique<Window>(s, WindowKind::kHamming);
         }});
  r.add({"BlackmanWindow", "", 17, 1000, 0, {}, [](const KernelSpec& s) {
           return std::make_unique<Window>(s, WindowKind::kBlackman);
         }});
  r.add({"MelWeightMatrix", "", 17, 1000, 0, {}, [](const KernelSpec& s) {
           return std::make_unique<MelWeightMatrix>(s);
         }});
}

}  // namespace mminfer::kernels
