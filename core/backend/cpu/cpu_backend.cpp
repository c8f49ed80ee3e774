// CPU backend: gemm through OpenBLAS (attention too, one gemm per sequence and head),
// everything else as plain loops the compiler vectorises. float uses a vectorisable exp for
// GELU's tanh and attention's softmax; double uses std::tanh and std::exp, so the float64
// exactness runs rest on the C library.
// Dimension legend: R = rows (tokens), N = features; B = sequences, S = sequence length,
// H = heads, D = head dim.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <vector>

#include "core/backend/backend.hpp"
#include "core/bf16.hpp"

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

inline float exp_of(float x) { return exp_float(x); }
inline double exp_of(double x) { return std::exp(x); }

// Reduction over j < n of combine(acc, term(j)) in kLanes independent accumulators. With
// one accumulator every element waits on the previous maxss / addss (4-cycle latency);
// independent chains keep the FP units busy. For attention's softmax (S = 256, D = 64)
// this took the float forward from 63% to 75% of sgemm's FLOP/s.
template <class T, class Term, class Combine>
T reduce_lanes(int64_t n, T init, Term term, Combine combine) {
  constexpr int64_t kLanes = 16;
  T lane[kLanes];
  std::fill(lane, lane + kLanes, init);
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lane[l] = combine(lane[l], term(j + l));
  T acc = init;
  for (int64_t l = 0; l < kLanes; ++l) acc = combine(acc, lane[l]);
  for (; j < n; ++j) acc = combine(acc, term(j));
  return acc;
}
template <class T>
T max_of(T a, T b) {
  return b > a ? b : a;
}

template <class T>
constexpr T kGeluC = static_cast<T>(0.7978845608028654);  // sqrt(2/pi)
template <class T>
constexpr T kGeluA = static_cast<T>(0.044715);

template <class T>
class CpuBackend final : public Backend<T> {
 public:
  CpuBackend(std::string name, Allocator& allocator) : name_(std::move(name)), allocator_(allocator) {}
  std::string name() const override { return name_; }
  Allocator& allocator() override { return allocator_; }

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

  void add(T* y, const T* x, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i];
  }
  void axpy(T* y, T a, const T* x, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
  }
  void to_bf16(const T* x, uint16_t* q, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) q[i] = bf16_bits(x[i]);
  }
  void add_bf16(T* y, const uint16_t* q, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) y[i] += static_cast<T>(bf16_value(q[i]));
  }

  // Two passes per row (mean, then the centred sum of squares), accumulated in double for
  // both T: the row is read twice, which is noise beside the gemms around a layernorm.
  void layernorm_forward(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* rstd, int64_t rows,
                         int64_t n, double eps) override {
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * n;
      T* yr = y + r * n;
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += xr[j];
      const double mu = sum / static_cast<double>(n);
      double sq = 0;
      for (int64_t j = 0; j < n; ++j) {
        double c = xr[j] - mu;
        sq += c * c;
      }
      const double rs = 1.0 / std::sqrt(sq / static_cast<double>(n) + eps);
      mean[r] = static_cast<T>(mu);
      rstd[r] = static_cast<T>(rs);
      const T m = mean[r], s = rstd[r];
      for (int64_t j = 0; j < n; ++j) yr[j] = (xr[j] - m) * s * gamma[j] + beta[j];
    }
  }

  // With xhat = (x - mean) * rstd and g = dy * gamma:
  //   dx = rstd * (g - mean_j(g) - xhat * mean_j(g * xhat)).
  void layernorm_backward(const T* x, const T* gamma, const T* mean, const T* rstd, const T* dy, T* dx,
                          T* dgamma, T* dbeta, int64_t rows, int64_t n) override {
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * n;
      const T* dyr = dy + r * n;
      T* dxr = dx + r * n;
      const T m = mean[r], s = rstd[r];
      double sum_g = 0, sum_gx = 0;
      for (int64_t j = 0; j < n; ++j) {
        T xhat = (xr[j] - m) * s;
        T g = dyr[j] * gamma[j];
        sum_g += g;
        sum_gx += g * xhat;
        dgamma[j] += dyr[j] * xhat;
        dbeta[j] += dyr[j];
      }
      const T mean_g = static_cast<T>(sum_g / static_cast<double>(n));
      const T mean_gx = static_cast<T>(sum_gx / static_cast<double>(n));
      for (int64_t j = 0; j < n; ++j) {
        T xhat = (xr[j] - m) * s;
        dxr[j] += s * (dyr[j] * gamma[j] - mean_g - xhat * mean_gx);
      }
    }
  }

  // Per (sequence, head): scores = q k^T / sqrt(D) as one [S,S] gemm straight into att (the
  // upper triangle is computed and then overwritten with zeros: half the QK^T flops are
  // wasted, but one full gemm runs faster than S short ones), causal softmax in place, then
  // out = att v as a second gemm. q, k, v are read in place with ld = 3HD, out written
  // with ld = HD. Flops: 4 S^2 D per (sequence, head).
  void attention_forward(const T* qkv, T* out, T* att, int64_t batch, int64_t seq, int64_t heads,
                         int64_t head_dim) override {
    const int64_t S = seq, D = head_dim, HD = heads * head_dim, ld = 3 * HD;
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(D)));
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h) {
        const T* q = qkv + b * S * ld + h * D;
        const T* k = q + HD;
        const T* v = q + 2 * HD;
        T* p = att + (b * heads + h) * S * S;
        gemm(Trans::no, Trans::yes, S, S, D, scale, q, ld, k, ld, T(0), p, S);
        causal_softmax(p, S, S, S, 0);
        gemm(Trans::no, Trans::no, S, D, S, T(1), p, S, v, ld, T(0), out + b * S * HD + h * D, HD);
      }
  }

  // Per (sequence, head), with P = att and dO = dout:
  //   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(dP * P)) * scale,
  //   dQ = dS K,  dK = dS^T Q,
  // four gemms (8 S^2 D flops). dS lives in one [S,S] scratch; P is zero above the
  // diagonal, so dS is too, and the masked keys get no gradient.
  void attention_backward(const T* qkv, const T* att, const T* dout, T* dqkv, int64_t batch, int64_t seq,
                          int64_t heads, int64_t head_dim) override {
    const int64_t S = seq, D = head_dim, HD = heads * head_dim, ld = 3 * HD;
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(D)));
    std::vector<T> ds(S * S);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t off = b * S * ld + h * D;
        const T* q = qkv + off;
        const T* k = q + HD;
        const T* v = q + 2 * HD;
        T* dq = dqkv + off;
        T* dk = dq + HD;
        T* dv = dq + 2 * HD;
        const T* p = att + (b * heads + h) * S * S;
        const T* dout_bh = dout + b * S * HD + h * D;
        gemm(Trans::yes, Trans::no, S, D, S, T(1), p, S, dout_bh, HD, T(0), dv, ld);
        gemm(Trans::no, Trans::yes, S, S, D, T(1), dout_bh, HD, v, ld, T(0), ds.data(), S);
        softmax_backward(p, S, ds.data(), S, nullptr, S, S, S, 0);
        gemm(Trans::no, Trans::no, S, D, S, scale, ds.data(), S, k, ld, T(0), dq, ld);
        gemm(Trans::yes, Trans::no, S, D, S, scale, ds.data(), S, q, ld, T(0), dk, ld);
      }
  }

  // Row by row; the exp loop is separate from the sum so that it vectorises for float.
  void causal_softmax(T* x, int64_t rows, int64_t cols, int64_t period, int64_t first) override {
    check_softmax_mask("causal_softmax", period, first);
    if (cols == 0) return;
    for (int64_t i = 0; i < rows; ++i) {
      T* row = x + i * cols;
      const int64_t lim = last_key(i, cols, period, first);
      const T mx = reduce_lanes(lim + 1, row[0], [&](int64_t j) { return row[j]; }, max_of<T>);
      for (int64_t j = 0; j <= lim; ++j) row[j] = exp_of(row[j] - mx);
      const T sum = reduce_lanes(lim + 1, T(0), [&](int64_t j) { return row[j]; }, std::plus<T>());
      const T inv = T(1) / sum;
      for (int64_t j = 0; j <= lim; ++j) row[j] *= inv;
      std::fill(row + lim + 1, row + cols, T(0));
    }
  }

  void softmax_backward(const T* p, int64_t ld_p, T* ds, int64_t ld_ds, const T* dot, int64_t rows, int64_t cols,
                        int64_t period, int64_t first) override {
    check_softmax_mask("softmax_backward", period, first);
    if (cols == 0) return;
    for (int64_t i = 0; i < rows; ++i) {
      const T* pi = p + i * ld_p;
      T* di = ds + i * ld_ds;
      const int64_t lim = last_key(i, cols, period, first);
      const T d = dot ? dot[i] : reduce_lanes(lim + 1, T(0), [&](int64_t j) { return di[j] * pi[j]; }, std::plus<T>());
      for (int64_t j = 0; j <= lim; ++j) di[j] = pi[j] * (di[j] - d);
      std::fill(di + lim + 1, di + cols, T(0));
    }
  }

  void row_dot(const T* a, int64_t lda, const T* b, int64_t ldb, int64_t rows, int64_t cols, T* out) override {
    for (int64_t i = 0; i < rows; ++i) {
      const T *ai = a + i * lda, *bi = b + i * ldb;
      out[i] = reduce_lanes(cols, T(0), [&](int64_t j) { return ai[j] * bi[j]; }, std::plus<T>());
    }
  }

  void embedding_forward(const int32_t* ids, int64_t rows, const T* table, int64_t v_begin, int64_t v_count,
                         int64_t n, T* out, bool accumulate) override {
    for (int64_t r = 0; r < rows; ++r) {
      T* o = out + r * n;
      const int64_t local = ids[r] - v_begin;
      const bool here = local >= 0 && local < v_count;
      if (here && accumulate) {
        const T* t = table + local * n;
        for (int64_t j = 0; j < n; ++j) o[j] += t[j];
      } else if (here) {
        std::copy(table + local * n, table + (local + 1) * n, o);
      } else if (!accumulate) {
        std::fill(o, o + n, T(0));
      }
    }
  }

  void embedding_backward(const int32_t* ids, int64_t rows, const T* dout, int64_t v_begin, int64_t v_count,
                          int64_t n, T* dtable) override {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t local = ids[r] - v_begin;
      if (local < 0 || local >= v_count) continue;
      const T* d = dout + r * n;
      T* t = dtable + local * n;
      for (int64_t j = 0; j < n; ++j) t[j] += d[j];
    }
  }

  void row_max(const T* x, T* mx, int64_t rows, int64_t cols) override {
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * cols;
      mx[r] = reduce_lanes(cols, -std::numeric_limits<T>::infinity(), [&](int64_t j) { return xr[j]; }, max_of<T>);
    }
  }

  // exp and log in double for both T, as softmax_xent does; the partial sums are then
  // rounded to T for the all-reduce.
  void xent_partials(const T* logits, const int32_t* labels, const T* shift, int64_t rows, int64_t cols,
                     int64_t v_begin, T* sumexp, T* target) override {
    for (int64_t r = 0; r < rows; ++r) {
      const T* z = logits + r * cols;
      const double sh = shift[r];
      double sum = 0;
      for (int64_t j = 0; j < cols; ++j) sum += std::exp(static_cast<double>(z[j]) - sh);
      sumexp[r] = static_cast<T>(sum);
      const int64_t y = labels[r] - v_begin;
      target[r] = y >= 0 && y < cols ? static_cast<T>(static_cast<double>(z[y]) - sh) : T(0);
    }
  }

  double xent_finish(const T* logits, const int32_t* labels, const T* shift, const T* sumexp, const T* target,
                     int64_t rows, int64_t cols, int64_t v_begin, double norm, T* dlogits) override {
    double loss = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const T* z = logits + r * cols;
      T* dz = dlogits + r * cols;
      const double sh = shift[r], inv_sum = 1.0 / static_cast<double>(sumexp[r]);
      loss += std::log(static_cast<double>(sumexp[r])) - static_cast<double>(target[r]);
      const int64_t y = labels[r] - v_begin;
      for (int64_t j = 0; j < cols; ++j) {
        double p = std::exp(static_cast<double>(z[j]) - sh) * inv_sum;
        dz[j] = static_cast<T>((p - (j == y ? 1.0 : 0.0)) / norm);
      }
    }
    return loss / norm;
  }

  void scale(T* x, T alpha, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) x[i] *= alpha;
  }

  void fill(T* x, T value, int64_t n) override { std::fill(x, x + n, value); }
  void copy(T* dst, const T* src, int64_t n) override {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T));
  }
  void upload(T* dst, const T* host, int64_t n) override { copy(dst, host, n); }
  void download(T* host, const T* src, int64_t n) override { copy(host, src, n); }
  void max_over_parts(const T* parts, int64_t nparts, int64_t n, T* out) override {
    for (int64_t i = 0; i < n; ++i) {
      T m = parts[i];
      for (int64_t p = 1; p < nparts; ++p) m = std::max(m, parts[p * n + i]);
      out[i] = m;
    }
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

 private:
  std::string name_;
  Allocator& allocator_;

  // The last key row i of a masked softmax sees (Backend::causal_softmax).
  static int64_t last_key(int64_t i, int64_t cols, int64_t period, int64_t first) {
    return std::min(period > 0 ? first + i % period : cols - 1, cols - 1);
  }
};

}  // namespace

template <class T>
std::unique_ptr<Backend<T>> make_cpu_backend(const std::string& name, Allocator& allocator) {
  return std::make_unique<CpuBackend<T>>(name, allocator);
}
template std::unique_ptr<Backend<float>> make_cpu_backend<float>(const std::string&, Allocator&);
template std::unique_ptr<Backend<double>> make_cpu_backend<double>(const std::string&, Allocator&);

}  // namespace pts
