// The CUDA backend against the CPU backend, op by op, on the same random inputs (the CPU
// ops are proven against naive loops in core/backend/cpu/), plus the gradient checks by
// central differences, determinism on rerun, the allocator and the registry. Every GPU test
// skips with a message when no GPU is visible.
// Dimension legend: R = rows (tokens), N = features, V = vocabulary; B = sequences,
// S = sequence length, H = heads, D = head dim.
//
// Tolerances: |gpu - cpu| <= tol * max(1, |cpu|) element-wise (the max printed per op).
// float64 tol = 1e-12: the inputs are O(1) and no op sums more than ~1000 terms, so the two
// summation orders differ by at most ~1000 eps = 2e-13. float32 tol = 2e-5: sums of up to 300
// terms in a different order (~300 eps = 1.8e-5 at worst; the GPU accumulates row
// reductions in double, the CPU partly in float) and the GPU's expf/tanhf beside the CPU's
// polynomial exp (each within a few ulp). Exact ops (copy, fill, add, add_bias, scale, the
// bf16 pair, row_max, max_over_parts, embedding forward and backward: one rounding per
// element in the CPU's order) are compared bitwise, and so is softmax_backward on inputs
// crafted to make every sum exact. Finite differences (float64 on the GPU):
// h = 1e-5, truncation and rounding ~1e-10 each, tolerance 1e-6 as in the CPU tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "core/backend/backend.hpp"
#include "core/backend/cuda/cuda_backend.hpp"
#include "core/cuda/device.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"

namespace pts {
namespace {

constexpr char kNoGpu[] = "no GPU visible (cuda_device_count() == 0): the CUDA backend is compiled, not run here";

// Reals uniform in [lo, hi), a pure function of (stream, i).
std::vector<double> reals(uint64_t stream, int64_t n, double lo, double hi) {
  CounterRng rng(43, stream);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = lo + (hi - lo) * rng.uniform(i);
  return v;
}
// Integers in [lo, hi].
std::vector<int32_t> ints(uint64_t stream, int64_t n, int lo, int hi) {
  CounterRng rng(44, stream);
  std::vector<int32_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = lo + static_cast<int32_t>(std::floor(rng.uniform(i) * (hi - lo + 1)));
  return v;
}
template <class U>
std::vector<U> zeros(int64_t n) {
  return std::vector<U>(n);
}
template <class T>
std::vector<T> as(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// Device memory from the backend's allocator, filled from and read back to host vectors.
template <class U>
class DeviceBuf {
 public:
  explicit DeviceBuf(const std::vector<U>& init) : n_(init.size()), bytes_(round64(n_ * sizeof(U))) {
    p_ = static_cast<U*>(cuda_allocator().allocate(bytes_));
    if (n_) PTS_CUDA_CHECK(cudaMemcpy(p_, init.data(), n_ * sizeof(U), cudaMemcpyHostToDevice));
  }
  ~DeviceBuf() { cuda_allocator().release(p_, bytes_); }
  DeviceBuf(const DeviceBuf&) = delete;
  DeviceBuf& operator=(const DeviceBuf&) = delete;
  U* get() const { return p_; }
  // Blocking copy on the legacy default stream, which waits for the backend's (blocking) stream.
  std::vector<U> host() const {
    std::vector<U> v(n_);
    if (n_) PTS_CUDA_CHECK(cudaMemcpy(v.data(), p_, n_ * sizeof(U), cudaMemcpyDeviceToHost));
    return v;
  }

 private:
  static size_t round64(size_t b) { return std::max<size_t>(64, (b + 63) / 64 * 64); }
  size_t n_, bytes_;
  U* p_ = nullptr;
};

// The same initial values on the host (for the CPU backend) and on the device.
template <class U>
struct Pair {
  explicit Pair(const std::vector<U>& init) : cpu(init), dev(init) {}
  U* c() { return cpu.data(); }
  U* g() const { return dev.get(); }
  std::vector<U> cpu;
  DeviceBuf<U> dev;
};

// max_i |got - ref| / max(1, |ref|); infinity for a NaN or infinity in either.
template <class T>
double max_rel_err(const std::vector<T>& got, const std::vector<T>& ref) {
  double e = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = got[i], r = ref[i];
    if (!std::isfinite(g) || !std::isfinite(r)) return std::numeric_limits<double>::infinity();
    e = std::max(e, std::abs(g - r) / std::max(1.0, std::abs(r)));
  }
  return e;
}

template <class T>
class CudaBackendTest : public testing::Test {
 protected:
  static constexpr double tol = std::is_same_v<T, double> ? 1e-12 : 2e-5;
  static constexpr const char* type_name = std::is_same_v<T, double> ? "float64" : "float32";
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << kNoGpu;
    gpu = make_cuda_backend<T>("cuda", GemmMath::full);
  }
  // GPU result within tol of the CPU's; prints the max relative error.
  template <class U>
  void close(const char* op, const Pair<U>& p) {
    gpu->synchronize();
    const double e = max_rel_err(p.dev.host(), p.cpu);
    std::printf("[  error   ] %-8s %-34s max rel err %.3e (bound %.0e)\n", type_name, op, e, tol);
    EXPECT_LE(e, tol) << op;
  }
  void close_value(const char* op, double got, double ref) {
    const double e = std::abs(got - ref) / std::max(1.0, std::abs(ref));
    std::printf("[  error   ] %-8s %-34s max rel err %.3e (bound %.0e)\n", type_name, op, e, tol);
    EXPECT_LE(e, tol) << op << ": gpu " << got << " cpu " << ref;
  }
  // Bitwise equal to the CPU's.
  template <class U>
  void exact(const char* op, const Pair<U>& p) {
    gpu->synchronize();
    const std::vector<U> got = p.dev.host();
    ASSERT_EQ(got.size(), p.cpu.size());
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &p.cpu[i], sizeof(U)) != 0;
    std::printf("[  exact   ] %-8s %-34s %zu of %zu elements differ\n", type_name, op, differ, got.size());
    EXPECT_EQ(differ, 0u) << op;
  }
  std::unique_ptr<Backend<T>> cpu = make_cpu_backend<T>();
  std::unique_ptr<Backend<T>> gpu;
};
using Scalars = testing::Types<float, double>;
TYPED_TEST_SUITE(CudaBackendTest, Scalars);

// ---- the comparison itself (runs without a GPU) -------------------------------------------

TEST(CudaBackendCompare, MaxRelErrFlagsAPlantedError) {
  std::vector<double> ref = reals(1, 100, -3, 3), got = ref;
  EXPECT_EQ(max_rel_err(got, ref), 0.0);
  got[37] += 2e-12 * std::max(1.0, std::abs(ref[37]));
  EXPECT_GT(max_rel_err(got, ref), 1e-12);
  got[37] = std::nan("");
  EXPECT_EQ(max_rel_err(got, ref), std::numeric_limits<double>::infinity());
}

// ---- gemm -------------------------------------------------------------------------------

TYPED_TEST(CudaBackendTest, GemmAllTransposesAndLeadingDimensions) {
  using T = TypeParam;
  const int64_t m = 37, n = 29, k = 64, pad = 3;
  for (Trans ta : {Trans::no, Trans::yes})
    for (Trans tb : {Trans::no, Trans::yes}) {
      const int64_t ar = ta == Trans::no ? m : k, ac = ta == Trans::no ? k : m;
      const int64_t br = tb == Trans::no ? k : n, bc = tb == Trans::no ? n : k;
      const int64_t lda = ac + pad, ldb = bc + pad, ldc = n + pad;
      Pair<T> a(as<T>(reals(1, ar * lda, -1, 1))), b(as<T>(reals(2, br * ldb, -1, 1))),
          c(as<T>(reals(3, m * ldc, -1, 1)));
      this->cpu->gemm(ta, tb, m, n, k, T(0.75), a.c(), lda, b.c(), ldb, T(-0.5), c.c(), ldc);
      this->gpu->gemm(ta, tb, m, n, k, T(0.75), a.g(), lda, b.g(), ldb, T(-0.5), c.g(), ldc);
      const std::string op = std::string("gemm ") + (ta == Trans::yes ? "T" : "N") + (tb == Trans::yes ? "T" : "N");
      this->close(op.c_str(), c);
    }
}

// ---- elementwise --------------------------------------------------------------------------

TYPED_TEST(CudaBackendTest, ElementwiseOps) {
  using T = TypeParam;
  const int64_t rows = 130, cols = 300, n = rows * cols;  // 130 rows: three column chunks, the last partial
  {
    Pair<T> y(as<T>(reals(10, n, -2, 2))), bias(as<T>(reals(11, cols, -1, 1)));
    this->cpu->add_bias(y.c(), bias.c(), rows, cols);
    this->gpu->add_bias(y.g(), bias.g(), rows, cols);
    this->exact("add_bias", y);
  }
  {
    Pair<T> dy(as<T>(reals(12, n, -2, 2))), db(as<T>(reals(13, cols, -1, 1)));
    this->cpu->bias_grad(dy.c(), db.c(), rows, cols);
    this->gpu->bias_grad(dy.g(), db.g(), rows, cols);
    this->close("bias_grad (accumulating)", db);
  }
  {
    Pair<T> x(as<T>(reals(14, n, -6, 6))), y(std::vector<T>(n, T(-7))), dy(as<T>(reals(15, n, -1, 1))),
        dx(std::vector<T>(n, T(-7)));
    this->cpu->gelu_forward(x.c(), y.c(), n);
    this->gpu->gelu_forward(x.g(), y.g(), n);
    this->close("gelu_forward", y);
    this->cpu->gelu_backward(x.c(), dy.c(), dx.c(), n);
    this->gpu->gelu_backward(x.g(), dy.g(), dx.g(), n);
    this->close("gelu_backward", dx);
  }
  {
    Pair<T> y(as<T>(reals(16, n, -2, 2))), x(as<T>(reals(17, n, -2, 2)));
    this->cpu->add(y.c(), x.c(), n);
    this->gpu->add(y.g(), x.g(), n);
    this->exact("add", y);
    this->cpu->axpy(y.c(), T(-0.3), x.c(), n);
    this->gpu->axpy(y.g(), T(-0.3), x.g(), n);
    this->close("axpy", y);
    this->cpu->scale(y.c(), T(0.37), n);
    this->gpu->scale(y.g(), T(0.37), n);
    this->exact("scale", y);
  }
  {
    // Values spanning many binades, ties included (exact halves of a bf16 ulp), a NaN, infinities.
    std::vector<double> v = reals(18, n, -1e3, 1e3);
    v[0] = 1.0 + 1.0 / 256;  // a tie: rounds to even (1.0)
    v[1] = 1.0 + 3.0 / 256;  // a tie: rounds to even (1 + 4/256)
    v[2] = std::nan("");
    v[3] = std::numeric_limits<double>::infinity();
    v[4] = -std::numeric_limits<double>::infinity();
    v[5] = 1e-40;  // subnormal in float
    Pair<T> x(as<T>(v));
    Pair<uint16_t> q(std::vector<uint16_t>(n, 0));
    this->cpu->to_bf16(x.c(), q.c(), n);
    this->gpu->to_bf16(x.g(), q.g(), n);
    this->exact("to_bf16", q);
    std::vector<uint16_t> qq = q.cpu;
    qq[2] = 0;  // no NaN in the sum
    Pair<uint16_t> q2(qq);
    Pair<T> y(as<T>(reals(19, n, -2, 2)));
    this->cpu->add_bf16(y.c(), q2.c(), n);
    this->gpu->add_bf16(y.g(), q2.g(), n);
    this->exact("add_bf16", y);
  }
  {
    Pair<T> x(std::vector<T>(n, T(1)));
    this->cpu->fill(x.c(), T(-2.625), n);
    this->gpu->fill(x.g(), T(-2.625), n);
    this->exact("fill", x);
    Pair<T> src(as<T>(reals(20, n, -2, 2))), dst(std::vector<T>(n, T(0)));
    this->cpu->copy(dst.c(), src.c(), n);
    this->gpu->copy(dst.g(), src.g(), n);
    this->exact("copy", dst);
    const int64_t nparts = 5;
    Pair<T> parts(as<T>(reals(21, nparts * n, -5, 5))), out(std::vector<T>(n, T(0)));
    this->cpu->max_over_parts(parts.c(), nparts, n, out.c());
    this->gpu->max_over_parts(parts.g(), nparts, n, out.g());
    this->exact("max_over_parts", out);
  }
}

TYPED_TEST(CudaBackendTest, UploadDownloadRoundTripBitwise) {
  using T = TypeParam;
  const int64_t n = 1000;
  const std::vector<T> host = as<T>(reals(30, n, -1e6, 1e6));
  DeviceBuf<T> d(std::vector<T>(n, T(0)));
  this->gpu->upload(d.get(), host.data(), n);
  std::vector<T> back(n, T(0));
  this->gpu->download(back.data(), d.get(), n);  // synchronous: no synchronize() before reading
  EXPECT_EQ(std::memcmp(back.data(), host.data(), n * sizeof(T)), 0);
}

// ---- optimizers ---------------------------------------------------------------------------

TYPED_TEST(CudaBackendTest, Optimizers) {
  using T = TypeParam;
  const int64_t n = 5000;
  {
    Pair<T> p(as<T>(reals(40, n, -1, 1))), g(as<T>(reals(41, n, -1, 1))), m(as<T>(reals(42, n, -1, 1)));
    const SgdParams o{0.05, 0.9, 0.01};
    for (int step = 0; step < 3; ++step) {
      this->cpu->sgd_momentum(p.c(), g.c(), m.c(), n, o);
      this->gpu->sgd_momentum(p.g(), g.g(), m.g(), n, o);
    }
    this->close("sgd_momentum p", p);
    this->close("sgd_momentum m", m);
  }
  {
    Pair<T> p(as<T>(reals(43, n, -1, 1))), g(as<T>(reals(44, n, -1, 1))), m(std::vector<T>(n, T(0))),
        v(std::vector<T>(n, T(0)));
    const AdamParams o{1e-3, 0.9, 0.999, 1e-8, 0.1};
    for (int64_t t = 1; t <= 3; ++t) {
      this->cpu->adamw(p.c(), g.c(), m.c(), v.c(), n, o, t);
      this->gpu->adamw(p.g(), g.g(), m.g(), v.g(), n, o, t);
    }
    this->close("adamw p", p);
    this->close("adamw m", m);
    this->close("adamw v", v);
  }
}

// ---- layernorm ----------------------------------------------------------------------------

TYPED_TEST(CudaBackendTest, LayerNormForwardBackward) {
  using T = TypeParam;
  for (int64_t n : {7, 300, 1000}) {
    SCOPED_TRACE(testing::Message() << "n " << n);
    const int64_t rows = 130;  // three column chunks for dgamma/dbeta, the last partial
    Pair<T> x(as<T>(reals(50 + n, rows * n, -2, 3))), gamma(as<T>(reals(51 + n, n, 0.5, 1.5))),
        beta(as<T>(reals(52 + n, n, -1, 1))), y(std::vector<T>(rows * n, T(-7))), mean(std::vector<T>(rows, T(-7))),
        rstd(std::vector<T>(rows, T(-7)));
    this->cpu->layernorm_forward(x.c(), gamma.c(), beta.c(), y.c(), mean.c(), rstd.c(), rows, n, 1e-5);
    this->gpu->layernorm_forward(x.g(), gamma.g(), beta.g(), y.g(), mean.g(), rstd.g(), rows, n, 1e-5);
    this->close("layernorm_forward y", y);
    this->close("layernorm_forward mean", mean);
    this->close("layernorm_forward rstd", rstd);
    // Backward from the CPU's saved statistics on both sides, accumulating into non-zero grads.
    Pair<T> m2(mean.cpu), r2(rstd.cpu), dy(as<T>(reals(53 + n, rows * n, -1, 1))),
        dx(as<T>(reals(54 + n, rows * n, -1, 1))), dgamma(as<T>(reals(55 + n, n, -1, 1))),
        dbeta(as<T>(reals(56 + n, n, -1, 1)));
    this->cpu->layernorm_backward(x.c(), gamma.c(), m2.c(), r2.c(), dy.c(), dx.c(), dgamma.c(), dbeta.c(), rows, n);
    this->gpu->layernorm_backward(x.g(), gamma.g(), m2.g(), r2.g(), dy.g(), dx.g(), dgamma.g(), dbeta.g(), rows, n);
    this->close("layernorm_backward dx", dx);
    this->close("layernorm_backward dgamma", dgamma);
    this->close("layernorm_backward dbeta", dbeta);
  }
}

// ---- attention ----------------------------------------------------------------------------

struct AttnShape {
  int64_t B, S, H, D;
  int64_t qkv_size() const { return B * S * 3 * H * D; }
  int64_t out_size() const { return B * S * H * D; }
  int64_t att_size() const { return B * H * S * S; }
};
// Batched over sequences (B >= H) and over heads (B < H), single token and single head,
// and S = 300 > the 256 threads of a softmax row.
constexpr AttnShape kAttnShapes[] = {{2, 5, 2, 3}, {3, 17, 2, 8}, {1, 33, 4, 16}, {1, 1, 1, 4}, {2, 300, 3, 16}};

TYPED_TEST(CudaBackendTest, AttentionForwardBackward) {
  using T = TypeParam;
  uint64_t stream = 60;
  for (const AttnShape& a : kAttnShapes) {
    SCOPED_TRACE(testing::Message() << "B " << a.B << " S " << a.S << " H " << a.H << " D " << a.D);
    Pair<T> qkv(as<T>(reals(++stream, a.qkv_size(), -2, 2))), out(std::vector<T>(a.out_size(), T(-5))),
        att(std::vector<T>(a.att_size(), T(-5)));
    this->cpu->attention_forward(qkv.c(), out.c(), att.c(), a.B, a.S, a.H, a.D);
    this->gpu->attention_forward(qkv.g(), out.g(), att.g(), a.B, a.S, a.H, a.D);
    this->close("attention_forward out", out);
    this->close("attention_forward att", att);
    Pair<T> att2(att.cpu), dout(as<T>(reals(++stream, a.out_size(), -1, 1))),
        dqkv(std::vector<T>(a.qkv_size(), T(-5)));
    this->cpu->attention_backward(qkv.c(), att2.c(), dout.c(), dqkv.c(), a.B, a.S, a.H, a.D);
    this->gpu->attention_backward(qkv.g(), att2.g(), dout.g(), dqkv.g(), a.B, a.S, a.H, a.D);
    this->close("attention_backward dqkv", dqkv);
  }
}

// The masked softmax on its own (context parallelism's pieces of attention): repeated
// matrices (period < rows), shards further down the sequence (first > 0), limits clamped at
// the last key, limits either side of the 256 threads of a row, no mask (period 0), and
// leading dimensions wider than cols for the backward.
struct MaskCase {
  int64_t rows, cols, period, first, ld_p, ld_ds;
};
constexpr MaskCase kMaskCases[] = {{12, 5, 3, 0, 7, 5}, {8, 9, 4, 5, 9, 12}, {10, 7, 5, 4, 8, 9}, {6, 4, 3, 10, 4, 6},
                                   {6, 300, 3, 254, 301, 303}, {4, 300, 2, 298, 300, 300}, {5, 6, 0, 0, 6, 8},
                                   {3, 300, 0, 7, 300, 302}};
// Backend::causal_softmax's mask: the last key row i sees.
int64_t last_key(int64_t i, int64_t cols, int64_t period, int64_t first) {
  return period == 0 ? cols - 1 : std::min(first + i % period, cols - 1);
}

// The forward within tol of the CPU's and exact zeros above the mask. The backward on inputs
// that make it exact in any summation order (P in multiples of 1/8, dP and dot integers; the
// CPU test's construction) is bitwise the CPU's, padding included, with dot given and not.
TYPED_TEST(CudaBackendTest, CausalSoftmaxAndSoftmaxBackward) {
  using T = TypeParam;
  uint64_t stream = 200;
  for (const MaskCase& c : kMaskCases) {
    SCOPED_TRACE(testing::Message() << "rows " << c.rows << " cols " << c.cols << " period " << c.period << " first "
                                    << c.first << " ld_p " << c.ld_p << " ld_ds " << c.ld_ds);
    Pair<T> x(as<T>(reals(++stream, c.rows * c.cols, -3, 3)));
    this->cpu->causal_softmax(x.c(), c.rows, c.cols, c.period, c.first);
    this->gpu->causal_softmax(x.g(), c.rows, c.cols, c.period, c.first);
    this->close("causal_softmax", x);
    const std::vector<T> got = x.dev.host();
    for (int64_t i = 0; i < c.rows; ++i)
      for (int64_t j = last_key(i, c.cols, c.period, c.first) + 1; j < c.cols; ++j)
        ASSERT_EQ(got[i * c.cols + j], T(0)) << "masked " << i << "," << j;

    const std::vector<int32_t> p8 = ints(++stream, c.rows * c.cols, -8, 8), dp = ints(++stream, c.rows * c.cols, -8, 8);
    std::vector<T> p(c.rows * c.ld_p, std::numeric_limits<T>::quiet_NaN()), ds(c.rows * c.ld_ds, T(-99));
    for (int64_t i = 0; i < c.rows; ++i)
      for (int64_t j = 0; j < c.cols; ++j) {
        p[i * c.ld_p + j] = T(p8[i * c.cols + j]) / T(8);
        ds[i * c.ld_ds + j] = T(dp[i * c.cols + j]);
      }
    const std::vector<int32_t> dots = ints(++stream, c.rows, -8, 8);
    Pair<T> pp(p), dot(std::vector<T>(dots.begin(), dots.end()));
    for (bool given : {false, true}) {
      Pair<T> d(ds);
      this->cpu->softmax_backward(pp.c(), c.ld_p, d.c(), c.ld_ds, given ? dot.c() : nullptr, c.rows, c.cols,
                                  c.period, c.first);
      this->gpu->softmax_backward(pp.g(), c.ld_p, d.g(), c.ld_ds, given ? dot.g() : nullptr, c.rows, c.cols,
                                  c.period, c.first);
      this->exact(given ? "softmax_backward (dot given)" : "softmax_backward", d);
    }
  }
}

// row_dot on integers (every sum exact, so bitwise), leading dimensions past cols with NaN
// padding, a row longer than a block of threads.
TYPED_TEST(CudaBackendTest, RowDotBitwise) {
  using T = TypeParam;
  const int64_t rows = 9, cols = 300, lda = 301, ldb = 310;
  const std::vector<int32_t> ia = ints(1201, rows * cols, -8, 8), ib = ints(1202, rows * cols, -8, 8);
  std::vector<T> a(rows * lda, std::numeric_limits<T>::quiet_NaN()), b(rows * ldb, std::numeric_limits<T>::quiet_NaN());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      a[i * lda + j] = T(ia[i * cols + j]);
      b[i * ldb + j] = T(ib[i * cols + j]);
    }
  Pair<T> pa(a), pb(b), out(std::vector<T>(rows, T(-99)));
  this->cpu->row_dot(pa.c(), lda, pb.c(), ldb, rows, cols, out.c());
  this->gpu->row_dot(pa.g(), lda, pb.g(), ldb, rows, cols, out.g());
  this->exact("row_dot", out);
}

// ---- embedding ----------------------------------------------------------------------------

TYPED_TEST(CudaBackendTest, EmbeddingForwardBackwardBitwise) {
  using T = TypeParam;
  const int64_t rows = 500, n = 48, v_begin = 20, v_count = 30;
  // ids in [0, 80): some below the shard, some above, many repeated (500 rows over 30 ids).
  Pair<int32_t> ids(ints(70, rows, 0, 79));
  Pair<T> table(as<T>(reals(71, v_count * n, -1, 1)));
  for (bool accumulate : {false, true}) {
    Pair<T> out(as<T>(reals(72, rows * n, -1, 1)));
    this->cpu->embedding_forward(ids.c(), rows, table.c(), v_begin, v_count, n, out.c(), accumulate);
    this->gpu->embedding_forward(ids.c(), rows, table.g(), v_begin, v_count, n, out.g(), accumulate);
    this->exact(accumulate ? "embedding_forward accumulate" : "embedding_forward", out);
  }
  Pair<T> dout(as<T>(reals(73, rows * n, -1, 1))), dtable(as<T>(reals(74, v_count * n, -1, 1)));
  this->cpu->embedding_backward(ids.c(), rows, dout.c(), v_begin, v_count, n, dtable.c());
  this->gpu->embedding_backward(ids.c(), rows, dout.g(), v_begin, v_count, n, dtable.g());
  this->exact("embedding_backward", dtable);
}

// ---- cross-entropy ------------------------------------------------------------------------

TYPED_TEST(CudaBackendTest, CrossEntropyOps) {
  using T = TypeParam;
  const int64_t rows = 11, cols = 1000;
  {
    Pair<T> z(as<T>(reals(80, rows * cols, -4, 4)));
    Pair<int32_t> labels(ints(81, rows, 0, cols - 1));
    const double lc = this->cpu->softmax_xent(z.c(), labels.c(), rows, cols, 7.0, z.c());  // aliased
    const double lg = this->gpu->softmax_xent(z.g(), labels.c(), rows, cols, 7.0, z.g());
    this->close_value("softmax_xent loss", lg, lc);
    this->close("softmax_xent dlogits (aliased)", z);
  }
  {
    // One shard [v_begin, v_begin + cols) of a vocabulary of 3000; labels on and off the shard.
    const int64_t v_begin = 1000;
    Pair<T> z(as<T>(reals(82, rows * cols, -4, 4))), mx(std::vector<T>(rows, T(0)));
    Pair<int32_t> labels(ints(83, rows, 0, 2999));
    this->cpu->row_max(z.c(), mx.c(), rows, cols);
    this->gpu->row_max(z.g(), mx.g(), rows, cols);
    this->exact("row_max", mx);
    Pair<T> shift(as<T>(reals(84, rows, 4, 5))), sumexp(std::vector<T>(rows, T(0))), target(std::vector<T>(rows, T(0)));
    this->cpu->xent_partials(z.c(), labels.c(), shift.c(), rows, cols, v_begin, sumexp.c(), target.c());
    this->gpu->xent_partials(z.g(), labels.c(), shift.g(), rows, cols, v_begin, sumexp.g(), target.g());
    this->close("xent_partials sumexp", sumexp);
    this->close("xent_partials target", target);
    Pair<T> se(as<T>(reals(85, rows, 300, 400))), tg(as<T>(reals(86, rows, -3, 0)));
    const double lc = this->cpu->xent_finish(z.c(), labels.c(), shift.c(), se.c(), tg.c(), rows, cols, v_begin, 5.0,
                                             z.c());
    const double lg = this->gpu->xent_finish(z.g(), labels.c(), shift.g(), se.g(), tg.g(), rows, cols, v_begin, 5.0,
                                             z.g());
    this->close_value("xent_finish loss", lg, lc);
    this->close("xent_finish dlogits (aliased)", z);
  }
  {
    Pair<T> empty(std::vector<T>(4, T(3))), mx(std::vector<T>(2, T(0)));
    this->gpu->row_max(empty.g(), mx.g(), 2, 0);
    this->gpu->synchronize();
    for (T v : mx.dev.host()) EXPECT_EQ(v, -std::numeric_limits<T>::infinity()) << "row_max of no columns";
  }
}

// ---- determinism --------------------------------------------------------------------------

// The reductions have a fixed order: a rerun gives the same bits.
TYPED_TEST(CudaBackendTest, RerunIsBitwiseIdentical) {
  using T = TypeParam;
  const AttnShape a{2, 64, 4, 16};
  const std::vector<T> qkv0 = as<T>(reals(90, a.qkv_size(), -2, 2)), dout0 = as<T>(reals(91, a.out_size(), -1, 1));
  const int64_t rows = 64, cols = 700;
  const std::vector<T> z0 = as<T>(reals(92, rows * cols, -4, 4));
  const std::vector<int32_t> labels0 = ints(93, rows, 0, cols - 1);
  auto run = [&](std::vector<T>& dqkv, std::vector<T>& dz, double& loss) {
    DeviceBuf<T> qkv(qkv0), out(std::vector<T>(a.out_size())), att(std::vector<T>(a.att_size())), dout(dout0),
        dq(std::vector<T>(a.qkv_size())), z(z0);
    this->gpu->attention_forward(qkv.get(), out.get(), att.get(), a.B, a.S, a.H, a.D);
    this->gpu->attention_backward(qkv.get(), att.get(), dout.get(), dq.get(), a.B, a.S, a.H, a.D);
    loss = this->gpu->softmax_xent(z.get(), labels0.data(), rows, cols, 3.0, z.get());
    this->gpu->synchronize();
    dqkv = dq.host();
    dz = z.host();
  };
  std::vector<T> d1, d2, z1, z2;
  double l1 = 0, l2 = 0;
  run(d1, z1, l1);
  run(d2, z2, l2);
  EXPECT_EQ(std::memcmp(d1.data(), d2.data(), d1.size() * sizeof(T)), 0) << "attention_backward";
  EXPECT_EQ(std::memcmp(z1.data(), z2.data(), z1.size() * sizeof(T)), 0) << "softmax_xent dlogits";
  EXPECT_EQ(std::memcmp(&l1, &l2, sizeof l1), 0) << "softmax_xent loss";
}

// ---- gradients by central differences, float64 on the GPU ---------------------------------

class CudaGradientTest : public testing::Test {
 protected:
  static constexpr double kStep = 1e-5, kTol = 1e-6;
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << kNoGpu;
    gpu = make_cuda_backend<double>("cuda", GemmMath::full);
  }
  static double dot(const std::vector<double>& w, const std::vector<double>& y) {
    double s = 0;
    for (size_t i = 0; i < w.size(); ++i) s += w[i] * y[i];
    return s;
  }
  // Central difference of loss(v) in element i.
  template <class F>
  static double fd(std::vector<double>& v, size_t i, F loss) {
    const double v0 = v[i];
    v[i] = v0 + kStep;
    const double lp = loss();
    v[i] = v0 - kStep;
    const double lm = loss();
    v[i] = v0;
    return (lp - lm) / (2 * kStep);
  }
  std::unique_ptr<Backend<double>> gpu;
};

TEST_F(CudaGradientTest, GeluMatchesFiniteDifferences) {
  const int64_t n = 64;
  std::vector<double> x = reals(100, n, -4, 4), w = reals(101, n, -1, 1);
  auto loss = [&] {
    DeviceBuf<double> dx(x), y(zeros<double>(n));
    gpu->gelu_forward(dx.get(), y.get(), n);
    return dot(w, y.host());
  };
  DeviceBuf<double> dx(x), dw(w), g(zeros<double>(n));
  gpu->gelu_backward(dx.get(), dw.get(), g.get(), n);
  const std::vector<double> grad = g.host();
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(grad[i], fd(x, i, loss), kTol) << "x " << i;
}

TEST_F(CudaGradientTest, LayerNormMatchesFiniteDifferences) {
  const int64_t rows = 3, n = 7;
  std::vector<double> x = reals(110, rows * n, -2, 3), gamma = reals(111, n, 0.5, 1.5), beta = reals(112, n, -1, 1),
                      w = reals(113, rows * n, -1, 1);
  auto loss = [&] {
    DeviceBuf<double> dx(x), dg(gamma), db(beta), y(zeros<double>(rows * n)), m(zeros<double>(rows)),
        r(zeros<double>(rows));
    gpu->layernorm_forward(dx.get(), dg.get(), db.get(), y.get(), m.get(), r.get(), rows, n, 1e-5);
    return dot(w, y.host());
  };
  DeviceBuf<double> dxs(x), dg(gamma), db(beta), y(zeros<double>(rows * n)), m(zeros<double>(rows)),
      r(zeros<double>(rows)), dw(w), gx(zeros<double>(rows * n)), gg(zeros<double>(n)),
      gb(zeros<double>(n));
  gpu->layernorm_forward(dxs.get(), dg.get(), db.get(), y.get(), m.get(), r.get(), rows, n, 1e-5);
  gpu->layernorm_backward(dxs.get(), dg.get(), m.get(), r.get(), dw.get(), gx.get(), gg.get(), gb.get(), rows, n);
  const std::vector<double> dx = gx.host(), dgamma = gg.host(), dbeta = gb.host();
  for (int64_t i = 0; i < rows * n; ++i) EXPECT_NEAR(dx[i], fd(x, i, loss), kTol) << "dx " << i;
  for (int64_t j = 0; j < n; ++j) {
    EXPECT_NEAR(dgamma[j], fd(gamma, j, loss), kTol) << "dgamma " << j;
    EXPECT_NEAR(dbeta[j], fd(beta, j, loss), kTol) << "dbeta " << j;
  }
}

TEST_F(CudaGradientTest, AttentionMatchesFiniteDifferences) {
  for (const AttnShape& a : {AttnShape{2, 5, 2, 3}, AttnShape{1, 4, 3, 2}}) {
    SCOPED_TRACE(testing::Message() << "B " << a.B << " S " << a.S << " H " << a.H << " D " << a.D);
    std::vector<double> qkv = reals(120 + a.H, a.qkv_size(), -2, 2), w = reals(121, a.out_size(), -1, 1);
    auto loss = [&] {
      DeviceBuf<double> q(qkv), out(std::vector<double>(a.out_size())), att(std::vector<double>(a.att_size()));
      gpu->attention_forward(q.get(), out.get(), att.get(), a.B, a.S, a.H, a.D);
      return dot(w, out.host());
    };
    DeviceBuf<double> q(qkv), out(std::vector<double>(a.out_size())), att(std::vector<double>(a.att_size())), dw(w),
        dq(std::vector<double>(a.qkv_size(), -5.0));
    gpu->attention_forward(q.get(), out.get(), att.get(), a.B, a.S, a.H, a.D);
    gpu->attention_backward(q.get(), att.get(), dw.get(), dq.get(), a.B, a.S, a.H, a.D);
    const std::vector<double> grad = dq.host();
    for (int64_t i = 0; i < a.qkv_size(); ++i) EXPECT_NEAR(grad[i], fd(qkv, i, loss), kTol) << "element " << i;
  }
}

// softmax_xent, and the vocabulary-parallel path (one shard holding every column) as well.
TEST_F(CudaGradientTest, CrossEntropyMatchesFiniteDifferences) {
  const int64_t rows = 4, cols = 9;
  std::vector<double> z = reals(130, rows * cols, -3, 3);
  const std::vector<int32_t> labels = ints(131, rows, 0, cols - 1);
  auto loss = [&] {
    DeviceBuf<double> dz(z), g(zeros<double>(rows * cols));
    return gpu->softmax_xent(dz.get(), labels.data(), rows, cols, 3.0, g.get());
  };
  // Vocabulary-parallel over one shard: shift = row max, partials, finish.
  auto vp_loss = [&](std::vector<double>* grad) {
    DeviceBuf<double> dz(z), mx(zeros<double>(rows)), se(zeros<double>(rows)),
        tg(zeros<double>(rows)), g(zeros<double>(rows * cols));
    gpu->row_max(dz.get(), mx.get(), rows, cols);
    gpu->xent_partials(dz.get(), labels.data(), mx.get(), rows, cols, 0, se.get(), tg.get());
    const double l = gpu->xent_finish(dz.get(), labels.data(), mx.get(), se.get(), tg.get(), rows, cols, 0, 3.0, g.get());
    if (grad) *grad = g.host();
    return l;
  };
  DeviceBuf<double> dz(z), g(zeros<double>(rows * cols));
  const double l = gpu->softmax_xent(dz.get(), labels.data(), rows, cols, 3.0, g.get());
  const std::vector<double> grad = g.host();
  std::vector<double> vp_grad;
  EXPECT_NEAR(vp_loss(&vp_grad), l, 1e-12 * std::abs(l));
  for (int64_t i = 0; i < rows * cols; ++i) {
    const double ref = fd(z, i, loss);
    EXPECT_NEAR(grad[i], ref, kTol) << "softmax_xent element " << i;
    EXPECT_NEAR(vp_grad[i], ref, kTol) << "vocab-parallel element " << i;
  }
}

// ---- TF32 -------------------------------------------------------------------------------

// "cuda" keeps float32 gemms in full float32; "cuda-tf32" lets them use TF32 (10 mantissa
// bits: relative error ~2^-11 per product, ~1e-3 over k = 512 terms of random sign).
// Against a float64 gemm of the same float inputs, normalised by sum_k |a||b|.
TEST(CudaBackendTf32, Tf32OnlyWhereAsked) {
  if (cuda_device_count() == 0) GTEST_SKIP() << kNoGpu;
  const int64_t m = 256, n = 256, k = 512;
  const std::vector<float> a = as<float>(reals(140, m * k, -1, 1)), b = as<float>(reals(141, k * n, -1, 1));
  std::vector<double> ref(m * n, 0.0), mag(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) {
        ref[i * n + j] += double(a[i * k + p]) * double(b[p * n + j]);
        mag[i * n + j] += std::abs(double(a[i * k + p]) * double(b[p * n + j]));
      }
  auto err = [&](GemmMath math) {
    auto be = make_cuda_backend<float>("cuda", math);
    DeviceBuf<float> da(a), db(b), dc(std::vector<float>(m * n));
    be->gemm(Trans::no, Trans::no, m, n, k, 1.0f, da.get(), k, db.get(), n, 0.0f, dc.get(), n);
    be->synchronize();
    const std::vector<float> c = dc.host();
    double e = 0;
    for (int64_t i = 0; i < m * n; ++i) e = std::max(e, std::abs(c[i] - ref[i]) / mag[i]);
    return e;
  };
  const double full = err(GemmMath::full), tf32 = err(GemmMath::tf32), bf16 = err(GemmMath::bf16);
  std::printf("[  error   ] float32  gemm 256x256x512 vs float64: cuda %.3e, cuda-tf32 %.3e, cuda-bf16 %.3e\n", full,
              tf32, bf16);
  EXPECT_LT(full, 1e-5) << "float32 gemm without TF32";
  EXPECT_GT(tf32, 1e-5) << "cuda-tf32 did not use TF32";
  EXPECT_LT(tf32, 5e-3);
  // bfloat16 keeps 7 mantissa bits to TF32's 10: about 8x the error, still well below 1 %.
  EXPECT_GT(bf16, 2 * tf32) << "cuda-bf16 did not compute in bfloat16";
  EXPECT_LT(bf16, 3e-2);
  // float64 is unaffected by the TF32 setting.
  auto d = make_cuda_backend<double>("cuda-tf32", GemmMath::tf32);
  const std::vector<double> a64(a.begin(), a.end()), b64(b.begin(), b.end());
  DeviceBuf<double> da(a64), db(b64), dc(zeros<double>(m * n));
  d->gemm(Trans::no, Trans::no, m, n, k, 1.0, da.get(), k, db.get(), n, 0.0, dc.get(), n);
  d->synchronize();
  const std::vector<double> c = dc.host();
  double e = 0;
  for (int64_t i = 0; i < m * n; ++i) e = std::max(e, std::abs(c[i] - ref[i]) / mag[i]);
  EXPECT_LT(e, 1e-13) << "float64 gemm on cuda-tf32";
  auto d16 = make_cuda_backend<double>("cuda-bf16", GemmMath::bf16);
  DeviceBuf<double> dc16(zeros<double>(m * n));
  d16->gemm(Trans::no, Trans::no, m, n, k, 1.0, da.get(), k, db.get(), n, 0.0, dc16.get(), n);
  d16->synchronize();
  const std::vector<double> c16 = dc16.host();
  for (int64_t i = 0; i < m * n; ++i) ASSERT_EQ(c16[i], c[i]) << "float64 gemm on cuda-bf16 differs from cuda-tf32's";
}

// ---- allocator and registry ---------------------------------------------------------------

TEST(CudaAllocatorTest, ZeroFillsCountsAndCrossChecks) {
  if (cuda_device_count() == 0) GTEST_SKIP() << kNoGpu;
  auto be = make_cuda_backend<double>("cuda", GemmMath::full);
  CudaAllocator& al = cuda_allocator();
  const size_t bytes = size_t{256} << 20;  // 256 MiB: visible in cudaMemGetInfo
  // The pool keeps what earlier tests freed: hand it back so that this allocation must grow
  // the driver's count (on the H200 it reused 32 of its 256 MiB otherwise).
  al.trim();
  const int64_t live0 = al.live_bytes(), used0 = al.device_used_bytes();
  void* p = al.allocate(bytes);
  EXPECT_EQ(al.live_bytes(), live0 + static_cast<int64_t>(bytes));
  EXPECT_GE(al.peak_bytes(), al.live_bytes());
  EXPECT_GE(al.device_used_bytes() - used0, static_cast<int64_t>(bytes)) << "cudaMemGetInfo cross-check";
  // Dirty it, free it, allocate again (the driver hands the same range back): zeros again.
  be->fill(static_cast<double*>(p), 3.5, static_cast<int64_t>(bytes / sizeof(double)));
  be->synchronize();
  al.release(p, bytes);
  EXPECT_EQ(al.live_bytes(), live0);
  void* q = al.allocate(bytes);
  std::vector<unsigned char> host(bytes, 0xAB);
  PTS_CUDA_CHECK(cudaMemcpy(host.data(), q, bytes, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](unsigned char c) { return c == 0; })) << "not zero-filled";
  al.release(q, bytes);
  EXPECT_EQ(&be->allocator(), static_cast<Allocator*>(&al));
}

TEST(CudaAllocatorTest, OutOfMemoryNamesTheBytesAndRecovers) {
  if (cuda_device_count() == 0) GTEST_SKIP() << kNoGpu;
  select_cuda_device();
  const size_t huge = size_t{1} << 50;  // 1 PiB
  try {
    cuda_allocator().allocate(huge);
    FAIL() << "allocating 1 PiB did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("allocating 1125899906842624 bytes"), std::string::npos) << e.what();
  }
  void* p = cuda_allocator().allocate(64);  // the failure left no sticky error behind
  cuda_allocator().release(p, 64);
}

TEST(CudaRegistry, RegistersCudaCudaTf32AndCudaBf16) {
  register_cuda_backends();
  for (const char* name : {"cuda", "cuda-tf32", "cuda-bf16"}) {
    const BackendInfo* b = find_backend(name);
    ASSERT_NE(b, nullptr) << name;
    EXPECT_TRUE(b->device_memory) << name;
    EXPECT_EQ(b->reduced_precision, std::string(name) != "cuda") << name;
    ASSERT_NE(b->unavailable, nullptr) << name;
    EXPECT_EQ(b->unavailable().empty(), cuda_device_count() > 0) << name;
  }
  if (cuda_device_count() == 0) {
    EXPECT_FALSE(cuda_backends_available());
    EXPECT_THROW(make_backend<float>("cuda"), Error);  // a clear error, not a crash
    GTEST_SKIP() << kNoGpu;
  }
  EXPECT_TRUE(cuda_backends_available());
  EXPECT_EQ(make_backend<float>("cuda-tf32")->name(), "cuda-tf32");
  EXPECT_EQ(make_backend<float>("cuda-bf16")->name(), "cuda-bf16");
  EXPECT_EQ(make_backend<double>("cuda")->name(), "cuda");
}

}  // namespace
}  // namespace pts
