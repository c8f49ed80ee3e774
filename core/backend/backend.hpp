// The compute backend: every numeric op a layer or optimizer needs, behind one small
// interface templated on the scalar type. Layers never loop over raw data themselves.
// Dimension legend: B = rows (samples), N = columns (features / classes).
// Memory: every T* (and bfloat16 uint16_t*) argument is the backend's memory (a tensor from
// allocator(), on a GPU backend device memory); the int32 ids and labels are host memory
// (the loader's vectors: Batch::tokens, Batch::labels, positions), which a device backend
// copies over itself before its kernels read them.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include "core/error.hpp"
#include "core/memory.hpp"

namespace pts {

enum class Trans { no, yes };
class StagingCopy;  // core/comm/staging_comm.hpp

struct SgdParams {
  double lr = 0.1, momentum = 0.9, weight_decay = 0.0;
};
struct AdamParams {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
};

template <class T>
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Where this backend's tensors live; the harness builds each case's MemoryTracker on it.
  virtual Allocator& allocator() { return host_allocator(); }
  // Waits until every op issued so far has finished. Ops on a device backend are queued
  // (the CUDA backend's on its one stream), so a caller that reads a host clock around
  // them must synchronize first; upload, download and the ops returning a value to the
  // host (softmax_xent, xent_finish) wait on their own. A no-op on the CPU.
  virtual void synchronize() {}

  // Row-major C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C.
  virtual void gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                    int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) = 0;
  // y[B,N] += bias[N] on every row.
  virtual void add_bias(T* y, const T* bias, int64_t rows, int64_t cols) = 0;
  // dbias[N] += sum over rows of dy[B,N].
  virtual void bias_grad(const T* dy, T* dbias, int64_t rows, int64_t cols) = 0;
  // GELU, tanh form: y = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
  virtual void gelu_forward(const T* x, T* y, int64_t n) = 0;
  // dx = dy * gelu'(x).
  virtual void gelu_backward(const T* x, const T* dy, T* dx, int64_t n) = 0;
  // Softmax cross-entropy of logits[B,N] against labels[B]: returns sum(loss) / norm and
  // writes dlogits = (softmax - onehot) / norm. norm is the number of samples the loss is
  // a mean over (the local batch; data parallelism then averages over ranks). dlogits may
  // alias logits.
  virtual double softmax_xent(const T* logits, const int32_t* labels, int64_t rows, int64_t cols,
                              double norm, T* dlogits) = 0;
  // y[i] += x[i].
  virtual void add(T* y, const T* x, int64_t n) = 0;
  // y[i] += a * x[i].
  virtual void axpy(T* y, T a, const T* x, int64_t n) = 0;
  // bfloat16 for transfers in lower precision (core/bf16.hpp: the value rounded to float,
  // then to bfloat16, nearest-even): q[i] = bf16(x[i]); y[i] += value of q[i].
  virtual void to_bf16(const T* x, uint16_t* q, int64_t n) = 0;
  virtual void add_bf16(T* y, const uint16_t* q, int64_t n) = 0;

  // --- Transformer ops. R = rows (tokens), N = features; B = sequences, S = sequence
  // length, H = heads, D = head dim. ---

  // LayerNorm over each row of x[R,N] (biased variance): y = (x - mean) * rstd * gamma + beta,
  // rstd = 1 / sqrt(var + eps). Saves mean[R] and rstd[R] for backward.
  virtual void layernorm_forward(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* rstd, int64_t rows,
                                 int64_t n, double eps) = 0;
  // Accumulates: dx += dL/dx, dgamma += sum_r dy * xhat, dbeta += sum_r dy.
  virtual void layernorm_backward(const T* x, const T* gamma, const T* mean, const T* rstd, const T* dy, T* dx,
                                  T* dgamma, T* dbeta, int64_t rows, int64_t n) = 0;
  // Causal multi-head self-attention. qkv[B,S,3*H*D] holds, per token, the q, k and v
  // blocks of H*D columns each (head h at columns h*D .. h*D+D-1 of its block);
  // out[B,S,H*D] = softmax(q k^T / sqrt(D), masked to keys <= query) v, heads in the same
  // column order. att[B,H,S,S] saves the probabilities (zero above the diagonal).
  virtual void attention_forward(const T* qkv, T* out, T* att, int64_t batch, int64_t seq, int64_t heads,
                                 int64_t head_dim) = 0;
  // dqkv[B,S,3*H*D] (overwritten) from dout[B,S,H*D], the saved att and qkv.
  virtual void attention_backward(const T* qkv, const T* att, const T* dout, T* dqkv, int64_t batch, int64_t seq,
                                  int64_t heads, int64_t head_dim) = 0;
  // The masked row softmax inside attention, also on its own for context parallelism (a
  // rank holding query positions first .. first + period - 1 of every sequence). Score rows
  // x[rows, cols] (ld = cols) come in matrices of `period` queries, one per (sequence, head);
  // row i's query sits at position first + i % period and sees the keys
  //   j <= lim(i) = min(first + i % period, cols - 1)    (every key when period = 0).
  // In place: x[i, j<=lim] = softmax over those entries (row max subtracted), x[i, j>lim] = 0
  // exactly. attention_forward's is causal_softmax(att, B*H*S, S, S, 0). A negative period
  // or first throws Error.
  virtual void causal_softmax(T* x, int64_t rows, int64_t cols, int64_t period, int64_t first) = 0;
  // Its backward, in place over ds[rows, cols] (leading dimension ld_ds) with the
  // probabilities p[rows, cols] (ld_p), lim(i) as above; columns cols .. ld-1 are neither read
  // nor written. ds holds dP on entry and, on exit, dS, the gradient of the softmax input
  // (unscaled):
  //   dS[i,j] = P[i,j] * (dP[i,j] - d_i) for j <= lim(i), exact 0 above,
  //   d_i = dot[i] when dot is given, else sum_{j<=lim} dP[i,j] P[i,j].
  // Context parallelism gives dot = rowsum(dO * O), which equals that sum, because a row's
  // dP arrives in blocks of keys. attention_backward's is
  // softmax_backward(att, S, dP, S, nullptr, B*H*S, S, S, 0).
  virtual void softmax_backward(const T* p, int64_t ld_p, T* ds, int64_t ld_ds, const T* dot, int64_t rows,
                                int64_t cols, int64_t period, int64_t first) = 0;
  // out[i] = sum_j a[i*lda + j] * b[i*ldb + j] over rows x cols (ld >= cols): the dot
  // ring attention hands softmax_backward, rowsum(dO * O) per query and head.
  virtual void row_dot(const T* a, int64_t lda, const T* b, int64_t ldb, int64_t rows, int64_t cols, T* out) = 0;
  // Row lookup in a table holding rows [v_begin, v_begin + v_count) of an embedding:
  // out[r,:] (+)= table[ids[r] - v_begin, :] when ids[r] is in range, else (+)= 0.
  virtual void embedding_forward(const int32_t* ids, int64_t rows, const T* table, int64_t v_begin,
                                 int64_t v_count, int64_t n, T* out, bool accumulate) = 0;
  // dtable[ids[r] - v_begin, :] += dout[r, :] for ids in range.
  virtual void embedding_backward(const int32_t* ids, int64_t rows, const T* dout, int64_t v_begin,
                                  int64_t v_count, int64_t n, T* dtable) = 0;
  // Cross-entropy over logits split by columns (vocabulary-parallel): this rank holds
  // columns [v_begin, v_begin + cols) of logits[R, V].
  // mx[r] = max_j x[r,j] (-inf for cols == 0).
  virtual void row_max(const T* x, T* mx, int64_t rows, int64_t cols) = 0;
  // sumexp[r] = sum_j exp(x[r,j] - shift[r]); target[r] = x[r, labels[r] - v_begin] - shift[r]
  // when labels[r] is in range, else 0. shift is the global row max.
  virtual void xent_partials(const T* logits, const int32_t* labels, const T* shift, int64_t rows, int64_t cols,
                             int64_t v_begin, T* sumexp, T* target) = 0;
  // With sumexp and target summed over all ranks: returns sum_r (log sumexp[r] - target[r]) / norm
  // and writes dlogits[r,j] = (exp(x[r,j] - shift[r]) / sumexp[r] - [j == labels[r] - v_begin]) / norm;
  // dlogits may alias logits.
  virtual double xent_finish(const T* logits, const int32_t* labels, const T* shift, const T* sumexp,
                             const T* target, int64_t rows, int64_t cols, int64_t v_begin, double norm,
                             T* dlogits) = 0;

  // x *= alpha.
  virtual void scale(T* x, T alpha, int64_t n) = 0;
  // Data movement inside the backend's memory, so that no layer touches a tensor's bytes
  // itself: x[0..n) = value; dst[0..n) = src[0..n) (no overlap); out[i] = max over p of
  // parts[p * n + i] for p < nparts (the combination of gathered row maxima).
  virtual void fill(T* x, T value, int64_t n) = 0;
  virtual void copy(T* dst, const T* src, int64_t n) = 0;
  virtual void max_over_parts(const T* parts, int64_t nparts, int64_t n, T* out) = 0;
  // Between host memory and the backend's: what the harness, parameter initialisation and
  // the data loader use, the only places host code meets tensor bytes.
  virtual void upload(T* dst, const T* host, int64_t n) = 0;
  virtual void download(T* host, const T* src, int64_t n) = 0;
  // SGD with momentum and L2 weight decay (PyTorch's form):
  //   g' = g + wd * p;  m = mu * m + g';  p -= lr * m.
  virtual void sgd_momentum(T* p, const T* g, T* m, int64_t n, const SgdParams& o) = 0;
  // AdamW (decoupled weight decay), step t counted from 1:
  //   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
  //   p -= lr * (m / (1-b1^t) / (sqrt(v / (1-b2^t)) + eps) + wd * p).
  virtual void adamw(T* p, const T* g, T* m, T* v, int64_t n, const AdamParams& o, int64_t t) = 0;
};

// What every backend's causal_softmax and softmax_backward check of their mask.
inline void check_softmax_mask(const char* op, int64_t period, int64_t first) {
  if (period < 0 || first < 0)
    throw Error(std::string(op) + ": period = " + std::to_string(period) + ", first = " + std::to_string(first) +
                "; both must be >= 0 (period 0: no mask)");
}

// The OpenBLAS CPU backend; its tensors come from `allocator` (a test gives it an arena).
template <class T>
std::unique_ptr<Backend<T>> make_cpu_backend(const std::string& name = "cpu", Allocator& allocator = host_allocator());

// Backends by name, the suite's `backend` key: "cpu" ships; a test may add its own (a
// poisoning arena) and a GPU build adds "cuda" and "cuda-tf32"
// (core/backend/cuda/cuda_backend.hpp: register_cuda_backends).
struct BackendInfo {
  std::string name;
  std::unique_ptr<Backend<float>> (*make_f32)();
  std::unique_ptr<Backend<double>> (*make_f64)();
  // Tensors in a GPU's memory: the case communicates through NCCL or staged MPI
  // (core/comm/case_comm.hpp), never plain MPI on device pointers.
  bool device_memory = false;
  // Why the backend cannot run in this process ("" when it can; null: always can), asked
  // when a suite is loaded so that a case for a missing GPU exits 2 before anything runs.
  std::string (*unavailable)() = nullptr;
  // Device memory a staged communicator copies through its own functions (a test's host
  // stand-in for a GPU); null: the CUDA runtime's (core/comm/case_comm.hpp).
  std::shared_ptr<StagingCopy> (*staging)() = nullptr;
  // float32 gemms round their inputs (TF32, bfloat16): a float32 case's precision reference
  // (the single-device float32 run its error is a ratio of) runs on this backend too.
  bool reduced_precision = false;
};
const BackendInfo* find_backend(const std::string& name);
std::string backend_names();
void register_backend(const BackendInfo& info);  // replaces one of the same name
template <class T>
std::unique_ptr<Backend<T>> make_backend(const std::string& name) {
  const BackendInfo* b = find_backend(name);
  if (!b) return nullptr;
  if constexpr (std::is_same_v<T, float>) return b->make_f32();
  else return b->make_f64();
}

}  // namespace pts
