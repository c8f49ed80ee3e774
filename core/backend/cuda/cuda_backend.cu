// The CUDA backend: every op queued on the rank's compute stream; gemm through cuBLAS
// (row-major contract mapped onto column-major by swapping the operands), attention's
// per-(sequence, head) products as strided batched gemms, kernels (cuda_kernels.cuh) for
// the rest. Ops return before the GPU finishes; synchronize() waits.
// Dimension legend: R = rows (tokens), N = features; B = sequences, S = sequence length,
// H = heads, D = head dim.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/backend/cuda/cuda_backend.hpp"
#include "core/backend/cuda/cuda_kernels.cuh"
#include "core/cuda/device.hpp"
#include "core/error.hpp"

namespace pts {
namespace {

namespace k = cuda_kernels;

void cublas_check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuBLAS: ") + what + ": " + cublasGetStatusString(status));
}
#define PTS_CUBLAS_CHECK(call) cublas_check((call), #call)
// A kernel launch reports a bad configuration through cudaGetLastError.
#define PTS_LAUNCH_CHECK(name) ::pts::cuda_check(cudaGetLastError(), name)

cublasOperation_t op_of(Trans t) { return t == Trans::yes ? CUBLAS_OP_T : CUBLAS_OP_N; }

int dim32(int64_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<int>::max())
    throw Error(std::string("CUDA backend: ") + what + " = " + std::to_string(v) + " does not fit cuBLAS's int");
  return static_cast<int>(v);
}

// Device memory the backend keeps for itself (per-row losses, column partial sums, embedding
// chains, attention's dS, the host's int32 ids and labels, bfloat16 gemm operands): grown on
// demand, never shrunk, outside the MemoryTracker (it is not a tensor).
class Workspace {
 public:
  explicit Workspace(const char* what) : what_(what) {}
  ~Workspace() {
    if (p_) cudaFree(p_);
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  // At least `bytes`; growing waits for `stream` first (earlier ops may still use the old block).
  void* get(size_t bytes, cudaStream_t stream) {
    if (bytes <= bytes_) return p_;
    PTS_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (p_) PTS_CUDA_CHECK(cudaFree(p_));
    p_ = nullptr;
    bytes_ = 0;
    const cudaError_t st = cudaMalloc(&p_, bytes);
    if (st == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      throw Error("CUDA: out of device memory allocating " + std::to_string(bytes) + " bytes of backend " + what_ +
                  "; use a smaller workload");
    }
    cuda_check(st, "cudaMalloc (backend workspace)");
    bytes_ = bytes;
    return p_;
  }
  template <class U>
  U* as(int64_t count, cudaStream_t stream) {
    return static_cast<U*>(get(static_cast<size_t>(count) * sizeof(U), stream));
  }

 private:
  const char* what_;
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// Row-major C[m,n] = alpha op(A) op(B) + beta C, `count` times with element strides sa, sb,
// sc. Row-major X with leading dimension ld is column-major X^T, so C^T = op(B)^T op(A)^T:
// cuBLAS gets (op_b, op_a, n, m, k, B, A).
// The cuBLAS handle, its stream, and where float32 gemms put their bfloat16 operands when
// they run in bfloat16 (GemmMath::bf16; null otherwise. TF32 is the handle's math mode).
struct Blas {
  cublasHandle_t h = nullptr;
  cudaStream_t stream = nullptr;
  Workspace* bf16 = nullptr;
};

// Elements a row-major operand spans in memory: `count` matrices of rows x cols with leading
// dimension ld, `stride` apart (0 for one).
int64_t operand_extent(int64_t rows, int64_t cols, int64_t ld, int64_t stride, int64_t count) {
  return (count - 1) * stride + (rows - 1) * ld + cols;
}
constexpr int64_t round8(int64_t n) { return (n + 7) / 8 * 8; }  // 16-byte aligned bfloat16 blocks

template <class T>
void gemm_strided(const Blas& blas, Trans ta, Trans tb, int64_t m, int64_t n, int64_t kk, T alpha, const T* a,
                  int64_t lda, int64_t sa, const T* b, int64_t ldb, int64_t sb, T beta, T* c, int64_t ldc, int64_t sc,
                  int64_t count) {
  if (m == 0 || n == 0 || count == 0) return;
  const int M = dim32(m, "m"), N = dim32(n, "n"), K = dim32(kk, "k"), cnt = dim32(count, "batch");
  const int LDA = dim32(lda, "lda"), LDB = dim32(ldb, "ldb"), LDC = dim32(ldc, "ldc");
  cublasHandle_t h = blas.h;
  if constexpr (std::is_same_v<T, float>) {
    if (blas.bf16) {
      // Mixed precision as autocast does it: both operands rounded to bfloat16 (nearest even,
      // the to_bf16 op) into the workspace, then a bfloat16 gemm accumulating and writing
      // float32. (CUBLAS_COMPUTE_32F_FAST_16BF on float32 operands only allows bfloat16: on
      // an H200 it computed at TF32's precision.)
      const int64_t ea = operand_extent(ta == Trans::no ? m : kk, ta == Trans::no ? kk : m, lda, sa, count);
      const int64_t eb = operand_extent(tb == Trans::no ? kk : n, tb == Trans::no ? n : kk, ldb, sb, count);
      uint16_t* qa = blas.bf16->as<uint16_t>(std::max<int64_t>(round8(ea) + eb, 8), blas.stream);
      uint16_t* qb = qa + round8(ea);
      if (kk > 0) {  // k = 0 reads no operand
        k::to_bf16_k<<<k::grid_for(ea), k::kThreads, 0, blas.stream>>>(a, qa, ea);
        PTS_LAUNCH_CHECK("gemm bf16 operand A");
        k::to_bf16_k<<<k::grid_for(eb), k::kThreads, 0, blas.stream>>>(b, qb, eb);
        PTS_LAUNCH_CHECK("gemm bf16 operand B");
      }
      PTS_CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, op_of(tb), op_of(ta), N, M, K, &alpha, qb, CUDA_R_16BF, LDB, sb,
                                                  qa, CUDA_R_16BF, LDA, sa, &beta, c, CUDA_R_32F, LDC, sc, cnt,
                                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    } else if (count == 1)
      PTS_CUBLAS_CHECK(cublasSgemm(h, op_of(tb), op_of(ta), N, M, K, &alpha, b, LDB, a, LDA, &beta, c, LDC));
    else
      PTS_CUBLAS_CHECK(cublasSgemmStridedBatched(h, op_of(tb), op_of(ta), N, M, K, &alpha, b, LDB, sb, a, LDA, sa,
                                                 &beta, c, LDC, sc, cnt));
  } else {
    if (count == 1)
      PTS_CUBLAS_CHECK(cublasDgemm(h, op_of(tb), op_of(ta), N, M, K, &alpha, b, LDB, a, LDA, &beta, c, LDC));
    else
      PTS_CUBLAS_CHECK(cublasDgemmStridedBatched(h, op_of(tb), op_of(ta), N, M, K, &alpha, b, LDB, sb, a, LDA, sa,
                                                 &beta, c, LDC, sc, cnt));
  }
}

// Attention's (sequence, head) pairs as `outer` launches of `inner` strided batches: the
// batch runs over whichever of B and H is larger. Offsets in elements.
struct AttnBatching {
  int64_t outer, inner;
  int64_t qkv_outer, qkv_inner;  // into qkv / dqkv [B,S,3HD]
  int64_t out_outer, out_inner;  // into out / dout [B,S,HD]
  int64_t att_outer, att_inner;  // into att [B,H,S,S]
};
AttnBatching attn_batching(int64_t B, int64_t S, int64_t H, int64_t D) {
  const int64_t HD = H * D, SS = S * S;
  if (B >= H) return {H, B, D, S * 3 * HD, D, S * HD, SS, H * SS};
  return {B, H, S * 3 * HD, D, S * HD, D, H * SS, SS};
}

template <class T>
class CudaBackend final : public Backend<T> {
 public:
  CudaBackend(std::string name, GemmMath math) : name_(std::move(name)) {
    select_cuda_device();
    // The rank's compute stream, shared by every backend instance: a collective (NcclComm,
    // StagingComm) orders itself after the work queued on it.
    stream_ = compute_stream();
    PTS_CUBLAS_CHECK(cublasCreate(&blas_.h));
    PTS_CUBLAS_CHECK(cublasSetStream(blas_.h, stream_));
    blas_.stream = stream_;
    // TF32 and bf16 only where asked and only for float; float64 gemms never use them.
    const bool single = std::is_same_v<T, float>;
    PTS_CUBLAS_CHECK(cublasSetMathMode(blas_.h, single && math == GemmMath::tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                                  : CUBLAS_DEFAULT_MATH));
    if (single && math == GemmMath::bf16) blas_.bf16 = &bf16_operands_;
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
    cublasDestroy(blas_.h);
  }
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return name_; }
  Allocator& allocator() override { return cuda_allocator(); }
  void synchronize() override { PTS_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  void gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t kk, T alpha, const T* a, int64_t lda, const T* b,
            int64_t ldb, T beta, T* c, int64_t ldc) override {
    gemm_strided(blas_, ta, tb, m, n, kk, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
  }

  void add_bias(T* y, const T* bias, int64_t rows, int64_t cols) override {
    if (rows * cols == 0) return;
    k::add_bias_k<<<k::grid_for(rows * cols), k::kThreads, 0, stream_>>>(y, bias, rows, cols);
    PTS_LAUNCH_CHECK("add_bias");
  }
  void bias_grad(const T* dy, T* dbias, int64_t rows, int64_t cols) override {
    if (rows == 0 || cols == 0) return;
    const int64_t chunks = k::col_chunks(rows);
    T* part = scratch_.as<T>(chunks * cols, stream_);
    k::col_partials_k<<<k::grid_for(chunks * cols), k::kThreads, 0, stream_>>>(dy, rows, cols, part);
    PTS_LAUNCH_CHECK("bias_grad partials");
    k::col_finish_k<<<k::grid_for(cols), k::kThreads, 0, stream_>>>(part, chunks, cols, dbias);
    PTS_LAUNCH_CHECK("bias_grad");
  }
  void gelu_forward(const T* x, T* y, int64_t n) override {
    if (n == 0) return;
    k::gelu_forward_k<<<k::grid_for(n), k::kThreads, 0, stream_>>>(x, y, n);
    PTS_LAUNCH_CHECK("gelu_forward");
  }
  void gelu_backward(const T* x, const T* dy, T* dx, int64_t n) override {
    if (n == 0) return;
    k::gelu_backward_k<<<k::grid_for(n), k::kThreads, 0, stream_>>>(x, dy, dx, n);
    PTS_LAUNCH_CHECK("gelu_backward");
  }

  double softmax_xent(const T* logits, const int32_t* labels, int64_t rows, int64_t cols, double norm,
                      T* dlogits) override {
    if (rows == 0) return 0.0;
    double* loss = scratch_.as<double>(rows + 1, stream_);
    k::softmax_xent_k<<<grid_rows(rows), k::kThreads, 0, stream_>>>(logits, on_device(labels, rows), cols, norm,
                                                                    dlogits, loss);
    PTS_LAUNCH_CHECK("softmax_xent");
    return sum_rows_on_host(loss, rows) / norm;
  }

  void add(T* y, const T* x, int64_t n) override {
    if (n == 0) return;
    k::add_k<<<k::grid_for(n), k::kThreads, 0, stream_>>>(y, x, n);
    PTS_LAUNCH_CHECK("add");
  }
  void axpy(T* y, T a, const T* x, int64_t n) override {
    if (n == 0) return;
    k::axpy_k<<<k::grid_for(n), k::kThreads, 0, stream_>>>(y, a, x, n);
    PTS_LAUNCH_CHECK("axpy");
  }
  void to_bf16(const T* x, uint16_t* q, int64_t n) override {
    if (n == 0) return;
    k::to_bf16_k<<<k::grid_for(n), k::kThreads, 0, stream_>>>(x, q, n);
    PTS_LAUNCH_CHECK("to_bf16");
  }
  void add_bf16(T* y, const uint16_t* q, int64_t n) override {
    if (n == 0) return;
    k::add_bf16_k<<<k::grid_for(n), k::kThreads, 0, stream_>>>(y, q, n);
    PTS_LAUNCH_CHECK("add_bf16");
  }

  void layernorm_forward(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* rstd, int64_t rows, int64_t n,
                         double eps) override {
    if (rows == 0) return;
    k::layernorm_forward_k<<<grid_rows(rows), k::kThreads, 0, stream_>>>(x, gamma, beta, y, mean, rstd, n, eps);
    PTS_LAUNCH_CHECK("layernorm_forward");
  }
  void layernorm_backward(const T* x, const T* gamma, const T* mean, const T* rstd, const T* dy, T* dx, T* dgamma,
                          T* dbeta, int64_t rows, int64_t n) override {
    if (rows == 0 || n == 0) return;
    k::layernorm_backward_dx_k<<<grid_rows(rows), k::kThreads, 0, stream_>>>(x, gamma, mean, rstd, dy, dx, n);
    PTS_LAUNCH_CHECK("layernorm_backward dx");
    const int64_t chunks = k::col_chunks(rows);
    T* pg = scratch_.as<T>(2 * chunks * n, stream_);
    T* pb = pg + chunks * n;
    k::layernorm_param_partials_k<<<k::grid_for(chunks * n), k::kThreads, 0, stream_>>>(x, mean, rstd, dy, rows, n,
                                                                                         pg, pb);
    PTS_LAUNCH_CHECK("layernorm_backward dgamma/dbeta partials");
    k::col_finish_k<<<k::grid_for(n), k::kThreads, 0, stream_>>>(pg, chunks, n, dgamma);
    PTS_LAUNCH_CHECK("layernorm_backward dgamma");
    k::col_finish_k<<<k::grid_for(n), k::kThreads, 0, stream_>>>(pb, chunks, n, dbeta);
    PTS_LAUNCH_CHECK("layernorm_backward dbeta");
  }

  // Per (sequence, head), as the CPU: att = scale q k^T as full [S,S] gemms, causal softmax
  // in place (one block per row), out = att v. q, k, v read in place with ld = 3HD.
  void attention_forward(const T* qkv, T* out, T* att, int64_t batch, int64_t seq, int64_t heads,
                         int64_t head_dim) override {
    const int64_t S = seq, D = head_dim, HD = heads * head_dim, ld = 3 * HD;
    if (batch * heads * S == 0) return;
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(D)));
    const AttnBatching a = attn_batching(batch, S, heads, D);
    for (int64_t o = 0; o < a.outer; ++o) {
      const T* q = qkv + o * a.qkv_outer;
      T* p = att + o * a.att_outer;
      gemm_strided(blas_, Trans::no, Trans::yes, S, S, D, scale, q, ld, a.qkv_inner, q + HD, ld, a.qkv_inner, T(0),
                   p, S, a.att_inner, a.inner);
    }
    causal_softmax(att, batch * heads * S, S, S, 0);
    for (int64_t o = 0; o < a.outer; ++o) {
      const T* v = qkv + o * a.qkv_outer + 2 * HD;
      gemm_strided(blas_, Trans::no, Trans::no, S, D, S, T(1), att + o * a.att_outer, S, a.att_inner, v, ld,
                   a.qkv_inner, T(0), out + o * a.out_outer, HD, a.out_inner, a.inner);
    }
  }

  // dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dP * P)), dQ = scale dS K,
  // dK = scale dS^T Q; dS in scratch, one [S,S] per batch entry of one outer step.
  void attention_backward(const T* qkv, const T* att, const T* dout, T* dqkv, int64_t batch, int64_t seq,
                          int64_t heads, int64_t head_dim) override {
    const int64_t S = seq, D = head_dim, HD = heads * head_dim, ld = 3 * HD;
    if (batch * heads * S == 0) return;
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(D)));
    const AttnBatching a = attn_batching(batch, S, heads, D);
    T* ds = scratch_.as<T>(a.inner * S * S, stream_);
    for (int64_t o = 0; o < a.outer; ++o) {
      const T* q = qkv + o * a.qkv_outer;
      const T* kk = q + HD;
      const T* v = q + 2 * HD;
      T* dq = dqkv + o * a.qkv_outer;
      T* dk = dq + HD;
      T* dv = dq + 2 * HD;
      const T* p = att + o * a.att_outer;
      const T* dO = dout + o * a.out_outer;
      const int64_t sq = a.qkv_inner, so = a.out_inner, sp = a.att_inner, SS = S * S;
      gemm_strided(blas_, Trans::yes, Trans::no, S, D, S, T(1), p, S, sp, dO, HD, so, T(0), dv, ld, sq, a.inner);
      gemm_strided(blas_, Trans::no, Trans::yes, S, S, D, T(1), dO, HD, so, v, ld, sq, T(0), ds, S, SS, a.inner);
      // The scratch holds the inner entries contiguously, att strides by sp: one launch per entry
      // when they differ (batching over sequences), else one for all.
      if (sp == SS)
        softmax_backward(p, S, ds, S, nullptr, a.inner * S, S, S, 0);
      else
        for (int64_t i = 0; i < a.inner; ++i) softmax_backward(p + i * sp, S, ds + i * SS, S, nullptr, S, S, S, 0);
      gemm_strided(blas_, Trans::no, Trans::no, S, D, S, scale, ds, S, SS, kk, ld, sq, T(0), dq, ld, sq, a.inner);
      gemm_strided(blas_, Trans::yes, Trans::no, S, D, S, scale, ds, S, SS, q, ld, sq, T(0), dk, ld, sq, a.inner);
    }
  }

  // One block per row; attention's softmax and its backward are these two ops.
  void causal_softmax(T* x, int64_t rows, int64_t cols, int64_t period, int64_t first) override {
    check_softmax_mask("causal_softmax", period, first);
    if (rows == 0 || cols == 0) return;
    k::causal_softmax_k<<<grid_rows(rows), k::kThreads, 0, stream_>>>(x, cols, period, first);
    PTS_LAUNCH_CHECK("causal_softmax");
  }
  void softmax_backward(const T* p, int64_t ld_p, T* ds, int64_t ld_ds, const T* dot, int64_t rows, int64_t cols,
                        int64_t period, int64_t first) override {
    check_softmax_mask("softmax_backward", period, first);
    if (rows == 0 || cols == 0) return;
    k::causal_softmax_backward_k<<<grid_rows(rows), k::kThreads, 0, stream_>>>(p, ld_p, ds, ld_ds, dot, cols, period,
                                                                               first);
    PTS_LAUNCH_CHECK("softmax_backward");
  }
  void row_dot(const T* a, int64_t lda, const T* b, int64_t ldb, int64_t rows, int64_t cols, T* out) override {
    if (rows == 0) return;
    k::row_dot_k<<<grid_rows(rows), k::kThreads, 0, stream_>>>(a, lda, b, ldb, cols, out);
    PTS_LAUNCH_CHECK("row_dot");
  }

  void embedding_forward(const int32_t* ids, int64_t rows, const T* table, int64_t v_begin, int64_t v_count,
                         int64_t n, T* out, bool accumulate) override {
    if (rows * n == 0) return;
    k::embedding_forward_k<<<k::grid_for(rows * n), k::kThreads, 0, stream_>>>(on_device(ids, rows), rows, table,
                                                                               v_begin, v_count, n, out, accumulate);
    PTS_LAUNCH_CHECK("embedding_forward");
  }
  // Deterministic without atomics: chains of equal ids in row order (cuda_kernels.cuh).
  void embedding_backward(const int32_t* ids, int64_t rows, const T* dout, int64_t v_begin, int64_t v_count,
                          int64_t n, T* dtable) override {
    if (rows * n == 0) return;
    ids = on_device(ids, rows);
    char* base = static_cast<char*>(scratch_.get(static_cast<size_t>(rows) * (sizeof(int64_t) + sizeof(int32_t)), stream_));
    int64_t* next = reinterpret_cast<int64_t*>(base);
    int32_t* head = reinterpret_cast<int32_t*>(base + rows * sizeof(int64_t));
    k::embedding_chains_k<<<k::grid_for(rows), k::kThreads, 0, stream_>>>(ids, rows, v_begin, v_count, next, head);
    PTS_LAUNCH_CHECK("embedding_backward chains");
    k::embedding_backward_k<<<k::grid_for(rows * n), k::kThreads, 0, stream_>>>(ids, rows, dout, v_begin, n, next,
                                                                                head, dtable);
    PTS_LAUNCH_CHECK("embedding_backward");
  }

  void row_max(const T* x, T* mx, int64_t rows, int64_t cols) override {
    if (rows == 0) return;
    k::row_max_k<<<grid_rows(rows), k::kThreads, 0, stream_>>>(x, mx, cols);
    PTS_LAUNCH_CHECK("row_max");
  }
  void xent_partials(const T* logits, const int32_t* labels, const T* shift, int64_t rows, int64_t cols,
                     int64_t v_begin, T* sumexp, T* target) override {
    if (rows == 0) return;
    k::xent_partials_k<<<grid_rows(rows), k::kThreads, 0, stream_>>>(logits, on_device(labels, rows), shift, cols,
                                                                     v_begin, sumexp, target);
    PTS_LAUNCH_CHECK("xent_partials");
  }
  double xent_finish(const T* logits, const int32_t* labels, const T* shift, const T* sumexp, const T* target,
                     int64_t rows, int64_t cols, int64_t v_begin, double norm, T* dlogits) override {
    if (rows == 0) return 0.0;
    double* loss = scratch_.as<double>(rows + 1, stream_);
    k::xent_finish_k<<<grid_rows(rows), k::kThreads, 0, stream_>>>(logits, on_device(labels, rows), shift, sumexp,
                                                                   target, cols, v_begin, norm, dlogits, loss);
    PTS_LAUNCH_CHECK("xent_finish");
    return sum_rows_on_host(loss, rows) / norm;
  }

  void scale(T* x, T alpha, int64_t n) override {
    if (n == 0) return;
    k::scale_k<<<k::grid_for(n), k::kThreads, 0, stream_>>>(x, alpha, n);
    PTS_LAUNCH_CHECK("scale");
  }
  void fill(T* x, T value, int64_t n) override {
    if (n == 0) return;
    k::fill_k<<<k::grid_for(n), k::kThreads, 0, stream_>>>(x, value, n);
    PTS_LAUNCH_CHECK("fill");
  }
  void copy(T* dst, const T* src, int64_t n) override {
    if (n <= 0) return;
    PTS_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(T), cudaMemcpyDeviceToDevice, stream_));
  }
  void max_over_parts(const T* parts, int64_t nparts, int64_t n, T* out) override {
    if (n == 0) return;
    k::max_over_parts_k<<<k::grid_for(n), k::kThreads, 0, stream_>>>(parts, nparts, n, out);
    PTS_LAUNCH_CHECK("max_over_parts");
  }
  // Synchronous: queued behind the stream's earlier ops, and complete on return.
  void upload(T* dst, const T* host, int64_t n) override {
    if (n <= 0) return;
    PTS_CUDA_CHECK(cudaMemcpyAsync(dst, host, static_cast<size_t>(n) * sizeof(T), cudaMemcpyHostToDevice, stream_));
    synchronize();
  }
  void download(T* host, const T* src, int64_t n) override {
    if (n <= 0) return;
    PTS_CUDA_CHECK(cudaMemcpyAsync(host, src, static_cast<size_t>(n) * sizeof(T), cudaMemcpyDeviceToHost, stream_));
    synchronize();
  }

  void sgd_momentum(T* p, const T* g, T* m, int64_t n, const SgdParams& o) override {
    if (n == 0) return;
    k::sgd_momentum_k<<<k::grid_for(n), k::kThreads, 0, stream_>>>(
        p, g, m, n, static_cast<T>(o.lr), static_cast<T>(o.momentum), static_cast<T>(o.weight_decay));
    PTS_LAUNCH_CHECK("sgd_momentum");
  }
  // The bias corrections computed on the host exactly as the CPU backend does.
  void adamw(T* p, const T* g, T* m, T* v, int64_t n, const AdamParams& o, int64_t t) override {
    if (n == 0) return;
    const T c1 = static_cast<T>(1.0 / (1.0 - std::pow(o.beta1, static_cast<double>(t))));
    const T c2 = static_cast<T>(1.0 / (1.0 - std::pow(o.beta2, static_cast<double>(t))));
    k::adamw_k<<<k::grid_for(n), k::kThreads, 0, stream_>>>(
        p, g, m, v, n, static_cast<T>(o.beta1), static_cast<T>(o.beta2), c1, c2, static_cast<T>(o.lr),
        static_cast<T>(o.eps), static_cast<T>(o.weight_decay));
    PTS_LAUNCH_CHECK("adamw");
  }

 private:
  std::string name_;
  cudaStream_t stream_ = nullptr;
  Blas blas_;
  // Per-row losses, column partial sums, embedding chains, attention's dS (at most
  // max(B, H) * S^2 elements, the CPU's S^2 scratch times the batched count).
  Workspace scratch_{"workspace"};
  Workspace ints_{"copy of host ids / labels"};
  Workspace bf16_operands_{"bfloat16 gemm operands"};

  // ids and labels are host memory (Backend's contract: the loader's vectors): copied into
  // the workspace on the stream, behind every op that read the previous copy.
  const int32_t* on_device(const int32_t* host, int64_t n) {
    int32_t* d = ints_.as<int32_t>(n, stream_);
    PTS_CUDA_CHECK(cudaMemcpyAsync(d, host, static_cast<size_t>(n) * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
    return d;
  }

  static unsigned grid_rows(int64_t rows) {
    if (rows > std::numeric_limits<int>::max())
      throw Error("CUDA backend: " + std::to_string(rows) + " rows exceed one grid");
    return static_cast<unsigned>(rows);
  }

  // loss[0..rows) summed on the device in a fixed order into loss[rows], then to the host.
  double sum_rows_on_host(double* loss, int64_t rows) {
    k::sum_doubles_k<<<1, k::kThreads, 0, stream_>>>(loss, rows, loss + rows);
    PTS_LAUNCH_CHECK("loss sum");
    double total = 0;
    PTS_CUDA_CHECK(cudaMemcpyAsync(&total, loss + rows, sizeof total, cudaMemcpyDeviceToHost, stream_));
    synchronize();
    return total;
  }
};

}  // namespace

template <class T>
std::unique_ptr<Backend<T>> make_cuda_backend(const std::string& name, GemmMath math) {
  return std::make_unique<CudaBackend<T>>(name, math);
}
template std::unique_ptr<Backend<float>> make_cuda_backend<float>(const std::string&, GemmMath);
template std::unique_ptr<Backend<double>> make_cuda_backend<double>(const std::string&, GemmMath);

namespace {
std::string no_gpu() {
  return cuda_device_count() > 0 ? std::string()
                                 : "no GPU is visible to this process (cudaGetDeviceCount is 0; check the driver and "
                                   "CUDA_VISIBLE_DEVICES)";
}
}  // namespace

void register_cuda_backends() {
  // tf32 and bf16 round float32 gemm inputs: a float32 case's precision reference runs on the
  // same backend (reduced_precision), so the error ratio compares like with like.
  register_backend({"cuda", [] { return make_cuda_backend<float>("cuda", GemmMath::full); },
                    [] { return make_cuda_backend<double>("cuda", GemmMath::full); }, true, no_gpu});
  register_backend({"cuda-tf32", [] { return make_cuda_backend<float>("cuda-tf32", GemmMath::tf32); },
                    [] { return make_cuda_backend<double>("cuda-tf32", GemmMath::tf32); }, true, no_gpu, nullptr,
                    true});
  register_backend({"cuda-bf16", [] { return make_cuda_backend<float>("cuda-bf16", GemmMath::bf16); },
                    [] { return make_cuda_backend<double>("cuda-bf16", GemmMath::bf16); }, true, no_gpu, nullptr,
                    true});
}

bool cuda_backends_available() { return cuda_device_count() > 0; }

}  // namespace pts
