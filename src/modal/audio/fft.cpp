#include "modal/audio/fft.h"

#include <array>
#include <cmath>
#include <numbers>
#include <string>

#include "mminfer/status.h"

namespace mminfer::audio {

namespace {

std::vector<int> factorize(int n) {
  std::vector<int> radices;
  for (int p : {4, 2, 3, 5}) {
    while (n % p == 0) {
      radices.push_back(p);
      n /= p;
    }
  }
  for (int p = 7; n > 1; p += 2) {
    while (n % p == 0) {
      radices.push_back(p);
      n /= p;
    }
  }
  return radices;
}

std::vector<Complex> unit_roots(int n, int count) {
  std::vector<Complex> w(count);
  for (int k = 0; k < count; ++k) w[k] = std::polar(1.0, -2.0 * std::numbers::pi * k / n);
  return w;
}

}  // namespace

ComplexFft::ComplexFft(int n) : n_(n) {
  if (n < 1) throw Error("FFT length must be positive, got " + std::to_string(n));
  radices_ = factorize(n);
  twiddles_ = unit_roots(n, n);
}

void ComplexFft::forward(const Complex* in, Complex* out) const {
  if (n_ == 1) {
    out[0] = in[0];
    return;
  }
  transform(out, in, n_, 1, 0);
}

// Decimation in time: the length-n transform of in[0], in[stride], ... is `radix` transforms
// of length m = n / radix over every radix-th input, written one after another into out.
void ComplexFft::transform(Complex* out, const Complex* in, int n, int stride, size_t level) const {
  const int radix = radices_[level];
  const int m = n / radix;
  if (m == 1) {
    for (int r = 0; r < radix; ++r) out[r] = in[r * stride];
  } else {
    for (int r = 0; r < radix; ++r) transform(out + r * m, in + r * stride, m, stride * radix, level + 1);
  }
  combine(out, m, radix, stride);
}

// out[r*m + k] holds bin k of sub-transform r. Bin k + q*m of the whole is
//   sum_r w^(r*k) * sub_r[k] * exp(-2*pi*i*r*q/radix),  w = exp(-2*pi*i/n),
// a length-radix DFT per k, done in place. Since n * stride == n_, w^x is twiddles_[x * stride].
void ComplexFft::combine(Complex* out, int m, int radix, int stride) const {
  const Complex* w = twiddles_.data();
  if (radix == 2) {
    for (int k = 0; k < m; ++k) {
      const Complex a = out[k], b = out[k + m] * w[k * stride];
      out[k] = a + b;
      out[k + m] = a - b;
    }
    return;
  }
  if (radix == 4) {
    for (int k = 0; k < m; ++k) {
      const Complex a0 = out[k];
      const Complex a1 = out[k + m] * w[k * stride];
      const Complex a2 = out[k + 2 * m] * w[2 * k * stride];
      const Complex a3 = out[k + 3 * m] * w[3 * k * stride];
      const Complex s02 = a0 + a2, d02 = a0 - a2, s13 = a1 + a3;
      const Complex d13 = a1 - a3;
      const Complex minus_i_d13(d13.imag(), -d13.real());  // exp(-i*pi/2) = -i
      out[k] = s02 + s13;
      out[k + m] = d02 + minus_i_d13;
      out[k + 2 * m] = s02 - s13;
      out[k + 3 * m] = d02 - minus_i_d13;
    }
    return;
  }
  if (radix == 3) {
    const double s = std::sqrt(3.0) / 2;  // sin(2*pi/3); cos(2*pi/3) = -1/2
    for (int k = 0; k < m; ++k) {
      const Complex a0 = out[k];
      const Complex a1 = out[k + m] * w[k * stride];
      const Complex a2 = out[k + 2 * m] * w[2 * k * stride];
      const Complex sum = a1 + a2, d = s * (a1 - a2);
      const Complex t = a0 - 0.5 * sum, u(d.imag(), -d.real());  // u = -i * d
      out[k] = a0 + sum;
      out[k + m] = t + u;
      out[k + 2 * m] = t - u;
    }
    return;
  }
  if (radix == 5) {
    // Pairs r and 5 - r share cosines and have opposite sines, which halves the multiplies.
    const double c1 = std::cos(2 * std::numbers::pi / 5), c2 = std::cos(4 * std::numbers::pi / 5);
    const double s1 = std::sin(2 * std::numbers::pi / 5), s2 = std::sin(4 * std::numbers::pi / 5);
    for (int k = 0; k < m; ++k) {
      const Complex a0 = out[k];
      const Complex a1 = out[k + m] * w[k * stride];
      const Complex a2 = out[k + 2 * m] * w[2 * k * stride];
      const Complex a3 = out[k + 3 * m] * w[3 * k * stride];
      const Complex a4 = out[k + 4 * m] * w[4 * k * stride];
      const Complex b1 = a1 + a4, b2 = a2 + a3, d1 = a1 - a4, d2 = a2 - a3;
      const Complex t1 = a0 + c1 * b1 + c2 * b2, t2 = a0 + c2 * b1 + c1 * b2;
      const Complex v1 = s1 * d1 + s2 * d2, v2 = s2 * d1 - s1 * d2;
      const Complex u1(v1.imag(), -v1.real()), u2(v2.imag(), -v2.real());  // -i * v
      out[k] = a0 + b1 + b2;
      out[k + m] = t1 + u1;
      out[k + 4 * m] = t1 - u1;
      out[k + 2 * m] = t2 + u2;
      out[k + 3 * m] = t2 - u2;
    }
    return;
  }
  // Any other prime: the plain DFT of the twiddled values.
  const int root_step = n_ / radix;  // exp(-2*pi*i/radix) = twiddles_[root_step]
  std::array<Complex, 32> small;
  std::vector<Complex> large;
  Complex* t = small.data();
  if (radix > static_cast<int>(small.size())) {
    large.resize(radix);
    t = large.data();
  }
  for (int k = 0; k < m; ++k) {
    t[0] = out[k];
    for (int r = 1; r < radix; ++r) t[r] = out[k + r * m] * w[r * k * stride];
    for (int q = 0; q < radix; ++q) {
      Complex sum = t[0];
      for (int r = 1, e = q; r < radix; ++r, e = (e + q) % radix) sum += t[r] * w[e * root_step];
      out[k + q * m] = sum;
    }
  }
}

RealFft::RealFft(int n) : n_(n), fft_(n >= 2 && n % 2 == 0 ? n / 2 : n) {
  if (n % 2 == 0) split_ = unit_roots(n, n / 2 + 1);
}

// With z[j] = in[2j] + i*in[2j+1] and Z its length-h transform (h = n/2), the even and odd
// samples' transforms are E[k] = (Z[k] + conj(Z[h-k])) / 2 and O[k] = (Z[k] - conj(Z[h-k])) / 2i,
// and the real transform is E[k] + exp(-2*pi*i*k/n) * O[k].
void RealFft::forward(const double* in, Complex* out, Complex* work) const {
  if (n_ % 2 != 0) {
    Complex* full = work + n_;
    for (int j = 0; j < n_; ++j) work[j] = Complex(in[j], 0.0);
    fft_.forward(work, full);
    for (int k = 0; k < bins(); ++k) out[k] = full[k];
    return;
  }
  const int h = n_ / 2;
  Complex* z = work;
  Complex* zf = work + h;
  for (int j = 0; j < h; ++j) z[j] = Complex(in[2 * j], in[2 * j + 1]);
  fft_.forward(z, zf);
  for (int k = 0; k <= h; ++k) {
    const Complex a = zf[k % h];
    const Complex b = std::conj(zf[(h - k) % h]);
    const Complex even = 0.5 * (a + b);
    const Complex diff = 0.5 * (a - b);
    const Complex odd(diff.imag(), -diff.real());  // diff / i
    out[k] = even + split_[k] * odd;
  }
}

}  // namespace mminfer::audio
