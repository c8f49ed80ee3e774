// The compute backend: every numeric op a layer or optimizer needs, behind one small
// interface templated on the scalar type. Layers never loop over raw data themselves.
// Dimension legend: B = rows (samples), N = columns (features / classes).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace pts {

enum class Trans { no, yes };

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
  // a mean over (the local batch; data parallelism then averages over ranks).
  virtual double softmax_xent(const T* logits, const int32_t* labels, int64_t rows, int64_t cols,
                              double norm, T* dlogits) = 0;
  // x *= alpha.
  virtual void scale(T* x, T alpha, int64_t n) = 0;
  // SGD with momentum and L2 weight decay (PyTorch's form):
  //   g' = g + wd * p;  m = mu * m + g';  p -= lr * m.
  virtual void sgd_momentum(T* p, const T* g, T* m, int64_t n, const SgdParams& o) = 0;
  // AdamW (decoupled weight decay), step t counted from 1:
  //   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
  //   p -= lr * (m / (1-b1^t) / (sqrt(v / (1-b2^t)) + eps) + wd * p).
  virtual void adamw(T* p, const T* g, T* m, T* v, int64_t n, const AdamParams& o, int64_t t) = 0;
};

template <class T>
std::unique_ptr<Backend<T>> make_cpu_backend();

}  // namespace pts
