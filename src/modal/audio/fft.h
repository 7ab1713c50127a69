// Discrete Fourier transforms of any length, planned once per length. The STFT needs n = 400,
// which radix-2 cannot do: lengths are split into radix-4, 2, 3 and 5 Cooley-Tukey stages, and a
// leftover prime factor runs as its plain DFT.
#pragma once
#include <complex>
#include <vector>

namespace mminfer::audio {

using Complex = std::complex<double>;

class ComplexFft {
 public:
  explicit ComplexFft(int n);  // n >= 1
  int size() const { return n_; }
  // out[k] = sum_j in[j] * exp(-2*pi*i*j*k/n). `in` and `out` must not overlap.
  void forward(const Complex* in, Complex* out) const;

 private:
  void transform(Complex* out, const Complex* in, int n, int stride, size_t level) const;
  void combine(Complex* out, int m, int radix, int stride) const;

  int n_;
  std::vector<int> radices_;       // product is n_; the first splits the full length
  std::vector<Complex> twiddles_;  // exp(-2*pi*i*k/n_) for k < n_
};

// Real input: n/2 + 1 bins (the others are their conjugates). Even lengths run one complex
// transform of half the length, so n = 400 costs a 200-point FFT.
class RealFft {
 public:
  explicit RealFft(int n);  // n >= 1
  int size() const { return n_; }
  int bins() const { return n_ / 2 + 1; }
  int workspace_size() const { return 2 * n_; }  // complex values
  // out holds bins() values; work holds workspace_size() values, so calls can run in parallel.
  void forward(const double* in, Complex* out, Complex* work) const;

 private:
  int n_;
  ComplexFft fft_;              // length n/2 when n is even, else n
  std::vector<Complex> split_;  // exp(-2*pi*i*k/n) for k <= n/2, to separate even and odd halves
};

}  // namespace mminfer::audio
