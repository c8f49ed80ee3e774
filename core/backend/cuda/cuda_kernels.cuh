// The CUDA backend's kernels (gemms are cuBLAS, in cuda_backend.cu). Included by that one
// translation unit only.
// Dimension legend: R = rows (tokens), N = features; B = sequences, S = sequence length,
// H = heads, D = head dim.
//
// Determinism: no atomics. A row reduction is one thread block per row: thread t sums
// elements t, t + 256, ... in order, then a fixed shared-memory tree combines the 256
// partials, so a rerun gives the same bits. Column reductions (bias_grad, layernorm's
// dgamma/dbeta) sum chunks of rows, then the chunks, each in a fixed order (below).
// Reductions accumulate in double for both T (the CPU does so for layernorm and the
// cross-entropies; elsewhere it is the more accurate choice and costs little beside the
// gemms).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace pts::cuda_kernels {

constexpr int kThreads = 256;  // every kernel's block size; block_reduce assumes it

// Blocks for a grid-stride loop over n elements.
inline unsigned grid_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

#define PTS_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

struct SumOp {
  __device__ double operator()(double a, double b) const { return a + b; }
};
// The CPU's max_of: b > a ? b : a (a NaN in the running value sticks, one in b is skipped).
struct MaxOp {
  __device__ double operator()(double a, double b) const { return b > a ? b : a; }
};

// Combines one value per thread of a kThreads block in a fixed tree; every thread gets the
// result. `sh` is kThreads doubles of shared memory (a float's max is exact in double).
template <class Op>
__device__ double block_reduce(double v, Op op, double* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] = op(sh[threadIdx.x], sh[threadIdx.x + s]);
    __syncthreads();
  }
  const double r = sh[0];
  __syncthreads();  // sh may be reused by the next reduction
  return r;
}

__device__ inline float tanh_of(float u) { return tanhf(u); }
__device__ inline double tanh_of(double u) { return tanh(u); }
__device__ inline float exp_of(float x) { return expf(x); }
__device__ inline double exp_of(double x) { return exp(x); }

template <class T>
constexpr T kGeluC = static_cast<T>(0.7978845608028654);  // sqrt(2/pi)
template <class T>
constexpr T kGeluA = static_cast<T>(0.044715);

// ---- elementwise ------------------------------------------------------------------------

template <class T>
__global__ void add_bias_k(T* y, const T* bias, int64_t rows, int64_t cols) {
  PTS_GRID_STRIDE(i, rows * cols) y[i] += bias[i % cols];
}

template <class T>
__global__ void gelu_forward_k(const T* x, T* y, int64_t n) {
  PTS_GRID_STRIDE(i, n) {
    const T v = x[i];
    const T t = tanh_of(kGeluC<T> * (v + kGeluA<T> * v * v * v));
    y[i] = T(0.5) * v * (T(1) + t);
  }
}

template <class T>
__global__ void gelu_backward_k(const T* x, const T* dy, T* dx, int64_t n) {
  PTS_GRID_STRIDE(i, n) {
    const T v = x[i];
    const T t = tanh_of(kGeluC<T> * (v + kGeluA<T> * v * v * v));
    const T du = kGeluC<T> * (T(1) + T(3) * kGeluA<T> * v * v);
    dx[i] = dy[i] * (T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * du);
  }
}

template <class T>
__global__ void add_k(T* y, const T* x, int64_t n) {
  PTS_GRID_STRIDE(i, n) y[i] += x[i];
}
template <class T>
__global__ void axpy_k(T* y, T a, const T* x, int64_t n) {
  PTS_GRID_STRIDE(i, n) y[i] += a * x[i];
}
template <class T>
__global__ void scale_k(T* x, T a, int64_t n) {
  PTS_GRID_STRIDE(i, n) x[i] *= a;
}
template <class T>
__global__ void fill_k(T* x, T value, int64_t n) {
  PTS_GRID_STRIDE(i, n) x[i] = value;
}

// core/bf16.hpp on the device: the value rounded to float, then to bfloat16 nearest-even;
// a NaN stays a quiet NaN.
__device__ inline uint16_t bf16_bits_dev(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
template <class T>
__global__ void to_bf16_k(const T* x, uint16_t* q, int64_t n) {
  PTS_GRID_STRIDE(i, n) q[i] = bf16_bits_dev(static_cast<float>(x[i]));
}
template <class T>
__global__ void add_bf16_k(T* y, const uint16_t* q, int64_t n) {
  PTS_GRID_STRIDE(i, n) y[i] += static_cast<T>(__uint_as_float(static_cast<uint32_t>(q[i]) << 16));
}

// std::max(m, x) = m < x ? x : m, parts in order p = 0, 1, ...
template <class T>
__global__ void max_over_parts_k(const T* parts, int64_t nparts, int64_t n, T* out) {
  PTS_GRID_STRIDE(i, n) {
    T m = parts[i];
    for (int64_t p = 1; p < nparts; ++p) {
      const T x = parts[p * n + i];
      m = m < x ? x : m;
    }
    out[i] = m;
  }
}

template <class T>
__global__ void sgd_momentum_k(T* p, const T* g, T* m, int64_t n, T lr, T mu, T wd) {
  PTS_GRID_STRIDE(i, n) {
    const T gi = g[i] + wd * p[i];
    m[i] = mu * m[i] + gi;
    p[i] -= lr * m[i];
  }
}

template <class T>
__global__ void adamw_k(T* p, const T* g, T* m, T* v, int64_t n, T b1, T b2, T c1, T c2, T lr, T eps, T wd) {
  PTS_GRID_STRIDE(i, n) {
    m[i] = b1 * m[i] + (T(1) - b1) * g[i];
    v[i] = b2 * v[i] + (T(1) - b2) * g[i] * g[i];
    p[i] -= lr * (m[i] * c1 / (sqrt(v[i] * c2) + eps) + wd * p[i]);
  }
}

// ---- column reductions: two passes, fixed order ------------------------------------------
// One thread per column over all R rows would leave most of the GPU idle (768 columns are
// 3 blocks) and walk 8192 rows serially; instead each thread sums one chunk of kColChunk
// rows of one column in row order, then one thread per column adds the chunks' sums in
// chunk order onto the accumulator. The order depends on R only, never on the launch.

constexpr int64_t kColChunk = 64;
__host__ __device__ inline int64_t col_chunks(int64_t rows) { return (rows + kColChunk - 1) / kColChunk; }
__device__ inline int64_t chunk_end(int64_t c, int64_t rows) { return (c + 1) * kColChunk < rows ? (c + 1) * kColChunk : rows; }

// part[c * cols + j] = sum of dy[r, j] over the rows r of chunk c, in order.
template <class T>
__global__ void col_partials_k(const T* dy, int64_t rows, int64_t cols, T* part) {
  PTS_GRID_STRIDE(i, col_chunks(rows) * cols) {
    const int64_t c = i / cols, j = i % cols, r1 = chunk_end(c, rows);
    T acc = T(0);
    for (int64_t r = c * kColChunk; r < r1; ++r) acc += dy[r * cols + j];
    part[i] = acc;
  }
}

// The same for layernorm's parameter gradients: dy * xhat into pg, dy into pb.
template <class T>
__global__ void layernorm_param_partials_k(const T* x, const T* mean, const T* rstd, const T* dy, int64_t rows,
                                           int64_t n, T* pg, T* pb) {
  PTS_GRID_STRIDE(i, col_chunks(rows) * n) {
    const int64_t c = i / n, j = i % n, r1 = chunk_end(c, rows);
    T g = T(0), b = T(0);
    for (int64_t r = c * kColChunk; r < r1; ++r) {
      const T xhat = (x[r * n + j] - mean[r]) * rstd[r];
      const T d = dy[r * n + j];
      g += d * xhat;
      b += d;
    }
    pg[i] = g;
    pb[i] = b;
  }
}

// out[j] += the chunks' sums, in chunk order.
template <class T>
__global__ void col_finish_k(const T* part, int64_t chunks, int64_t cols, T* out) {
  PTS_GRID_STRIDE(j, cols) {
    T acc = out[j];
    for (int64_t c = 0; c < chunks; ++c) acc += part[c * cols + j];
    out[j] = acc;
  }
}

// ---- row reductions: one block per row ---------------------------------------------------

template <class T>
__global__ void layernorm_forward_k(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* rstd, int64_t n,
                                    double eps) {
  __shared__ double sh[kThreads];
  const int64_t r = blockIdx.x;
  const T* xr = x + r * n;
  T* yr = y + r * n;
  double s = 0;
  for (int64_t j = threadIdx.x; j < n; j += kThreads) s += xr[j];
  const double mu = block_reduce(s, SumOp{}, sh) / static_cast<double>(n);
  double sq = 0;
  for (int64_t j = threadIdx.x; j < n; j += kThreads) {
    const double c = xr[j] - mu;
    sq += c * c;
  }
  const double rs = 1.0 / sqrt(block_reduce(sq, SumOp{}, sh) / static_cast<double>(n) + eps);
  const T m = static_cast<T>(mu), sd = static_cast<T>(rs);
  if (threadIdx.x == 0) {
    mean[r] = m;
    rstd[r] = sd;
  }
  for (int64_t j = threadIdx.x; j < n; j += kThreads) yr[j] = (xr[j] - m) * sd * gamma[j] + beta[j];
}

// dx += rstd * (g - mean_j(g) - xhat * mean_j(g * xhat)), g = dy * gamma.
template <class T>
__global__ void layernorm_backward_dx_k(const T* x, const T* gamma, const T* mean, const T* rstd, const T* dy, T* dx,
                                        int64_t n) {
  __shared__ double sh[kThreads];
  const int64_t r = blockIdx.x;
  const T* xr = x + r * n;
  const T* dyr = dy + r * n;
  T* dxr = dx + r * n;
  const T m = mean[r], s = rstd[r];
  double sg = 0, sgx = 0;
  for (int64_t j = threadIdx.x; j < n; j += kThreads) {
    const T xhat = (xr[j] - m) * s;
    const T g = dyr[j] * gamma[j];
    sg += g;
    sgx += g * xhat;
  }
  const T mean_g = static_cast<T>(block_reduce(sg, SumOp{}, sh) / static_cast<double>(n));
  const T mean_gx = static_cast<T>(block_reduce(sgx, SumOp{}, sh) / static_cast<double>(n));
  for (int64_t j = threadIdx.x; j < n; j += kThreads) {
    const T xhat = (xr[j] - m) * s;
    dxr[j] += s * (dyr[j] * gamma[j] - mean_g - xhat * mean_gx);
  }
}

// The last key row i of a masked softmax sees (Backend::causal_softmax): first + i % period
// clamped to cols - 1; every key when period = 0.
__device__ inline int64_t last_key(int64_t i, int64_t cols, int64_t period, int64_t first) {
  const int64_t lim = period > 0 ? first + i % period : cols - 1;
  return lim < cols - 1 ? lim : cols - 1;
}

// Row `blockIdx.x` of the scores x[rows, cols] in place: softmax over keys 0..lim with the
// row max subtracted, exact zeros above.
template <class T>
__global__ void causal_softmax_k(T* x, int64_t cols, int64_t period, int64_t first) {
  __shared__ double sh[kThreads];
  const int64_t row = blockIdx.x, lim = last_key(row, cols, period, first);
  T* p = x + row * cols;
  double mx = -INFINITY;
  for (int64_t j = threadIdx.x; j <= lim; j += kThreads) mx = MaxOp{}(mx, static_cast<double>(p[j]));
  const T m = static_cast<T>(block_reduce(mx, MaxOp{}, sh));
  double s = 0;
  for (int64_t j = threadIdx.x; j <= lim; j += kThreads) {
    const T e = exp_of(p[j] - m);
    p[j] = e;
    s += e;
  }
  const T inv = T(1) / static_cast<T>(block_reduce(s, SumOp{}, sh));
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) p[j] = j <= lim ? p[j] * inv : T(0);
}

// dS row `blockIdx.x` in place over dP: dS[j] = P[j] * (dP[j] - t) for j <= lim, 0 above,
// t = dot[row] when given, else sum_{k<=lim} dP[k] P[k]. dot is the same for every block,
// so either every thread reaches the reduction's barriers or none does.
template <class T>
__global__ void causal_softmax_backward_k(const T* p, int64_t ld_p, T* ds, int64_t ld_ds, const T* dot, int64_t cols,
                                          int64_t period, int64_t first) {
  __shared__ double sh[kThreads];
  const int64_t row = blockIdx.x, lim = last_key(row, cols, period, first);
  const T* pr = p + row * ld_p;
  T* d = ds + row * ld_ds;
  T t;
  if (dot) {
    t = dot[row];
  } else {
    double s = 0;
    for (int64_t j = threadIdx.x; j <= lim; j += kThreads) s += static_cast<double>(d[j]) * pr[j];
    t = static_cast<T>(block_reduce(s, SumOp{}, sh));
  }
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) d[j] = j <= lim ? pr[j] * (d[j] - t) : T(0);
}

template <class T>
__global__ void row_dot_k(const T* a, int64_t lda, const T* b, int64_t ldb, int64_t cols, T* out) {
  __shared__ double sh[kThreads];
  const int64_t r = blockIdx.x;
  double s = 0;
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) s += static_cast<double>(a[r * lda + j]) * b[r * ldb + j];
  s = block_reduce(s, SumOp{}, sh);
  if (threadIdx.x == 0) out[r] = static_cast<T>(s);
}

template <class T>
__global__ void row_max_k(const T* x, T* mx, int64_t cols) {
  __shared__ double sh[kThreads];
  const int64_t r = blockIdx.x;
  double m = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) m = MaxOp{}(m, static_cast<double>(x[r * cols + j]));
  m = block_reduce(m, MaxOp{}, sh);
  if (threadIdx.x == 0) mx[r] = static_cast<T>(m);
}

// Per row: loss[r] = log sum_j exp(z_j - max) - (z_y - max), dz = (softmax - onehot) / norm,
// exp and log in double as on the CPU. dz may alias z: z_y is read before any thread writes,
// and every z_j is read by the thread that then overwrites it, after the last barrier.
template <class T>
__global__ void softmax_xent_k(const T* logits, const int32_t* labels, int64_t cols, double norm, T* dlogits,
                               double* loss) {
  __shared__ double sh[kThreads];
  const int64_t r = blockIdx.x;
  const T* z = logits + r * cols;
  T* dz = dlogits + r * cols;
  const int32_t y = labels[r];
  const T zy = z[y];
  double mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) mx = MaxOp{}(mx, static_cast<double>(z[j]));
  const T zmax = static_cast<T>(block_reduce(mx, MaxOp{}, sh));
  double s = 0;
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) s += exp(static_cast<double>(z[j] - zmax));
  const double log_sum = log(block_reduce(s, SumOp{}, sh));
  if (threadIdx.x == 0) loss[r] = log_sum - static_cast<double>(zy - zmax);
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
    const double p = exp(static_cast<double>(z[j] - zmax) - log_sum);
    dz[j] = static_cast<T>((p - (j == y ? 1.0 : 0.0)) / norm);
  }
}

template <class T>
__global__ void xent_partials_k(const T* logits, const int32_t* labels, const T* shift, int64_t cols, int64_t v_begin,
                                T* sumexp, T* target) {
  __shared__ double sh[kThreads];
  const int64_t r = blockIdx.x;
  const T* z = logits + r * cols;
  const double shf = shift[r];
  double s = 0;
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) s += exp(static_cast<double>(z[j]) - shf);
  s = block_reduce(s, SumOp{}, sh);
  if (threadIdx.x == 0) {
    sumexp[r] = static_cast<T>(s);
    const int64_t y = labels[r] - v_begin;
    target[r] = y >= 0 && y < cols ? static_cast<T>(static_cast<double>(z[y]) - shf) : T(0);
  }
}

template <class T>
__global__ void xent_finish_k(const T* logits, const int32_t* labels, const T* shift, const T* sumexp, const T* target,
                              int64_t cols, int64_t v_begin, double norm, T* dlogits, double* loss) {
  const int64_t r = blockIdx.x;
  const T* z = logits + r * cols;
  T* dz = dlogits + r * cols;
  const double sh = shift[r], inv_sum = 1.0 / static_cast<double>(sumexp[r]);
  if (threadIdx.x == 0) loss[r] = log(static_cast<double>(sumexp[r])) - static_cast<double>(target[r]);
  const int64_t y = labels[r] - v_begin;
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
    const double p = exp(static_cast<double>(z[j]) - sh) * inv_sum;
    dz[j] = static_cast<T>((p - (j == y ? 1.0 : 0.0)) / norm);
  }
}

// One block: out = sum of x[0..n) in the fixed block order.
__global__ inline void sum_doubles_k(const double* x, int64_t n, double* out) {
  __shared__ double sh[kThreads];
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) s += x[i];
  s = block_reduce(s, SumOp{}, sh);
  if (threadIdx.x == 0) *out = s;
}

// ---- embedding -----------------------------------------------------------------------------

template <class T>
__global__ void embedding_forward_k(const int32_t* ids, int64_t rows, const T* table, int64_t v_begin,
                                    int64_t v_count, int64_t n, T* out, bool accumulate) {
  PTS_GRID_STRIDE(i, rows * n) {
    const int64_t r = i / n, j = i % n;
    const int64_t local = ids[r] - v_begin;
    const bool here = local >= 0 && local < v_count;
    if (here && accumulate) out[i] += table[local * n + j];
    else if (here) out[i] = table[local * n + j];
    else if (!accumulate) out[i] = T(0);
  }
}

// The backward without atomics: rows with the same id form a chain in row order. For each
// row, next[r] = the next row with the same (in-range) id, or -1, and head[r] = 1 when no
// earlier row has it. O(R^2) id comparisons over R threads (4M for R = 2048, noise).
__global__ inline void embedding_chains_k(const int32_t* ids, int64_t rows, int64_t v_begin, int64_t v_count,
                                          int64_t* next, int32_t* head) {
  PTS_GRID_STRIDE(r, rows) {
    const int32_t id = ids[r];
    const int64_t local = id - v_begin;
    if (local < 0 || local >= v_count) {
      next[r] = -1;
      head[r] = 0;
      continue;
    }
    int64_t nx = -1;
    for (int64_t s = r + 1; s < rows; ++s)
      if (ids[s] == id) {
        nx = s;
        break;
      }
    int32_t first = 1;
    for (int64_t s = 0; s < r; ++s)
      if (ids[s] == id) {
        first = 0;
        break;
      }
    next[r] = nx;
    head[r] = first;
  }
}

// One thread per (head row, column): dtable[id, j] += dout[r, j] along the chain, rows in
// ascending order, the CPU's order of additions (so the result is bitwise the CPU's).
template <class T>
__global__ void embedding_backward_k(const int32_t* ids, int64_t rows, const T* dout, int64_t v_begin, int64_t n,
                                     const int64_t* next, const int32_t* head, T* dtable) {
  PTS_GRID_STRIDE(i, rows * n) {
    const int64_t r = i / n, j = i % n;
    if (!head[r]) continue;
    T* t = dtable + (ids[r] - v_begin) * n + j;
    T acc = *t;
    for (int64_t s = r; s >= 0; s = next[s]) acc += dout[s * n + j];
    *t = acc;
  }
}

}  // namespace pts::cuda_kernels
