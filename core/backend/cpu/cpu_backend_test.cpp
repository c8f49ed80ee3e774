// Tests for the CPU backend, float and double: every op against a naive loop written here
// in double / long double. Exact where the inputs are crafted to make it exact (small
// integers and dyadic scalars), otherwise a stated error bound of the form
//   |got - ref| <= K * eps(T) * M,
// M being the sum of the magnitudes of the terms the op adds up (the standard forward error
// bound of a sum, so cancellation in the result does not make the test lie).
// Dimension legend: m, n, k = gemm dims; B = rows (samples), N = columns (features / classes).
#include "core/backend/backend.hpp"
#include "core/bf16.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "core/rng.hpp"

namespace pts {
namespace {

// Sizes every elementwise op runs over: 1, odd, a SIMD width, not a multiple of one.
constexpr int64_t kSizes[] = {1, 2, 7, 37, 64, 1000};

// Integer values in [-r, r], a pure function of (stream, i).
std::vector<double> ints(uint64_t stream, int64_t n, int r) {
  CounterRng rng(31, stream);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = std::floor(rng.uniform(i) * (2 * r + 1)) - r;
  return v;
}
// Reals uniform in [lo, hi).
std::vector<double> reals(uint64_t stream, int64_t n, double lo, double hi) {
  CounterRng rng(32, stream);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = lo + (hi - lo) * rng.uniform(i);
  return v;
}
template <class T>
std::vector<T> as(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

template <class T>
class CpuBackendTest : public testing::Test {
 protected:
  static constexpr double eps = std::numeric_limits<T>::epsilon();
  std::unique_ptr<Backend<T>> be = make_cpu_backend<T>();
};
using Scalars = testing::Types<float, double>;
TYPED_TEST_SUITE(CpuBackendTest, Scalars);

TYPED_TEST(CpuBackendTest, Name) { EXPECT_EQ(this->be->name(), "cpu"); }

TYPED_TEST(CpuBackendTest, FillCopyAndMaxOverParts) {
  using T = TypeParam;
  std::vector<T> x(5, T(7));
  this->be->fill(x.data() + 1, T(-2), 3);
  EXPECT_EQ(x, as<T>({7, -2, -2, -2, 7}));
  std::vector<T> y(5, T(0));
  this->be->copy(y.data(), x.data(), 4);
  EXPECT_EQ(y, as<T>({7, -2, -2, -2, 0}));
  // Three parts of four: the column-wise maximum.
  const std::vector<T> parts = as<T>({1, 5, -3, 0, 4, 2, -1, -9, 3, 8, -2, -4});
  std::vector<T> out(4);
  this->be->max_over_parts(parts.data(), 3, 4, out.data());
  EXPECT_EQ(out, as<T>({4, 8, -1, 0}));
  this->be->max_over_parts(parts.data(), 1, 4, out.data());
  EXPECT_EQ(out, as<T>({1, 5, -3, 0}));
}

// ---- gemm ------------------------------------------------------------------------------

// Row-major op(A)[i,l], op(B)[l,j] as stored with leading dimensions lda, ldb.
template <class T>
double op_a(Trans t, const T* a, int64_t lda, int64_t i, int64_t l) {
  return t == Trans::no ? a[i * lda + l] : a[l * lda + i];
}
template <class T>
double op_b(Trans t, const T* b, int64_t ldb, int64_t l, int64_t j) {
  return t == Trans::no ? b[l * ldb + j] : b[j * ldb + l];
}

struct GemmCase {
  int64_t m, n, k;
};
constexpr GemmCase kGemmCases[] = {{1, 1, 1}, {3, 5, 7}, {37, 2, 11}, {4, 37, 1}, {16, 9, 33}};
constexpr Trans kTrans[] = {Trans::no, Trans::yes};

// Stored shape of A (m x k, or k x m transposed) and B (k x n, or n x k) with padded rows.
struct GemmBuffers {
  int64_t a_rows, a_cols, lda, b_rows, b_cols, ldb, ldc;
};
GemmBuffers gemm_buffers(Trans ta, Trans tb, const GemmCase& g) {
  GemmBuffers s{};
  s.a_rows = ta == Trans::no ? g.m : g.k;
  s.a_cols = ta == Trans::no ? g.k : g.m;
  s.b_rows = tb == Trans::no ? g.k : g.n;
  s.b_cols = tb == Trans::no ? g.n : g.k;
  s.lda = s.a_cols + 3;  // leading dimensions larger than the minimum
  s.ldb = s.b_cols + 2;
  s.ldc = g.n + 5;
  return s;
}

// Integer entries in [-4, 4], k <= 33, alpha and beta dyadic: every partial sum is a multiple
// of 1/2 below 2^24, so float and double are exact whatever the summation order or FMA use.
TYPED_TEST(CpuBackendTest, GemmAllTransposesExactOnIntegers) {
  using T = TypeParam;
  const T kPad = T(1000);  // padding of A and B: reading it would break exactness
  const T kSentinel = T(-777);  // padding of C: must stay untouched
  const std::pair<double, double> scalars[] = {{1, 0}, {2, -0.5}, {-1, 1}, {0.5, 3}};
  uint64_t stream = 0;
  for (const GemmCase& g : kGemmCases)
    for (Trans ta : kTrans)
      for (Trans tb : kTrans)
        for (auto [alpha, beta] : scalars) {
          SCOPED_TRACE(testing::Message() << "m " << g.m << " n " << g.n << " k " << g.k << " ta "
                                          << int(ta) << " tb " << int(tb) << " alpha " << alpha
                                          << " beta " << beta);
          GemmBuffers s = gemm_buffers(ta, tb, g);
          std::vector<T> a(s.a_rows * s.lda, kPad), b(s.b_rows * s.ldb, kPad);
          std::vector<T> c(g.m * s.ldc, kSentinel);
          auto av = ints(++stream, s.a_rows * s.a_cols, 4), bv = ints(++stream, s.b_rows * s.b_cols, 4);
          auto cv = ints(++stream, g.m * g.n, 4);
          for (int64_t r = 0; r < s.a_rows; ++r)
            for (int64_t q = 0; q < s.a_cols; ++q) a[r * s.lda + q] = T(av[r * s.a_cols + q]);
          for (int64_t r = 0; r < s.b_rows; ++r)
            for (int64_t q = 0; q < s.b_cols; ++q) b[r * s.ldb + q] = T(bv[r * s.b_cols + q]);
          // With beta = 0, C is output only (the BLAS convention): start it at NaN.
          for (int64_t i = 0; i < g.m; ++i)
            for (int64_t j = 0; j < g.n; ++j)
              c[i * s.ldc + j] = beta == 0 ? std::numeric_limits<T>::quiet_NaN() : T(cv[i * g.n + j]);
          const std::vector<T> c0 = c;
          this->be->gemm(ta, tb, g.m, g.n, g.k, T(alpha), a.data(), s.lda, b.data(), s.ldb, T(beta),
                         c.data(), s.ldc);
          for (int64_t i = 0; i < g.m; ++i)
            for (int64_t j = 0; j < s.ldc; ++j) {
              if (j >= g.n) {
                EXPECT_EQ(c[i * s.ldc + j], kSentinel) << "C padding written at " << i << "," << j;
                continue;
              }
              double ref = 0;
              for (int64_t l = 0; l < g.k; ++l)
                ref += op_a(ta, a.data(), s.lda, i, l) * op_b(tb, b.data(), s.ldb, l, j);
              ref = alpha * ref + (beta == 0 ? 0.0 : beta * double(c0[i * s.ldc + j]));
              EXPECT_EQ(double(c[i * s.ldc + j]), ref) << "at " << i << "," << j;
            }
        }
}

// Non-integer inputs: the float64 reference against the standard dot-product bound
// |err| <= (k + 2) * eps(T) * (|alpha| sum_l |a_il b_lj| + |beta c_ij|), k roundings in the
// sum plus the alpha and beta terms.
TYPED_TEST(CpuBackendTest, GemmAllTransposesWithinBoundOnReals) {
  using T = TypeParam;
  const double alpha = 0.7, beta = -1.3;
  uint64_t stream = 100;
  for (const GemmCase& g : kGemmCases)
    for (Trans ta : kTrans)
      for (Trans tb : kTrans) {
        SCOPED_TRACE(testing::Message() << "m " << g.m << " n " << g.n << " k " << g.k << " ta "
                                        << int(ta) << " tb " << int(tb));
        GemmBuffers s = gemm_buffers(ta, tb, g);
        auto a = as<T>(reals(++stream, s.a_rows * s.lda, -1, 1));
        auto b = as<T>(reals(++stream, s.b_rows * s.ldb, -1, 1));
        auto c = as<T>(reals(++stream, g.m * s.ldc, -1, 1));
        const std::vector<T> c0 = c;
        this->be->gemm(ta, tb, g.m, g.n, g.k, T(alpha), a.data(), s.lda, b.data(), s.ldb, T(beta),
                       c.data(), s.ldc);
        for (int64_t i = 0; i < g.m; ++i)
          for (int64_t j = 0; j < g.n; ++j) {
            double dot = 0, mag = 0;
            for (int64_t l = 0; l < g.k; ++l) {
              double p = op_a(ta, a.data(), s.lda, i, l) * op_b(tb, b.data(), s.ldb, l, j);
              dot += p;
              mag += std::abs(p);
            }
            // T(alpha), T(beta) are what the backend sees; the reference uses them too.
            double ref = double(T(alpha)) * dot + double(T(beta)) * double(c0[i * s.ldc + j]);
            double bound = (g.k + 2) * this->eps *
                           (std::abs(alpha) * mag + std::abs(beta * double(c0[i * s.ldc + j])));
            EXPECT_NEAR(double(c[i * s.ldc + j]), ref, bound) << "at " << i << "," << j;
          }
      }
}

// ---- bias, scale -----------------------------------------------------------------------

TYPED_TEST(CpuBackendTest, AddBiasAndBiasGradExactOnIntegers) {
  using T = TypeParam;
  for (int64_t rows : {1, 3, 37})
    for (int64_t cols : {1, 7, 64}) {
      SCOPED_TRACE(testing::Message() << "rows " << rows << " cols " << cols);
      auto y = as<T>(ints(1, rows * cols, 50)), bias = as<T>(ints(2, cols, 50));
      const auto y0 = y;
      this->be->add_bias(y.data(), bias.data(), rows, cols);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < cols; ++j)
          EXPECT_EQ(y[r * cols + j], y0[r * cols + j] + bias[j]) << r << "," << j;

      // bias_grad accumulates: dbias starts non-zero.
      auto dbias = as<T>(ints(3, cols, 50));
      const auto dbias0 = dbias;
      this->be->bias_grad(y0.data(), dbias.data(), rows, cols);
      for (int64_t j = 0; j < cols; ++j) {
        double ref = dbias0[j];
        for (int64_t r = 0; r < rows; ++r) ref += y0[r * cols + j];
        EXPECT_EQ(double(dbias[j]), ref) << "column " << j;
      }
    }
}

TYPED_TEST(CpuBackendTest, ScaleExactWithDyadicAlpha) {
  using T = TypeParam;
  for (int64_t n : kSizes)
    for (double alpha : {0.5, -3.0, 0.0, 1.0}) {
      auto x = as<T>(ints(4, n, 1000));
      const auto x0 = x;
      this->be->scale(x.data(), T(alpha), n);
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(double(x[i]), alpha * x0[i]) << "n " << n << " i " << i;
    }
}

// ---- GELU ------------------------------------------------------------------------------

// The tanh form in long double: y = x/2 (1 + t), t = tanh(c (x + a x^3)), c = sqrt(2/pi).
struct GeluRef {
  long double y, dydx;
  long double mag_y, mag_dydx;  // sums of the magnitudes of the terms, for the error bound
};
GeluRef gelu_ref(long double x) {
  const long double c = std::sqrt(2.0L / std::numbers::pi_v<long double>), a = 0.044715L;
  long double t = std::tanh(c * (x + a * x * x * x));
  long double du = c * (1 + 3 * a * x * x);
  GeluRef r;
  r.y = 0.5L * x * (1 + t);
  r.dydx = 0.5L * (1 + t) + 0.5L * x * (1 - t * t) * du;
  r.mag_y = 0.5L * std::abs(x) * (1 + std::abs(t));
  r.mag_dydx = 0.5L * (1 + std::abs(t)) + 0.5L * std::abs(x) * (1 + t * t) * du;
  return r;
}

// x spread over [-8, 8] (both tails and the curved middle) plus points near 0.
std::vector<double> gelu_inputs(int64_t n) {
  std::vector<double> x = reals(7, n, -8, 8);
  if (n >= 4) x[0] = 0, x[1] = 1e-3, x[2] = -1e-3, x[3] = -0.5;
  return x;
}

// Error bound: t = tanh(...) carries about an ulp of absolute error (float: the backend's
// own exp, Taylor truncation 6e-9 < eps; double: the C library), and 1 + t, 1 - t^2 cancel
// in the negative tail, so the error scales with the term magnitudes M, not with |y|: a
// fixed relative tolerance cannot hold there (float at x = -5: y = -2e-7 comes out 0).
// |err| <= 4 * eps(T) * M; the largest seen on a 400k-point grid over [-20, 20] is 1.7.
constexpr double kGeluK = 4;

TYPED_TEST(CpuBackendTest, GeluForwardMatchesTanhFormula) {
  using T = TypeParam;
  for (int64_t n : kSizes) {
    auto x = as<T>(gelu_inputs(n));
    std::vector<T> y(n + 1, T(-5));  // one sentinel past the end
    this->be->gelu_forward(x.data(), y.data(), n);
    EXPECT_EQ(y[n], T(-5)) << "wrote past n";
    for (int64_t i = 0; i < n; ++i) {
      GeluRef r = gelu_ref(x[i]);
      EXPECT_NEAR(double(y[i]), double(r.y), kGeluK * this->eps * double(r.mag_y) + 1e-300)
          << "n " << n << " x " << x[i];
    }
  }
}

TYPED_TEST(CpuBackendTest, GeluBackwardMatchesAnalyticDerivative) {
  using T = TypeParam;
  for (int64_t n : kSizes) {
    auto x = as<T>(gelu_inputs(n)), dy = as<T>(reals(8, n, -2, 2));
    std::vector<T> dx(n + 1, T(-5));
    this->be->gelu_backward(x.data(), dy.data(), dx.data(), n);
    EXPECT_EQ(dx[n], T(-5)) << "wrote past n";
    for (int64_t i = 0; i < n; ++i) {
      GeluRef r = gelu_ref(x[i]);
      double bound = kGeluK * this->eps * std::abs(double(dy[i])) * double(r.mag_dydx) + 1e-300;
      EXPECT_NEAR(double(dx[i]), double(dy[i]) * double(r.dydx), bound) << "n " << n << " x " << x[i];
    }
  }
}

// Large |x|: t saturates at +-1, so y = x (or 0) and dy/dx = 1 (or 0), with no NaN or inf
// from the exp inside tanh overflowing. For |x| >= 10, u = c (x + a x^3) >= 43.6 and
// 1 - |t| < 2 exp(-2u) < 1e-37, below both precisions' resolution: the results are the
// saturated values up to the last rounding (eps(T) relative).
TYPED_TEST(CpuBackendTest, GeluSaturatesForLargeInputs) {
  using T = TypeParam;
  const std::vector<T> x = {10, 12.5, 15, 20, -10, -12.5, -15, -20};
  const std::vector<T> ones(x.size(), T(1));
  std::vector<T> y(x.size()), dx(x.size());
  this->be->gelu_forward(x.data(), y.data(), x.size());
  this->be->gelu_backward(x.data(), ones.data(), dx.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "x " << x[i]);
    ASSERT_TRUE(std::isfinite(y[i]) && std::isfinite(dx[i])) << y[i] << " " << dx[i];
    EXPECT_NEAR(double(y[i]), x[i] > 0 ? double(x[i]) : 0.0, this->eps * std::abs(double(x[i])));
    EXPECT_NEAR(double(dx[i]), x[i] > 0 ? 1.0 : 0.0, this->eps);
  }
  // At +-20 tanh is exactly +-1 in both precisions.
  EXPECT_EQ(y[3], T(20));
  EXPECT_EQ(y[7], T(0));
  EXPECT_EQ(dx[3], T(1));
  EXPECT_EQ(dx[7], T(0));
}

// gelu_backward against central differences of gelu_forward, double only: truncation
// h^2/6 |y'''| ~ 2e-11 and rounding eps |y| / h ~ 1e-10 for |x| <= 8, far under 1e-8.
TEST(CpuBackendDouble, GeluBackwardMatchesFiniteDifferences) {
  auto be = make_cpu_backend<double>();
  const double h = 1e-5;
  for (int64_t n : kSizes) {
    auto x = gelu_inputs(n);
    std::vector<double> xp(n), xm(n), yp(n), ym(n), dx(n), ones(n, 1.0);
    for (int64_t i = 0; i < n; ++i) xp[i] = x[i] + h, xm[i] = x[i] - h;
    be->gelu_forward(xp.data(), yp.data(), n);
    be->gelu_forward(xm.data(), ym.data(), n);
    be->gelu_backward(x.data(), ones.data(), dx.data(), n);
    for (int64_t i = 0; i < n; ++i)
      EXPECT_NEAR(dx[i], (yp[i] - ym[i]) / (xp[i] - xm[i]), 1e-8) << "x " << x[i];
  }
}

// ---- softmax cross-entropy -------------------------------------------------------------

struct XentRef {
  std::vector<double> dlogits;
  double loss = 0;
};
// Naive, in long double: loss_r = log sum_j exp(z_j) - z_y.
template <class T>
XentRef xent_ref(const std::vector<T>& z, const std::vector<int32_t>& labels, int64_t rows,
                 int64_t cols, double norm) {
  XentRef r;
  r.dlogits.resize(rows * cols);
  long double loss = 0;
  for (int64_t b = 0; b < rows; ++b) {
    long double zmax = z[b * cols];
    for (int64_t j = 0; j < cols; ++j) zmax = std::max<long double>(zmax, z[b * cols + j]);
    long double sum = 0;
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(z[b * cols + j] - zmax);
    loss += std::log(sum) + zmax - z[b * cols + labels[b]];
    for (int64_t j = 0; j < cols; ++j)
      r.dlogits[b * cols + j] =
          double((std::exp(z[b * cols + j] - zmax) / sum - (j == labels[b] ? 1 : 0)) / norm);
  }
  r.loss = double(loss / norm);
  return r;
}

// Logits are multiples of 1/4 in [-6, 6], so z - max(z) is exact in float too and both
// precisions feed the same values into the double-precision exp and log.
template <class T>
std::vector<T> xent_logits(uint64_t stream, int64_t n) {
  auto v = ints(stream, n, 24);
  for (double& x : v) x /= 4;
  return as<T>(v);
}
std::vector<int32_t> xent_labels(int64_t rows, int64_t cols) {
  std::vector<int32_t> y(rows);
  for (int64_t b = 0; b < rows; ++b) y[b] = static_cast<int32_t>((b * 7 + 3) % cols);
  return y;
}

TYPED_TEST(CpuBackendTest, SoftmaxXentMatchesNaive) {
  using T = TypeParam;
  for (int64_t rows : {1, 3, 37})
    for (int64_t cols : {1, 2, 10, 37}) {
      SCOPED_TRACE(testing::Message() << "rows " << rows << " cols " << cols);
      auto z = xent_logits<T>(rows * 100 + cols, rows * cols);
      auto labels = xent_labels(rows, cols);
      const double norm = 2.0 * rows;  // e.g. the local batch of a rank pair
      std::vector<T> dz(rows * cols + 1, T(-5));
      double loss = this->be->softmax_xent(z.data(), labels.data(), rows, cols, norm, dz.data());
      EXPECT_EQ(dz[rows * cols], T(-5)) << "wrote past rows*cols";
      XentRef ref = xent_ref(z, labels, rows, cols, norm);
      // The loss is computed in double for both T: per row the sum of `cols` exps and a log,
      // |err| <= (cols + 4) eps(double) * (1 + |loss_r|), each row's loss_r <= 12 + log(cols).
      const double eps64 = std::numeric_limits<double>::epsilon();
      EXPECT_NEAR(loss, ref.loss, (cols + 4) * eps64 * (13 + std::log(cols)) * rows / norm);
      // dlogits: that double error over norm, then one rounding to T.
      for (int64_t i = 0; i < rows * cols; ++i)
        EXPECT_NEAR(double(dz[i]), ref.dlogits[i],
                    this->eps * std::abs(ref.dlogits[i]) + (cols + 4) * eps64 / norm)
            << "element " << i;
      // Each row of dlogits sums to zero (softmax sums to one, minus the one-hot).
      for (int64_t b = 0; b < rows; ++b) {
        double s = 0;
        for (int64_t j = 0; j < cols; ++j) s += dz[b * cols + j];
        EXPECT_NEAR(s, 0.0, 2 * cols * this->eps / norm) << "row " << b;
      }
    }
}

// dlogits is the gradient of the returned loss: central differences in double, h = 1e-5.
// Truncation h^2/6 |loss'''| <= 1e-11 / norm, rounding eps |loss| / h ~ 1e-10; tol 1e-8.
TEST(CpuBackendDouble, SoftmaxXentGradientMatchesFiniteDifferences) {
  auto be = make_cpu_backend<double>();
  const double h = 1e-5;
  for (int64_t rows : {1, 3, 8})
    for (int64_t cols : {2, 5, 37}) {
      SCOPED_TRACE(testing::Message() << "rows " << rows << " cols " << cols);
      auto z = reals(rows * 100 + cols, rows * cols, -3, 3);
      auto labels = xent_labels(rows, cols);
      const double norm = rows;
      std::vector<double> dz(rows * cols), scratch(rows * cols);
      be->softmax_xent(z.data(), labels.data(), rows, cols, norm, dz.data());
      for (int64_t i = 0; i < rows * cols; ++i) {
        auto zp = z, zm = z;
        zp[i] += h;
        zm[i] -= h;
        double lp = be->softmax_xent(zp.data(), labels.data(), rows, cols, norm, scratch.data());
        double lm = be->softmax_xent(zm.data(), labels.data(), rows, cols, norm, scratch.data());
        EXPECT_NEAR(dz[i], (lp - lm) / (zp[i] - zm[i]), 1e-8) << "element " << i;
      }
    }
}

// ---- optimizers ------------------------------------------------------------------------

// sgd_momentum with dyadic hyperparameters and integer inputs: every value stays a short
// dyadic fraction, so float and double match the formula exactly.
// bfloat16 keeps the float's top 16 bits, rounded to nearest with ties to even; add_bf16
// adds the values back; axpy is y += a x.
TYPED_TEST(CpuBackendTest, Bf16RoundsToNearestEvenAndAxpyAdds) {
  using T = TypeParam;
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even (1) wins; 1 + 3 2^-8 ties up to 1 + 2^-6;
  // just above the tie rounds up; -2.5 and 3e38 are exact or round to the nearest.
  std::vector<T> x = {T(1), T(1 + 1.0 / 256), T(1 + 3.0 / 256), T(1 + 1.0 / 256 + 1.0 / 4096), T(-2.5), T(0)};
  std::vector<uint16_t> q(x.size());
  this->be->to_bf16(x.data(), q.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(q, (std::vector<uint16_t>{0x3f80, 0x3f80, 0x3f82, 0x3f81, 0xc020, 0x0000}));
  std::vector<T> y(x.size(), T(1));
  this->be->add_bf16(y.data(), q.data(), static_cast<int64_t>(y.size()));
  EXPECT_EQ(y, (std::vector<T>{T(2), T(2), T(2 + 1.0 / 64), T(2 + 1.0 / 128), T(-1.5), T(1)}));
  std::vector<T> a = {T(1), T(2)}, b = {T(4), T(8)};
  this->be->axpy(a.data(), T(0.5), b.data(), 2);
  EXPECT_EQ(a, (std::vector<T>{T(3), T(6)}));
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::quiet_NaN()) & 0x7fc0, 0x7fc0);
}

TYPED_TEST(CpuBackendTest, SgdMomentumExactWithDyadicParameters) {
  using T = TypeParam;
  const SgdParams o{0.5, 0.75, 0.25};
  for (int64_t n : kSizes) {
    auto p = as<T>(ints(10, n, 8)), m = std::vector<T>(n, T(0));
    std::vector<double> pr(p.begin(), p.end()), mr(n, 0.0);
    for (int step = 1; step <= 3; ++step) {
      auto g = as<T>(ints(10 + step, n, 8));
      this->be->sgd_momentum(p.data(), g.data(), m.data(), n, o);
      for (int64_t i = 0; i < n; ++i) {
        double gi = g[i] + o.weight_decay * pr[i];
        mr[i] = o.momentum * mr[i] + gi;
        pr[i] -= o.lr * mr[i];
        ASSERT_EQ(double(m[i]), mr[i]) << "n " << n << " step " << step << " i " << i;
        ASSERT_EQ(double(p[i]), pr[i]) << "n " << n << " step " << step << " i " << i;
      }
    }
  }
}

// Default-style hyperparameters (not dyadic): one step of the formula in double from the
// backend's own previous state, so each step's error is checked alone. Each output is a
// sum of two terms after at most 4 roundings: |err| <= 4 eps(T) * (sum of |terms|).
TYPED_TEST(CpuBackendTest, SgdMomentumWithinBoundOnReals) {
  using T = TypeParam;
  const SgdParams o{0.1, 0.9, 0.01};
  const double lr = T(o.lr), mu = T(o.momentum), wd = T(o.weight_decay);  // what T sees
  for (int64_t n : kSizes) {
    auto p = as<T>(reals(20, n, -1, 1)), m = std::vector<T>(n, T(0));
    for (int step = 1; step <= 3; ++step) {
      auto g = as<T>(reals(20 + step, n, -1, 1));
      const std::vector<T> p0 = p, m0 = m;
      this->be->sgd_momentum(p.data(), g.data(), m.data(), n, o);
      for (int64_t i = 0; i < n; ++i) {
        double gi = g[i] + wd * p0[i], mi = mu * m0[i] + gi, pi = p0[i] - lr * mi;
        double mag_m = mu * std::abs(m0[i]) + std::abs(g[i]) + wd * std::abs(p0[i]);
        EXPECT_NEAR(double(m[i]), mi, 4 * this->eps * mag_m) << "n " << n << " step " << step;
        EXPECT_NEAR(double(p[i]), pi, 4 * this->eps * (std::abs(p0[i]) + lr * mag_m))
            << "n " << n << " step " << step;
      }
    }
  }
}

// adamw: three steps, each against the backend.hpp formula in double from the backend's
// previous state, with the hyperparameters rounded to T as the backend uses them. Error:
// m and v are two-term sums (4 eps of their magnitude); p's update passes through sqrt,
// a division and the bias corrections (16 eps of the update) plus p's own rounding.
TYPED_TEST(CpuBackendTest, AdamwMatchesFormulaOverThreeSteps) {
  using T = TypeParam;
  const AdamParams o{1e-2, 0.9, 0.999, 1e-8, 0.1};
  const double b1 = T(o.beta1), b2 = T(o.beta2), lr = T(o.lr), eps_adam = T(o.eps),
               wd = T(o.weight_decay);
  for (int64_t n : kSizes) {
    auto p = as<T>(reals(30, n, -2, 2)), m = std::vector<T>(n, T(0)), v = m;
    for (int64_t t = 1; t <= 3; ++t) {
      auto g = as<T>(reals(30 + t, n, -1, 1));
      if (n >= 2) g[0] = T(1e-9), g[1] = T(-3e-8);  // where eps matters against sqrt(v)
      const std::vector<T> p0 = p, m0 = m, v0 = v;
      this->be->adamw(p.data(), g.data(), m.data(), v.data(), n, o, t);
      const double c1 = double(T(1 / (1 - std::pow(o.beta1, double(t))))),
                   c2 = double(T(1 / (1 - std::pow(o.beta2, double(t)))));
      for (int64_t i = 0; i < n; ++i) {
        SCOPED_TRACE(testing::Message() << "n " << n << " t " << t << " i " << i);
        double gi = g[i];
        double mi = b1 * m0[i] + (1 - b1) * gi;
        double vi = b2 * v0[i] + (1 - b2) * gi * gi;
        double upd = lr * (mi * c1 / (std::sqrt(vi * c2) + eps_adam) + wd * p0[i]);
        double pi = p0[i] - upd;
        EXPECT_NEAR(double(m[i]), mi, 4 * this->eps * (b1 * std::abs(m0[i]) + (1 - b1) * std::abs(gi)));
        EXPECT_NEAR(double(v[i]), vi, 4 * this->eps * (b2 * v0[i] + (1 - b2) * gi * gi));
        double mag_upd = lr * (std::abs(mi * c1) / (std::sqrt(vi * c2) + eps_adam) + wd * std::abs(p0[i]));
        EXPECT_NEAR(double(p[i]), pi, 2 * this->eps * std::abs(p0[i]) + 16 * this->eps * mag_upd);
      }
    }
  }
}

}  // namespace
}  // namespace pts
