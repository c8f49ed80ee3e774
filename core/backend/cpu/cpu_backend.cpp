// CPU backend: gemm through OpenBLAS, everything else as plain loops the compiler
// vectorises. float uses a vectorisable exp for GELU's tanh; double uses std::tanh, so the
// float64 exactness runs rest on the C library.
#include <cblas.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <numbers>

#include "core/backend/backend.hpp"

namespace pts {
namespace {

CBLAS_TRANSPOSE cblas_trans(Trans t) { return t == Trans::yes ? CblasTrans : CblasNoTrans; }

// exp(x) for float as 2^k * e^r, |r| <= ln2/2, with a degree-7 Taylor polynomial for e^r
// (truncation r^8/8! < 6e-9, below float's 6e-8 rounding). Written so it vectorises.
inline float exp_float(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  // Round to nearest by adding and subtracting 1.5 * 2^23 (vectorises, unlike nearbyint).
  constexpr float kRound = 12582912.0f;
  float k = (x * std::numbers::log2e_v<float> + kRound) - kRound;
  float r = x - k * 0.693145751953125f - k * 1.428606765330187e-06f;  // ln2 split hi + lo
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t bits = (static_cast<int32_t>(k) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

inline float tanh_of(float u) {
  // tanh(u) = 1 - 2 / (exp(2u) + 1); saturates correctly at both ends.
  return 1.0f - 2.0f / (exp_float(2.0f * u) + 1.0f);
}
inline double tanh_of(double u) { return std::tanh(u); }

template <class T>
constexpr T kGeluC = static_cast<T>(0.7978845608028654);  // sqrt(2/pi)
template <class T>
constexpr T kGeluA = static_cast<T>(0.044715);

template <class T>
class CpuBackend final : public Backend<T> {
 public:
  std::string name() const override { return "cpu"; }

  void gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
            const T* b, int64_t ldb, T beta, T* c, int64_t ldc) override {
    if constexpr (std::is_same_v<T, float>)
      cblas_sgemm(CblasRowMajor, cblas_trans(ta), cblas_trans(tb), m, n, k, alpha, a, lda, b, ldb,
                  beta, c, ldc);
    else
      cblas_dgemm(CblasRowMajor, cblas_trans(ta), cblas_trans(tb), m, n, k, alpha, a, lda, b, ldb,
                  beta, c, ldc);
  }

  void add_bias(T* y, const T* bias, int64_t rows, int64_t cols) override {
    for (int64_t r = 0; r < rows; ++r) {
      T* row = y + r * cols;
      for (int64_t j = 0; j < cols; ++j) row[j] += bias[j];
    }
  }

  void bias_grad(const T* dy, T* dbias, int64_t rows, int64_t cols) override {
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = dy + r * cols;
      for (int64_t j = 0; j < cols; ++j) dbias[j] += row[j];
    }
  }

  void gelu_forward(const T* x, T* y, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) {
      T v = x[i];
      T t = tanh_of(kGeluC<T> * (v + kGeluA<T> * v * v * v));
      y[i] = T(0.5) * v * (T(1) + t);
    }
  }

  void gelu_backward(const T* x, const T* dy, T* dx, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) {
      T v = x[i];
      T t = tanh_of(kGeluC<T> * (v + kGeluA<T> * v * v * v));
      T du = kGeluC<T> * (T(1) + T(3) * kGeluA<T> * v * v);
      dx[i] = dy[i] * (T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * du);
    }
  }

  double softmax_xent(const T* logits, const int32_t* labels, int64_t rows, int64_t cols,
                      double norm, T* dlogits) override {
    double loss = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const T* z = logits + r * cols;
      T* dz = dlogits + r * cols;
      T zmax = *std::max_element(z, z + cols);
      double sum = 0;
      for (int64_t j = 0; j < cols; ++j) sum += std::exp(static_cast<double>(z[j] - zmax));
      double log_sum = std::log(sum);
      int32_t y = labels[r];
      loss += log_sum - static_cast<double>(z[y] - zmax);
      for (int64_t j = 0; j < cols; ++j) {
        double p = std::exp(static_cast<double>(z[j] - zmax) - log_sum);
        dz[j] = static_cast<T>((p - (j == y ? 1.0 : 0.0)) / norm);
      }
    }
    return loss / norm;
  }

  void scale(T* x, T alpha, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) x[i] *= alpha;
  }

  void sgd_momentum(T* p, const T* g, T* m, int64_t n, const SgdParams& o) override {
    const T lr = static_cast<T>(o.lr), mu = static_cast<T>(o.momentum),
            wd = static_cast<T>(o.weight_decay);
    for (int64_t i = 0; i < n; ++i) {
      T gi = g[i] + wd * p[i];
      m[i] = mu * m[i] + gi;
      p[i] -= lr * m[i];
    }
  }

  void adamw(T* p, const T* g, T* m, T* v, int64_t n, const AdamParams& o, int64_t t) override {
    const T b1 = static_cast<T>(o.beta1), b2 = static_cast<T>(o.beta2);
    const T c1 = static_cast<T>(1.0 / (1.0 - std::pow(o.beta1, static_cast<double>(t))));
    const T c2 = static_cast<T>(1.0 / (1.0 - std::pow(o.beta2, static_cast<double>(t))));
    const T lr = static_cast<T>(o.lr), eps = static_cast<T>(o.eps),
            wd = static_cast<T>(o.weight_decay);
    for (int64_t i = 0; i < n; ++i) {
      m[i] = b1 * m[i] + (T(1) - b1) * g[i];
      v[i] = b2 * v[i] + (T(1) - b2) * g[i] * g[i];
      p[i] -= lr * (m[i] * c1 / (std::sqrt(v[i] * c2) + eps) + wd * p[i]);
    }
  }
};

}  // namespace

template <class T>
std::unique_ptr<Backend<T>> make_cpu_backend() {
  return std::make_unique<CpuBackend<T>>();
}
template std::unique_ptr<Backend<float>> make_cpu_backend<float>();
template std::unique_ptr<Backend<double>> make_cpu_backend<double>();

}  // namespace pts
