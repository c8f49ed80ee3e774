// Tests for the CPU backend's transformer ops, float and double: each op against a naive
// float64 loop written here, and every backward against central differences in float64.
// Dimension legend: R = rows (tokens), N = features, V = vocabulary; B = sequences,
// S = sequence length, H = heads, D = head dim.
//
// Tolerances. Reference comparisons: |got - ref| <= tol(T) * max(1, |ref|), tol = 1e-12 for
// double and 1e-5 for float. The inputs are O(1) and no op sums more than ~70 terms, so the
// rounding error is at most ~100 eps(T) of the O(1) term magnitudes: 2e-14 (double) and
// 1e-5 > 6e-6 (float). softmax_backward is compared bitwise, on inputs crafted to make every
// product and sum exact. Finite differences (double only): h = 1e-5, truncation h^2/6 |f'''|
// ~ 1e-10 and rounding eps |L| / h ~ 1e-10, tolerance 1e-6.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/backend/backend.hpp"
#include "core/rng.hpp"

namespace pts {
namespace {

// Reals uniform in [lo, hi), a pure function of (stream, i).
std::vector<double> reals(uint64_t stream, int64_t n, double lo, double hi) {
  CounterRng rng(41, stream);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = lo + (hi - lo) * rng.uniform(i);
  return v;
}
// Integers in [-r, r].
std::vector<double> ints(uint64_t stream, int64_t n, int r) {
  CounterRng rng(42, stream);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = std::floor(rng.uniform(i) * (2 * r + 1)) - r;
  return v;
}
template <class T>
std::vector<T> as(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}
// sum_i w[i] * y[i]: the scalar loss whose gradient with respect to y is w.
template <class T>
double dot(const std::vector<double>& w, const std::vector<T>& y) {
  double s = 0;
  for (size_t i = 0; i < w.size(); ++i) s += w[i] * double(y[i]);
  return s;
}

constexpr double kFdStep = 1e-5;
constexpr double kFdTol = 1e-6;

template <class T>
class TransformerOpsTest : public testing::Test {
 protected:
  static constexpr double tol = std::is_same_v<T, double> ? 1e-12 : 1e-5;
  static double bound(double ref) { return tol * std::max(1.0, std::abs(ref)); }
  std::unique_ptr<Backend<T>> be = make_cpu_backend<T>();
};
using Scalars = testing::Types<float, double>;
TYPED_TEST_SUITE(TransformerOpsTest, Scalars);

// ---- add -------------------------------------------------------------------------------

TYPED_TEST(TransformerOpsTest, AddExactOnIntegers) {
  using T = TypeParam;
  for (int64_t n : {1, 7, 64, 1000}) {
    auto y = as<T>(ints(1, n, 1000)), x = as<T>(ints(2, n, 1000));
    const auto y0 = y;
    this->be->add(y.data(), x.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(double(y[i]), double(y0[i]) + double(x[i])) << "n " << n;
  }
}

// ---- layernorm -------------------------------------------------------------------------

struct LayerNormRef {
  std::vector<double> y, mean, rstd, xhat;
};
template <class T>
LayerNormRef layernorm_ref(const std::vector<T>& x, const std::vector<T>& gamma, const std::vector<T>& beta,
                           int64_t rows, int64_t n, double eps) {
  LayerNormRef r{std::vector<double>(rows * n), std::vector<double>(rows), std::vector<double>(rows),
                 std::vector<double>(rows * n)};
  for (int64_t i = 0; i < rows; ++i) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mean += x[i * n + j];
    mean /= n;
    for (int64_t j = 0; j < n; ++j) var += (x[i * n + j] - mean) * (x[i * n + j] - mean);
    var /= n;
    r.mean[i] = mean;
    r.rstd[i] = 1 / std::sqrt(var + eps);
    for (int64_t j = 0; j < n; ++j) {
      r.xhat[i * n + j] = (x[i * n + j] - mean) * r.rstd[i];
      r.y[i * n + j] = r.xhat[i * n + j] * gamma[j] + beta[j];
    }
  }
  return r;
}

constexpr int64_t kLnRows = 3;
constexpr int64_t kLnWidths[] = {1, 2, 7, 37};
constexpr double kLnEps = 1e-5;

TYPED_TEST(TransformerOpsTest, LayerNormForwardMatchesNaive) {
  using T = TypeParam;
  for (int64_t n : kLnWidths) {
    SCOPED_TRACE(testing::Message() << "n " << n);
    const int64_t rows = kLnRows;
    auto x = as<T>(reals(10 + n, rows * n, -2, 3)), gamma = as<T>(reals(20 + n, n, 0.5, 1.5)),
         beta = as<T>(reals(30 + n, n, -1, 1));
    std::vector<T> y(rows * n), mean(rows), rstd(rows);
    this->be->layernorm_forward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), rows, n,
                                kLnEps);
    LayerNormRef ref = layernorm_ref(x, gamma, beta, rows, n, kLnEps);
    for (int64_t i = 0; i < rows; ++i) {
      EXPECT_NEAR(double(mean[i]), ref.mean[i], this->bound(ref.mean[i])) << "row " << i;
      // rstd is up to 1/sqrt(eps) = 316 when n = 1: relative comparison.
      EXPECT_NEAR(double(rstd[i]), ref.rstd[i], this->tol * ref.rstd[i]) << "row " << i;
    }
    for (int64_t i = 0; i < rows * n; ++i) EXPECT_NEAR(double(y[i]), ref.y[i], this->bound(ref.y[i])) << i;
  }
}

// Reference: the Jacobian-vector product written out, dy_j/dx_k = gamma_j rstd
// (delta_jk - 1/n - xhat_j xhat_k / n), rather than the backend's folded formula.
// dx, dgamma, dbeta start non-zero: all three accumulate. dx's terms cancel (to exactly 0
// for n = 1), so its bound is tol times the sum of the terms' magnitudes, which carries
// rstd: with n = 1, rstd = 1/sqrt(eps) = 316 multiplies the rounding of dy * gamma (an FMA
// may use it unrounded on one side of g - mean(g)), 1.5e-5 in float.
TYPED_TEST(TransformerOpsTest, LayerNormBackwardMatchesNaiveAndAccumulates) {
  using T = TypeParam;
  for (int64_t n : kLnWidths) {
    SCOPED_TRACE(testing::Message() << "n " << n);
    const int64_t rows = kLnRows;
    auto x = as<T>(reals(10 + n, rows * n, -2, 3)), gamma = as<T>(reals(20 + n, n, 0.5, 1.5)),
         beta = as<T>(reals(30 + n, n, -1, 1)), dy = as<T>(reals(40 + n, rows * n, -1, 1));
    std::vector<T> y(rows * n), mean(rows), rstd(rows);
    this->be->layernorm_forward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), rows, n,
                                kLnEps);
    auto dx = as<T>(reals(50 + n, rows * n, -1, 1)), dgamma = as<T>(reals(60 + n, n, -1, 1)),
         dbeta = as<T>(reals(70 + n, n, -1, 1));
    const auto dx0 = dx, dgamma0 = dgamma, dbeta0 = dbeta;
    this->be->layernorm_backward(x.data(), gamma.data(), mean.data(), rstd.data(), dy.data(), dx.data(),
                                 dgamma.data(), dbeta.data(), rows, n);
    LayerNormRef ref = layernorm_ref(x, gamma, beta, rows, n, kLnEps);
    std::vector<double> dgamma_ref(dgamma0.begin(), dgamma0.end()), dbeta_ref(dbeta0.begin(), dbeta0.end());
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t k = 0; k < n; ++k) {
        double dxk = dx0[i * n + k], mag = std::abs(dxk);
        for (int64_t j = 0; j < n; ++j) {
          const double xx = ref.xhat[i * n + j] * ref.xhat[i * n + k] / n;
          const double jac = gamma[j] * ref.rstd[i] * ((j == k ? 1.0 : 0.0) - 1.0 / n - xx);
          dxk += dy[i * n + j] * jac;
          mag += std::abs(dy[i * n + j] * gamma[j]) * ref.rstd[i] * ((j == k ? 1.0 : 0.0) + 1.0 / n + std::abs(xx));
        }
        EXPECT_NEAR(double(dx[i * n + k]), dxk, this->bound(mag)) << "dx " << i << "," << k;
      }
      for (int64_t j = 0; j < n; ++j) {
        dgamma_ref[j] += dy[i * n + j] * ref.xhat[i * n + j];
        dbeta_ref[j] += dy[i * n + j];
      }
    }
    for (int64_t j = 0; j < n; ++j) {
      EXPECT_NEAR(double(dgamma[j]), dgamma_ref[j], this->bound(dgamma_ref[j])) << "dgamma " << j;
      EXPECT_NEAR(double(dbeta[j]), dbeta_ref[j], this->bound(dbeta_ref[j])) << "dbeta " << j;
    }
  }
}

// L = sum w * layernorm(x; gamma, beta): dx, dgamma, dbeta against central differences.
TEST(TransformerOpsDouble, LayerNormGradientsMatchFiniteDifferences) {
  auto be = make_cpu_backend<double>();
  const int64_t rows = kLnRows, n = 7;
  auto x = reals(1, rows * n, -2, 3), gamma = reals(2, n, 0.5, 1.5), beta = reals(3, n, -1, 1),
       w = reals(4, rows * n, -1, 1);
  auto loss = [&](const std::vector<double>& xs, const std::vector<double>& gs, const std::vector<double>& bs) {
    std::vector<double> y(rows * n), mean(rows), rstd(rows);
    be->layernorm_forward(xs.data(), gs.data(), bs.data(), y.data(), mean.data(), rstd.data(), rows, n, kLnEps);
    return dot(w, y);
  };
  std::vector<double> y(rows * n), mean(rows), rstd(rows), dx(rows * n, 0.0), dgamma(n, 0.0), dbeta(n, 0.0);
  be->layernorm_forward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), rows, n, kLnEps);
  be->layernorm_backward(x.data(), gamma.data(), mean.data(), rstd.data(), w.data(), dx.data(), dgamma.data(),
                         dbeta.data(), rows, n);
  // Central difference of the loss in element i of one of the three inputs.
  auto fd = [&](std::vector<double>& v, int64_t i) {
    const double v0 = v[i];
    v[i] = v0 + kFdStep;
    double lp = loss(x, gamma, beta);
    v[i] = v0 - kFdStep;
    double lm = loss(x, gamma, beta);
    v[i] = v0;
    return (lp - lm) / (2 * kFdStep);
  };
  for (int64_t i = 0; i < rows * n; ++i) EXPECT_NEAR(dx[i], fd(x, i), kFdTol) << "dx " << i;
  for (int64_t j = 0; j < n; ++j) {
    EXPECT_NEAR(dgamma[j], fd(gamma, j), kFdTol) << "dgamma " << j;
    EXPECT_NEAR(dbeta[j], fd(beta, j), kFdTol) << "dbeta " << j;
  }
}

// ---- attention -------------------------------------------------------------------------

struct AttnShape {
  int64_t B, S, H, D;
  int64_t qkv_size() const { return B * S * 3 * H * D; }
  int64_t out_size() const { return B * S * H * D; }
  int64_t att_size() const { return B * H * S * S; }
  // part 0, 1, 2 = q, k, v.
  int64_t qkv_at(int64_t b, int64_t s, int64_t part, int64_t h, int64_t d) const {
    return ((b * S + s) * 3 + part) * H * D + h * D + d;
  }
  int64_t out_at(int64_t b, int64_t s, int64_t h, int64_t d) const { return (b * S + s) * H * D + h * D + d; }
  int64_t att_at(int64_t b, int64_t h, int64_t i, int64_t j) const { return ((b * H + h) * S + i) * S + j; }
};
// The brief's small case, single-token and single-head edges, and one long enough
// (S = 33, D = 8) for OpenBLAS to block the gemms.
constexpr AttnShape kAttnShapes[] = {{2, 5, 2, 3}, {1, 1, 1, 4}, {3, 4, 1, 2}, {1, 33, 2, 8}};

struct AttnRef {
  std::vector<double> out, att;
};
// Scores, causal softmax and the weighted sum of values, one scalar at a time.
template <class T>
AttnRef attention_ref(const AttnShape& a, const std::vector<T>& qkv) {
  AttnRef r{std::vector<double>(a.out_size(), 0.0), std::vector<double>(a.att_size(), 0.0)};
  const double scale = 1 / std::sqrt(double(a.D));
  for (int64_t b = 0; b < a.B; ++b)
    for (int64_t h = 0; h < a.H; ++h)
      for (int64_t i = 0; i < a.S; ++i) {
        std::vector<double> s(i + 1);
        for (int64_t j = 0; j <= i; ++j) {
          s[j] = 0;
          for (int64_t d = 0; d < a.D; ++d) s[j] += qkv[a.qkv_at(b, i, 0, h, d)] * qkv[a.qkv_at(b, j, 1, h, d)];
          s[j] *= scale;
        }
        double mx = *std::max_element(s.begin(), s.end()), sum = 0;
        for (double& v : s) sum += v = std::exp(v - mx);
        for (int64_t j = 0; j <= i; ++j) {
          double p = s[j] / sum;
          r.att[a.att_at(b, h, i, j)] = p;
          for (int64_t d = 0; d < a.D; ++d) r.out[a.out_at(b, i, h, d)] += p * qkv[a.qkv_at(b, j, 2, h, d)];
        }
      }
  return r;
}

TYPED_TEST(TransformerOpsTest, AttentionForwardMatchesNaiveWithCausalMask) {
  using T = TypeParam;
  uint64_t stream = 100;
  for (const AttnShape& a : kAttnShapes) {
    SCOPED_TRACE(testing::Message() << "B " << a.B << " S " << a.S << " H " << a.H << " D " << a.D);
    auto qkv = as<T>(reals(++stream, a.qkv_size(), -2, 2));
    std::vector<T> out(a.out_size(), T(-5)), att(a.att_size(), T(-5));
    this->be->attention_forward(qkv.data(), out.data(), att.data(), a.B, a.S, a.H, a.D);
    AttnRef ref = attention_ref(a, qkv);
    for (int64_t i = 0; i < a.out_size(); ++i) EXPECT_NEAR(double(out[i]), ref.out[i], this->bound(ref.out[i])) << i;
    for (int64_t b = 0; b < a.B; ++b)
      for (int64_t h = 0; h < a.H; ++h)
        for (int64_t i = 0; i < a.S; ++i)
          for (int64_t j = 0; j < a.S; ++j) {
            const int64_t at = a.att_at(b, h, i, j);
            if (j > i)
              EXPECT_EQ(att[at], T(0)) << "masked probability " << b << "," << h << "," << i << "," << j;
            else
              EXPECT_NEAR(double(att[at]), ref.att[at], this->bound(ref.att[at])) << b << "," << h << "," << i;
          }
  }
}

// Changing token t's key and value must leave every earlier query's probabilities and
// output bit for bit unchanged: the masked scores are overwritten with exact zeros and
// 0 * v adds nothing.
TYPED_TEST(TransformerOpsTest, AttentionFutureTokenDoesNotChangeEarlierOutputs) {
  using T = TypeParam;
  const AttnShape a{2, 5, 2, 3};
  auto qkv = as<T>(reals(200, a.qkv_size(), -2, 2));
  std::vector<T> out(a.out_size()), att(a.att_size());
  this->be->attention_forward(qkv.data(), out.data(), att.data(), a.B, a.S, a.H, a.D);
  for (int64_t t = 1; t < a.S; ++t) {
    SCOPED_TRACE(testing::Message() << "perturbed token " << t);
    auto moved = qkv;
    for (int64_t b = 0; b < a.B; ++b)
      for (int64_t h = 0; h < a.H; ++h)
        for (int64_t d = 0; d < a.D; ++d) {
          moved[a.qkv_at(b, t, 1, h, d)] += T(0.75);
          moved[a.qkv_at(b, t, 2, h, d)] -= T(1.5);
        }
    std::vector<T> out2(a.out_size()), att2(a.att_size());
    this->be->attention_forward(moved.data(), out2.data(), att2.data(), a.B, a.S, a.H, a.D);
    for (int64_t b = 0; b < a.B; ++b)
      for (int64_t h = 0; h < a.H; ++h)
        for (int64_t i = 0; i < t; ++i) {
          for (int64_t d = 0; d < a.D; ++d)
            EXPECT_EQ(out2[a.out_at(b, i, h, d)], out[a.out_at(b, i, h, d)]) << "query " << i;
          for (int64_t j = 0; j < a.S; ++j)
            EXPECT_EQ(att2[a.att_at(b, h, i, j)], att[a.att_at(b, h, i, j)]) << "query " << i;
        }
    // The perturbation does reach token t itself (so the check above is not vacuous).
    EXPECT_NE(out2[a.out_at(0, t, 0, 0)], out[a.out_at(0, t, 0, 0)]);
  }
}

// The backward formulas written out scalar by scalar from the float64 reference P:
//   dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dP P)) / sqrt(D), dQ = dS K, dK = dS^T Q.
template <class T>
std::vector<double> attention_backward_ref(const AttnShape& a, const std::vector<T>& qkv,
                                           const std::vector<T>& dout) {
  const AttnRef f = attention_ref(a, qkv);
  const double scale = 1 / std::sqrt(double(a.D));
  std::vector<double> dqkv(a.qkv_size(), 0.0);
  for (int64_t b = 0; b < a.B; ++b)
    for (int64_t h = 0; h < a.H; ++h) {
      std::vector<double> ds(a.S * a.S, 0.0);
      for (int64_t i = 0; i < a.S; ++i) {
        std::vector<double> dp(i + 1, 0.0);
        double rowsum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          for (int64_t d = 0; d < a.D; ++d) dp[j] += dout[a.out_at(b, i, h, d)] * qkv[a.qkv_at(b, j, 2, h, d)];
          rowsum += dp[j] * f.att[a.att_at(b, h, i, j)];
        }
        for (int64_t j = 0; j <= i; ++j) {
          const double p = f.att[a.att_at(b, h, i, j)];
          ds[i * a.S + j] = p * (dp[j] - rowsum) * scale;
          for (int64_t d = 0; d < a.D; ++d) {
            dqkv[a.qkv_at(b, j, 2, h, d)] += p * dout[a.out_at(b, i, h, d)];
            dqkv[a.qkv_at(b, i, 0, h, d)] += ds[i * a.S + j] * qkv[a.qkv_at(b, j, 1, h, d)];
            dqkv[a.qkv_at(b, j, 1, h, d)] += ds[i * a.S + j] * qkv[a.qkv_at(b, i, 0, h, d)];
          }
        }
      }
    }
  return dqkv;
}

// dqkv starts at NaN: it is overwritten, never read.
TYPED_TEST(TransformerOpsTest, AttentionBackwardMatchesNaive) {
  using T = TypeParam;
  uint64_t stream = 300;
  for (const AttnShape& a : kAttnShapes) {
    SCOPED_TRACE(testing::Message() << "B " << a.B << " S " << a.S << " H " << a.H << " D " << a.D);
    auto qkv = as<T>(reals(++stream, a.qkv_size(), -2, 2)), dout = as<T>(reals(++stream, a.out_size(), -1, 1));
    std::vector<T> out(a.out_size()), att(a.att_size());
    std::vector<T> dqkv(a.qkv_size(), std::numeric_limits<T>::quiet_NaN());
    this->be->attention_forward(qkv.data(), out.data(), att.data(), a.B, a.S, a.H, a.D);
    this->be->attention_backward(qkv.data(), att.data(), dout.data(), dqkv.data(), a.B, a.S, a.H, a.D);
    auto ref = attention_backward_ref(a, qkv, dout);
    for (int64_t i = 0; i < a.qkv_size(); ++i) EXPECT_NEAR(double(dqkv[i]), ref[i], this->bound(ref[i])) << i;
  }
}

// L = sum w * attention(qkv): dqkv against central differences over every element of
// qkv, so the masked keys' gradients (from later queries only) are checked as well.
TEST(TransformerOpsDouble, AttentionGradientMatchesFiniteDifferences) {
  auto be = make_cpu_backend<double>();
  uint64_t stream = 400;
  for (const AttnShape& a : {AttnShape{2, 5, 2, 3}, AttnShape{1, 6, 1, 4}}) {
    SCOPED_TRACE(testing::Message() << "B " << a.B << " S " << a.S << " H " << a.H << " D " << a.D);
    auto qkv = reals(++stream, a.qkv_size(), -2, 2), w = reals(++stream, a.out_size(), -1, 1);
    std::vector<double> out(a.out_size()), att(a.att_size()), dqkv(a.qkv_size());
    auto loss = [&](const std::vector<double>& x) {
      be->attention_forward(x.data(), out.data(), att.data(), a.B, a.S, a.H, a.D);
      return dot(w, out);
    };
    loss(qkv);
    be->attention_backward(qkv.data(), att.data(), w.data(), dqkv.data(), a.B, a.S, a.H, a.D);
    for (int64_t i = 0; i < a.qkv_size(); ++i) {
      auto xp = qkv, xm = qkv;
      xp[i] += kFdStep;
      xm[i] -= kFdStep;
      EXPECT_NEAR(dqkv[i], (loss(xp) - loss(xm)) / (xp[i] - xm[i]), kFdTol) << "element " << i;
    }
  }
}

// ---- masked softmax: attention's, and context parallelism's pieces of it ---------------

// Backend::causal_softmax's mask written out: the last key row i sees.
int64_t last_key(int64_t i, int64_t cols, int64_t period, int64_t first) {
  return period == 0 ? cols - 1 : std::min(first + i % period, cols - 1);
}

struct MaskCase {
  int64_t rows, cols, period, first;
  int64_t ld_p, ld_ds;  // softmax_backward's leading dimensions (>= cols)
};
// Attention's own square (period = S, first = 0); repeated matrices (period < rows); a
// shard of queries further down the sequence (first > 0); limits clamped at the last key
// (first + period > cols) and a block wholly in the past (first >= cols); rows longer than
// reduce_lanes' 16 lanes; no mask (period 0, first then ignored). The backward reads p and
// ds with leading dimensions wider than cols in most of them.
constexpr MaskCase kMaskCases[] = {{6, 6, 6, 0, 6, 6}, {12, 5, 3, 0, 7, 5}, {8, 9, 4, 5, 9, 12}, {10, 7, 5, 4, 8, 9},
                                   {6, 4, 3, 10, 4, 6}, {6, 37, 3, 30, 40, 37}, {5, 6, 0, 0, 6, 8}, {4, 6, 0, 3, 9, 6}};

testing::Message describe(const MaskCase& c) {
  return testing::Message() << "rows " << c.rows << " cols " << c.cols << " period " << c.period << " first "
                            << c.first << " ld_p " << c.ld_p << " ld_ds " << c.ld_ds;
}

// The visible entries against the float64 softmax of the same inputs; the masked ones must be
// exact zeros whatever the scores held there.
TYPED_TEST(TransformerOpsTest, CausalSoftmaxMatchesNaiveWithMask) {
  using T = TypeParam;
  uint64_t stream = 900;
  for (const MaskCase& c : kMaskCases) {
    SCOPED_TRACE(describe(c));
    auto x = as<T>(reals(++stream, c.rows * c.cols + 1, -3, 3));  // one sentinel past the end
    const auto x0 = x;
    this->be->causal_softmax(x.data(), c.rows, c.cols, c.period, c.first);
    EXPECT_EQ(x[c.rows * c.cols], x0[c.rows * c.cols]) << "wrote past rows*cols";
    for (int64_t i = 0; i < c.rows; ++i) {
      const int64_t lim = last_key(i, c.cols, c.period, c.first);
      double mx = x0[i * c.cols], sum = 0;
      for (int64_t j = 0; j <= lim; ++j) mx = std::max(mx, double(x0[i * c.cols + j]));
      for (int64_t j = 0; j <= lim; ++j) sum += std::exp(double(x0[i * c.cols + j]) - mx);
      for (int64_t j = 0; j < c.cols; ++j) {
        const T got = x[i * c.cols + j];
        if (j > lim) {
          EXPECT_EQ(got, T(0)) << "masked " << i << "," << j;
        } else {
          const double ref = std::exp(double(x0[i * c.cols + j]) - mx) / sum;
          EXPECT_NEAR(double(got), ref, this->bound(ref)) << i << "," << j;
        }
      }
    }
  }
}

// Inputs that make every product and sum exact in float and double in any order: P in
// multiples of 1/8 in [-1, 1], dP and dot integers in [-8, 8] (|sums| <= 37 * 8 needs 12
// bits). So dS must equal the float64 reference bit for bit, with dot given and with it
// computed. P and dP are non-zero above the mask (a backend reading them there shows), the
// padding past cols is NaN in P and a sentinel in dS (never read, never written).
TYPED_TEST(TransformerOpsTest, SoftmaxBackwardExactWithMaskLeadingDimensionsAndDot) {
  using T = TypeParam;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  uint64_t stream = 950;
  for (const MaskCase& c : kMaskCases)
    for (bool given : {false, true}) {
      SCOPED_TRACE(describe(c) << (given ? " dot given" : " dot computed"));
      std::vector<T> p(c.rows * c.ld_p, nan), ds(c.rows * c.ld_ds, T(-99));
      const auto p8 = ints(++stream, c.rows * c.cols, 8), dp = ints(++stream, c.rows * c.cols, 8),
                 dots = ints(++stream, c.rows, 8);
      for (int64_t i = 0; i < c.rows; ++i)
        for (int64_t j = 0; j < c.cols; ++j) {
          p[i * c.ld_p + j] = T(p8[i * c.cols + j] / 8);
          ds[i * c.ld_ds + j] = T(dp[i * c.cols + j]);
        }
      const auto p0 = p, ds0 = ds;
      const std::vector<T> dot = as<T>(dots);
      this->be->softmax_backward(p.data(), c.ld_p, ds.data(), c.ld_ds, given ? dot.data() : nullptr, c.rows,
                                 c.cols, c.period, c.first);
      EXPECT_EQ(std::memcmp(p.data(), p0.data(), p.size() * sizeof(T)), 0) << "p was written";
      for (int64_t i = 0; i < c.rows; ++i) {
        const int64_t lim = last_key(i, c.cols, c.period, c.first);
        double sum = 0;
        for (int64_t j = 0; j <= lim; ++j) sum += double(ds0[i * c.ld_ds + j]) * double(p0[i * c.ld_p + j]);
        const double d = given ? dots[i] : sum;
        for (int64_t j = 0; j < c.ld_ds; ++j) {
          const double ref = j >= c.cols ? double(ds0[i * c.ld_ds + j])
                             : j > lim   ? 0.0
                                         : double(p0[i * c.ld_p + j]) * (double(ds0[i * c.ld_ds + j]) - d);
          EXPECT_EQ(double(ds[i * c.ld_ds + j]), ref) << i << "," << j;
        }
      }
    }
}

// row_dot on integer inputs (every product and sum exact in any order), so it equals the
// float64 loop bit for bit; the padding between cols and ld is NaN (read it and the row is
// NaN) and out has a sentinel past rows. Lengths on both sides of reduce_lanes' 16 lanes.
TYPED_TEST(TransformerOpsTest, RowDotExactWithLeadingDimensions) {
  using T = TypeParam;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  struct Case {
    int64_t rows, cols, lda, ldb;
  };
  uint64_t stream = 990;
  for (const Case& c : {Case{1, 1, 1, 1}, Case{5, 3, 3, 7}, Case{7, 16, 20, 16}, Case{4, 37, 40, 45}, Case{3, 0, 2, 2}}) {
    SCOPED_TRACE(testing::Message() << "rows " << c.rows << " cols " << c.cols << " lda " << c.lda << " ldb " << c.ldb);
    std::vector<T> a(c.rows * c.lda, nan), b(c.rows * c.ldb, nan), out(c.rows + 1, T(-99));
    const auto ia = ints(++stream, c.rows * c.cols, 8), ib = ints(++stream, c.rows * c.cols, 8);
    for (int64_t i = 0; i < c.rows; ++i)
      for (int64_t j = 0; j < c.cols; ++j) {
        a[i * c.lda + j] = T(ia[i * c.cols + j]);
        b[i * c.ldb + j] = T(ib[i * c.cols + j]);
      }
    this->be->row_dot(a.data(), c.lda, b.data(), c.ldb, c.rows, c.cols, out.data());
    for (int64_t i = 0; i < c.rows; ++i) {
      double ref = 0;
      for (int64_t j = 0; j < c.cols; ++j) ref += ia[i * c.cols + j] * ib[i * c.cols + j];
      EXPECT_EQ(double(out[i]), ref) << "row " << i;
    }
    EXPECT_EQ(out[c.rows], T(-99)) << "wrote past rows";
  }
}

// attention_forward's probabilities are its scaled scores through causal_softmax with
// period S and first 0, bit for bit (one softmax implementation, not two).
TYPED_TEST(TransformerOpsTest, AttentionSoftmaxIsCausalSoftmax) {
  using T = TypeParam;
  const AttnShape a{2, 7, 3, 4};
  auto qkv = as<T>(reals(980, a.qkv_size(), -2, 2));
  std::vector<T> out(a.out_size()), att(a.att_size()), scores(a.att_size());
  this->be->attention_forward(qkv.data(), out.data(), att.data(), a.B, a.S, a.H, a.D);
  const int64_t ld = 3 * a.H * a.D;
  for (int64_t b = 0; b < a.B; ++b)
    for (int64_t h = 0; h < a.H; ++h) {
      const T* q = qkv.data() + a.qkv_at(b, 0, 0, h, 0);
      this->be->gemm(Trans::no, Trans::yes, a.S, a.S, a.D, static_cast<T>(1.0 / std::sqrt(double(a.D))), q, ld,
                     q + a.H * a.D, ld, T(0), scores.data() + a.att_at(b, h, 0, 0), a.S);
    }
  this->be->causal_softmax(scores.data(), a.B * a.H * a.S, a.S, a.S, 0);
  EXPECT_EQ(std::memcmp(scores.data(), att.data(), att.size() * sizeof(T)), 0);
}

// Context parallelism's use: the queries of every (sequence, head) split into shards of P
// consecutive positions, shard r holding rows first = r * P .. first + P - 1 of each [S,S]
// matrix as one [B*H*P, S] block. Each shard's causal_softmax (period P, first) and
// softmax_backward (dot computed) give exactly the full matrices' rows.
TYPED_TEST(TransformerOpsTest, QueryShardsMatchTheFullCausalSoftmax) {
  using T = TypeParam;
  const int64_t mats = 3, S = 12;  // B*H = 3 matrices
  const auto x0 = as<T>(reals(990, mats * S * S, -3, 3)), dp0 = as<T>(reals(991, mats * S * S, -1, 1));
  auto full = x0, dfull = dp0;
  this->be->causal_softmax(full.data(), mats * S, S, S, 0);
  this->be->softmax_backward(full.data(), S, dfull.data(), S, nullptr, mats * S, S, S, 0);
  for (int64_t P : {1, 4, 6}) {
    for (int64_t first = 0; first < S; first += P) {
      SCOPED_TRACE(testing::Message() << "shard of " << P << " queries from " << first);
      std::vector<T> x(mats * P * S), dp(mats * P * S);
      for (int64_t m = 0; m < mats; ++m)
        for (int64_t i = 0; i < P; ++i)
          for (int64_t j = 0; j < S; ++j) {
            x[(m * P + i) * S + j] = x0[(m * S + first + i) * S + j];
            dp[(m * P + i) * S + j] = dp0[(m * S + first + i) * S + j];
          }
      this->be->causal_softmax(x.data(), mats * P, S, P, first);
      this->be->softmax_backward(x.data(), S, dp.data(), S, nullptr, mats * P, S, P, first);
      for (int64_t m = 0; m < mats; ++m)
        for (int64_t i = 0; i < P; ++i)
          for (int64_t j = 0; j < S; ++j) {
            const int64_t at = (m * P + i) * S + j, full_at = (m * S + first + i) * S + j;
            ASSERT_EQ(x[at], full[full_at]) << "p: matrix " << m << " query " << first + i << " key " << j;
            ASSERT_EQ(dp[at], dfull[full_at]) << "dS: matrix " << m << " query " << first + i << " key " << j;
          }
    }
  }
}

TYPED_TEST(TransformerOpsTest, MaskedSoftmaxRejectsANegativePeriodOrFirst) {
  using T = TypeParam;
  std::vector<T> x(4, T(1)), p(4, T(0.25));
  EXPECT_THROW(this->be->causal_softmax(x.data(), 2, 2, -1, 0), Error);
  EXPECT_THROW(this->be->causal_softmax(x.data(), 2, 2, 2, -1), Error);
  EXPECT_THROW(this->be->softmax_backward(p.data(), 2, x.data(), 2, nullptr, 2, 2, -2, 0), Error);
  EXPECT_THROW(this->be->softmax_backward(p.data(), 2, x.data(), 2, nullptr, 2, 2, 2, -3), Error);
}

// ---- embedding -------------------------------------------------------------------------

// A table shard holding rows [v_begin, v_begin + v_count) = [4, 9) of a 12-row embedding,
// looked up with ids inside it, below it, above it, and repeated.
constexpr int64_t kEmbBegin = 4, kEmbCount = 5, kEmbWidth = 6;
const std::vector<int32_t> kEmbIds = {4, 8, 0, 6, 9, 11, 6, 3, 5, 6};

TYPED_TEST(TransformerOpsTest, EmbeddingForwardExactAndZeroOutsideShard) {
  using T = TypeParam;
  const int64_t rows = kEmbIds.size(), n = kEmbWidth;
  auto table = as<T>(ints(500, kEmbCount * n, 100));
  for (bool accumulate : {false, true}) {
    SCOPED_TRACE(testing::Message() << "accumulate " << accumulate);
    auto out = as<T>(ints(501, rows * n + 1, 100));  // one sentinel past the end
    const auto out0 = out;
    this->be->embedding_forward(kEmbIds.data(), rows, table.data(), kEmbBegin, kEmbCount, n, out.data(),
                                accumulate);
    EXPECT_EQ(out[rows * n], out0[rows * n]) << "wrote past rows*n";
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t local = kEmbIds[r] - kEmbBegin;
      const bool here = local >= 0 && local < kEmbCount;
      for (int64_t j = 0; j < n; ++j) {
        double row = here ? double(table[local * n + j]) : 0.0;
        double ref = accumulate ? double(out0[r * n + j]) + row : row;
        EXPECT_EQ(double(out[r * n + j]), ref) << "row " << r << " id " << kEmbIds[r] << " col " << j;
      }
    }
  }
}

TYPED_TEST(TransformerOpsTest, EmbeddingBackwardExactAndAccumulates) {
  using T = TypeParam;
  const int64_t rows = kEmbIds.size(), n = kEmbWidth;
  // One row of padding past the shard: id v_begin + v_count (9) must not land there.
  auto dout = as<T>(ints(510, rows * n, 100)), dtable = as<T>(ints(511, (kEmbCount + 1) * n, 100));
  const auto dtable0 = dtable;
  this->be->embedding_backward(kEmbIds.data(), rows, dout.data(), kEmbBegin, kEmbCount, n, dtable.data());
  for (int64_t j = kEmbCount * n; j < (kEmbCount + 1) * n; ++j)
    EXPECT_EQ(dtable[j], dtable0[j]) << "wrote past the shard at " << j;
  for (int64_t v = 0; v < kEmbCount; ++v)
    for (int64_t j = 0; j < n; ++j) {
      double ref = dtable0[v * n + j];
      for (int64_t r = 0; r < rows; ++r)
        if (kEmbIds[r] == kEmbBegin + v) ref += dout[r * n + j];
      EXPECT_EQ(double(dtable[v * n + j]), ref) << "table row " << v << " col " << j;
    }
}

// L = sum w * embedding(table): dtable against central differences over the shard.
TEST(TransformerOpsDouble, EmbeddingGradientMatchesFiniteDifferences) {
  auto be = make_cpu_backend<double>();
  const int64_t rows = kEmbIds.size(), n = kEmbWidth;
  auto table = reals(520, kEmbCount * n, -1, 1), w = reals(521, rows * n, -1, 1);
  std::vector<double> out(rows * n), dtable(kEmbCount * n, 0.0);
  auto loss = [&](const std::vector<double>& t) {
    be->embedding_forward(kEmbIds.data(), rows, t.data(), kEmbBegin, kEmbCount, n, out.data(), false);
    return dot(w, out);
  };
  be->embedding_backward(kEmbIds.data(), rows, w.data(), kEmbBegin, kEmbCount, n, dtable.data());
  for (int64_t i = 0; i < kEmbCount * n; ++i) {
    auto tp = table, tm = table;
    tp[i] += kFdStep;
    tm[i] -= kFdStep;
    EXPECT_NEAR(dtable[i], (loss(tp) - loss(tm)) / (tp[i] - tm[i]), kFdTol) << "element " << i;
  }
}

// ---- vocabulary-parallel cross-entropy -------------------------------------------------

TYPED_TEST(TransformerOpsTest, RowMaxExactAndMinusInfinityForNoColumns) {
  using T = TypeParam;
  const int64_t rows = 4;
  for (int64_t cols : {1, 5, 37}) {
    auto x = as<T>(ints(600 + cols, rows * cols, 50));
    for (int64_t j = 0; j < cols; ++j) x[j] = T(-60 - j);  // a row of negatives only
    std::vector<T> mx(rows);
    this->be->row_max(x.data(), mx.data(), rows, cols);
    for (int64_t r = 0; r < rows; ++r)
      EXPECT_EQ(mx[r], *std::max_element(x.begin() + r * cols, x.begin() + (r + 1) * cols)) << "row " << r;
  }
  std::vector<T> mx(rows, T(7));
  this->be->row_max(nullptr, mx.data(), rows, 0);
  for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(mx[r], -std::numeric_limits<T>::infinity()) << "row " << r;
}

// One shard on its own against the header's formulas, with a shift that is not the row max
// and totals that include other ranks' (made-up) contributions. Labels below, inside and
// above the shard's columns [v_begin, v_begin + cols).
TYPED_TEST(TransformerOpsTest, XentPartialsAndFinishMatchNaive) {
  using T = TypeParam;
  const int64_t rows = 5, cols = 7, v_begin = 10;
  const double norm = 8;
  const std::vector<int32_t> labels = {10, 3, 16, 17, 13};
  auto z = as<T>(reals(700, rows * cols, -3, 3)), shift = as<T>(reals(701, rows, 2, 4));
  std::vector<T> sumexp(rows), target(rows);
  this->be->xent_partials(z.data(), labels.data(), shift.data(), rows, cols, v_begin, sumexp.data(), target.data());
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t j = 0; j < cols; ++j) s += std::exp(double(z[r * cols + j]) - double(shift[r]));
    const int64_t y = labels[r] - v_begin;
    const double t = y >= 0 && y < cols ? double(z[r * cols + y]) - double(shift[r]) : 0.0;
    EXPECT_NEAR(double(sumexp[r]), s, this->bound(s)) << "row " << r;
    EXPECT_NEAR(double(target[r]), t, this->bound(t)) << "row " << r;
  }

  std::vector<T> sum_total(rows), target_total(rows);
  for (int64_t r = 0; r < rows; ++r) sum_total[r] = sumexp[r] + T(1.25), target_total[r] = target[r] - T(0.5);
  std::vector<T> dz(rows * cols + 1, T(-5));
  double loss = this->be->xent_finish(z.data(), labels.data(), shift.data(), sum_total.data(), target_total.data(),
                                      rows, cols, v_begin, norm, dz.data());
  EXPECT_EQ(dz[rows * cols], T(-5)) << "wrote past rows*cols";
  double loss_ref = 0;
  for (int64_t r = 0; r < rows; ++r) {
    loss_ref += (std::log(double(sum_total[r])) - double(target_total[r])) / norm;
    for (int64_t j = 0; j < cols; ++j) {
      double p = std::exp(double(z[r * cols + j]) - double(shift[r])) / double(sum_total[r]);
      double ref = (p - (j == labels[r] - v_begin ? 1.0 : 0.0)) / norm;
      EXPECT_NEAR(double(dz[r * cols + j]), ref, this->bound(ref)) << r << "," << j;
    }
  }
  EXPECT_NEAR(loss, loss_ref, this->bound(loss_ref));
}

// The vocabulary-parallel recipe with the all-reduces done by hand: logits[R, V] split into
// column shards of the given widths, each shard's row_max combined by max, its partials
// combined by summing in T in rank order. Returns every shard's loss; writes the shards'
// dlogits back into one [R, V] array.
template <class T>
std::vector<double> sharded_xent(Backend<T>& be, const std::vector<T>& z, const std::vector<int32_t>& labels,
                                 int64_t rows, int64_t vocab, const std::vector<int64_t>& widths, double norm,
                                 std::vector<T>& dz) {
  std::vector<std::vector<T>> shard(widths.size());
  std::vector<int64_t> begin(widths.size(), 0);
  for (size_t s = 0; s < widths.size(); ++s) {
    begin[s] = s == 0 ? 0 : begin[s - 1] + widths[s - 1];
    shard[s].resize(rows * widths[s]);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < widths[s]; ++j) shard[s][r * widths[s] + j] = z[r * vocab + begin[s] + j];
  }
  std::vector<T> shift(rows, -std::numeric_limits<T>::infinity()), sumexp(rows, T(0)), target(rows, T(0));
  for (size_t s = 0; s < widths.size(); ++s) {
    std::vector<T> mx(rows);
    be.row_max(shard[s].data(), mx.data(), rows, widths[s]);
    for (int64_t r = 0; r < rows; ++r) shift[r] = std::max(shift[r], mx[r]);
  }
  for (size_t s = 0; s < widths.size(); ++s) {
    std::vector<T> se(rows), tg(rows);
    be.xent_partials(shard[s].data(), labels.data(), shift.data(), rows, widths[s], begin[s], se.data(), tg.data());
    for (int64_t r = 0; r < rows; ++r) sumexp[r] += se[r], target[r] += tg[r];
  }
  std::vector<double> losses;
  dz.assign(rows * vocab, T(0));
  for (size_t s = 0; s < widths.size(); ++s) {
    std::vector<T> d(rows * widths[s]);
    losses.push_back(be.xent_finish(shard[s].data(), labels.data(), shift.data(), sumexp.data(), target.data(), rows,
                                    widths[s], begin[s], norm, d.data()));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < widths[s]; ++j) dz[r * vocab + begin[s] + j] = d[r * widths[s] + j];
  }
  return losses;
}

// One, two and three shards (one of them empty, as an uneven split of a small vocabulary
// can leave one) against the unsplit softmax_xent.
const std::vector<std::vector<int64_t>> kSplits = {{11}, {5, 6}, {3, 4, 4}, {6, 0, 5}};
constexpr int64_t kXentRows = 6, kXentVocab = 11;

std::vector<int32_t> xent_labels() { return {0, 4, 5, 10, 7, 2}; }

TYPED_TEST(TransformerOpsTest, VocabParallelXentMatchesUnsplitSoftmaxXent) {
  using T = TypeParam;
  const int64_t rows = kXentRows, vocab = kXentVocab;
  const double norm = 2.0 * rows;
  auto z = as<T>(reals(800, rows * vocab, -4, 4));
  const auto labels = xent_labels();
  std::vector<T> dz_ref(rows * vocab);
  const double loss_ref = this->be->softmax_xent(z.data(), labels.data(), rows, vocab, norm, dz_ref.data());
  for (const auto& widths : kSplits) {
    SCOPED_TRACE(testing::Message() << "shards " << widths.size() << " first width " << widths[0]);
    std::vector<T> dz;
    auto losses = sharded_xent(*this->be, z, labels, rows, vocab, widths, norm, dz);
    for (double l : losses) EXPECT_EQ(l, losses[0]) << "ranks disagree on the loss";
    EXPECT_NEAR(losses[0], loss_ref, this->bound(loss_ref));
    for (int64_t i = 0; i < rows * vocab; ++i)
      EXPECT_NEAR(double(dz[i]), double(dz_ref[i]), this->bound(double(dz_ref[i]))) << "element " << i;
  }
}

TEST(TransformerOpsDouble, VocabParallelXentGradientMatchesFiniteDifferences) {
  auto be = make_cpu_backend<double>();
  const int64_t rows = kXentRows, vocab = kXentVocab;
  const double norm = rows;
  auto z = reals(810, rows * vocab, -4, 4);
  const auto labels = xent_labels();
  for (const auto& widths : kSplits) {
    SCOPED_TRACE(testing::Message() << "shards " << widths.size() << " first width " << widths[0]);
    std::vector<double> dz, scratch;
    sharded_xent(*be, z, labels, rows, vocab, widths, norm, dz);
    for (int64_t i = 0; i < rows * vocab; ++i) {
      auto zp = z, zm = z;
      zp[i] += kFdStep;
      zm[i] -= kFdStep;
      double lp = sharded_xent(*be, zp, labels, rows, vocab, widths, norm, scratch)[0];
      double lm = sharded_xent(*be, zm, labels, rows, vocab, widths, norm, scratch)[0];
      EXPECT_NEAR(dz[i], (lp - lm) / (zp[i] - zm[i]), kFdTol) << "element " << i;
    }
  }
}

}  // namespace
}  // namespace pts
