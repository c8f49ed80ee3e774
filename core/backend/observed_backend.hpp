// A backend that reports every op to an observer and forwards it to an inner backend: the op's
// name, its arguments in the backend's memory (every T* and bfloat16 pointer) and its host
// arguments (ids, labels, upload sources and download destinations; Backend's memory contract,
// core/backend/backend.hpp). Two observers use it: a test's check of that contract
// (core/testing/device_checked_backend.hpp) and the per-op time profile (op_profile.hpp).
#pragma once
#include <initializer_list>
#include <memory>
#include <string>

#include "core/backend/backend.hpp"

namespace pts {

class BackendObserver {
 public:
  virtual ~BackendObserver() = default;
  virtual void before(const char* op, std::initializer_list<const void*> device,
                      std::initializer_list<const void*> host) = 0;
  virtual void after(const char* /*op*/) {}
  // The address the inner backend uses for a tensor argument (identity unless the observer's
  // memory has a second view: PoisonArena's device view).
  virtual void* map(const void* p) { return const_cast<void*>(p); }
};

template <class T>
class ObservedBackend final : public Backend<T> {
 public:
  ObservedBackend(std::unique_ptr<Backend<T>> inner, BackendObserver& observer)
      : in_(std::move(inner)), obs_(observer) {}

  std::string name() const override { return in_->name(); }
  Allocator& allocator() override { return in_->allocator(); }
  void synchronize() override { in_->synchronize(); }
  Backend<T>& inner() { return *in_; }

  void gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
            int64_t ldb, T beta, T* c, int64_t ldc) override {
    Scope s(obs_, "gemm", {a, b, c}, {});
    in_->gemm(ta, tb, m, n, k, alpha, d(a), lda, d(b), ldb, beta, d(c), ldc);
  }
  void add_bias(T* y, const T* bias, int64_t rows, int64_t cols) override {
    Scope s(obs_, "add_bias", {y, bias}, {});
    in_->add_bias(d(y), d(bias), rows, cols);
  }
  void bias_grad(const T* dy, T* dbias, int64_t rows, int64_t cols) override {
    Scope s(obs_, "bias_grad", {dy, dbias}, {});
    in_->bias_grad(d(dy), d(dbias), rows, cols);
  }
  void gelu_forward(const T* x, T* y, int64_t n) override {
    Scope s(obs_, "gelu_forward", {x, y}, {});
    in_->gelu_forward(d(x), d(y), n);
  }
  void gelu_backward(const T* x, const T* dy, T* dx, int64_t n) override {
    Scope s(obs_, "gelu_backward", {x, dy, dx}, {});
    in_->gelu_backward(d(x), d(dy), d(dx), n);
  }
  double softmax_xent(const T* logits, const int32_t* labels, int64_t rows, int64_t cols, double norm,
                      T* dlogits) override {
    Scope s(obs_, "softmax_xent", {logits, dlogits}, {labels});
    return in_->softmax_xent(d(logits), labels, rows, cols, norm, d(dlogits));
  }
  void add(T* y, const T* x, int64_t n) override {
    Scope s(obs_, "add", {y, x}, {});
    in_->add(d(y), d(x), n);
  }
  void axpy(T* y, T a, const T* x, int64_t n) override {
    Scope s(obs_, "axpy", {y, x}, {});
    in_->axpy(d(y), a, d(x), n);
  }
  void to_bf16(const T* x, uint16_t* q, int64_t n) override {
    Scope s(obs_, "to_bf16", {x, q}, {});
    in_->to_bf16(d(x), d(q), n);
  }
  void add_bf16(T* y, const uint16_t* q, int64_t n) override {
    Scope s(obs_, "add_bf16", {y, q}, {});
    in_->add_bf16(d(y), d(q), n);
  }
  void layernorm_forward(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* rstd, int64_t rows, int64_t n,
                         double eps) override {
    Scope s(obs_, "layernorm_forward", {x, gamma, beta, y, mean, rstd}, {});
    in_->layernorm_forward(d(x), d(gamma), d(beta), d(y), d(mean), d(rstd), rows, n, eps);
  }
  void layernorm_backward(const T* x, const T* gamma, const T* mean, const T* rstd, const T* dy, T* dx, T* dgamma,
                          T* dbeta, int64_t rows, int64_t n) override {
    Scope s(obs_, "layernorm_backward", {x, gamma, mean, rstd, dy, dx, dgamma, dbeta}, {});
    in_->layernorm_backward(d(x), d(gamma), d(mean), d(rstd), d(dy), d(dx), d(dgamma), d(dbeta), rows, n);
  }
  void attention_forward(const T* qkv, T* out, T* att, int64_t batch, int64_t seq, int64_t heads,
                         int64_t head_dim) override {
    Scope s(obs_, "attention_forward", {qkv, out, att}, {});
    in_->attention_forward(d(qkv), d(out), d(att), batch, seq, heads, head_dim);
  }
  void attention_backward(const T* qkv, const T* att, const T* dout, T* dqkv, int64_t batch, int64_t seq,
                          int64_t heads, int64_t head_dim) override {
    Scope s(obs_, "attention_backward", {qkv, att, dout, dqkv}, {});
    in_->attention_backward(d(qkv), d(att), d(dout), d(dqkv), batch, seq, heads, head_dim);
  }
  void causal_softmax(T* x, int64_t rows, int64_t cols, int64_t period, int64_t first) override {
    Scope s(obs_, "causal_softmax", {x}, {});
    in_->causal_softmax(d(x), rows, cols, period, first);
  }
  void softmax_backward(const T* p, int64_t ld_p, T* ds, int64_t ld_ds, const T* dot, int64_t rows, int64_t cols,
                        int64_t period, int64_t first) override {
    Scope s(obs_, "softmax_backward", {p, ds, dot}, {});
    in_->softmax_backward(d(p), ld_p, d(ds), ld_ds, d(dot), rows, cols, period, first);
  }
  void row_dot(const T* a, int64_t lda, const T* b, int64_t ldb, int64_t rows, int64_t cols, T* out) override {
    Scope s(obs_, "row_dot", {a, b, out}, {});
    in_->row_dot(d(a), lda, d(b), ldb, rows, cols, d(out));
  }
  void embedding_forward(const int32_t* ids, int64_t rows, const T* table, int64_t v_begin, int64_t v_count,
                         int64_t n, T* out, bool accumulate) override {
    Scope s(obs_, "embedding_forward", {table, out}, {ids});
    in_->embedding_forward(ids, rows, d(table), v_begin, v_count, n, d(out), accumulate);
  }
  void embedding_backward(const int32_t* ids, int64_t rows, const T* dout, int64_t v_begin, int64_t v_count,
                          int64_t n, T* dtable) override {
    Scope s(obs_, "embedding_backward", {dout, dtable}, {ids});
    in_->embedding_backward(ids, rows, d(dout), v_begin, v_count, n, d(dtable));
  }
  void row_max(const T* x, T* mx, int64_t rows, int64_t cols) override {
    Scope s(obs_, "row_max", {x, mx}, {});
    in_->row_max(d(x), d(mx), rows, cols);
  }
  void xent_partials(const T* logits, const int32_t* labels, const T* shift, int64_t rows, int64_t cols,
                     int64_t v_begin, T* sumexp, T* target) override {
    Scope s(obs_, "xent_partials", {logits, shift, sumexp, target}, {labels});
    in_->xent_partials(d(logits), labels, d(shift), rows, cols, v_begin, d(sumexp), d(target));
  }
  double xent_finish(const T* logits, const int32_t* labels, const T* shift, const T* sumexp, const T* target,
                     int64_t rows, int64_t cols, int64_t v_begin, double norm, T* dlogits) override {
    Scope s(obs_, "xent_finish", {logits, shift, sumexp, target, dlogits}, {labels});
    return in_->xent_finish(d(logits), labels, d(shift), d(sumexp), d(target), rows, cols, v_begin, norm, d(dlogits));
  }
  void scale(T* x, T alpha, int64_t n) override {
    Scope s(obs_, "scale", {x}, {});
    in_->scale(d(x), alpha, n);
  }
  void fill(T* x, T value, int64_t n) override {
    // Nothing is read or written when n = 0: no pointer to check.
    Scope s = n > 0 ? Scope(obs_, "fill", {x}, {}) : Scope(obs_, "fill", {}, {});
    in_->fill(d(x), value, n);
  }
  void copy(T* dst, const T* src, int64_t n) override {
    Scope s = n > 0 ? Scope(obs_, "copy", {dst, src}, {}) : Scope(obs_, "copy", {}, {});
    in_->copy(d(dst), d(src), n);
  }
  void max_over_parts(const T* parts, int64_t nparts, int64_t n, T* out) override {
    Scope s(obs_, "max_over_parts", {parts, out}, {});
    in_->max_over_parts(d(parts), nparts, n, d(out));
  }
  void upload(T* dst, const T* src, int64_t n) override {
    Scope s = n > 0 ? Scope(obs_, "upload", {dst}, {src}) : Scope(obs_, "upload", {}, {});
    in_->upload(d(dst), src, n);
  }
  void download(T* dst, const T* src, int64_t n) override {
    Scope s = n > 0 ? Scope(obs_, "download", {src}, {dst}) : Scope(obs_, "download", {}, {});
    in_->download(dst, d(src), n);
  }
  void sgd_momentum(T* p, const T* g, T* m, int64_t n, const SgdParams& o) override {
    Scope s(obs_, "sgd_momentum", {p, g, m}, {});
    in_->sgd_momentum(d(p), d(g), d(m), n, o);
  }
  void adamw(T* p, const T* g, T* m, T* v, int64_t n, const AdamParams& o, int64_t t) override {
    Scope s(obs_, "adamw", {p, g, m, v}, {});
    in_->adamw(d(p), d(g), d(m), d(v), n, o, t);
  }

 private:
  std::unique_ptr<Backend<T>> in_;
  BackendObserver& obs_;
  template <class P>
  P* d(P* p) const {
    return p ? static_cast<P*>(obs_.map(p)) : p;
  }
  struct Scope {
    Scope(BackendObserver& o, const char* op, std::initializer_list<const void*> device,
          std::initializer_list<const void*> host)
        : obs(o), name(op) {
      obs.before(op, device, host);
    }
    ~Scope() { obs.after(name); }
    BackendObserver& obs;
    const char* name;
  };
};

}  // namespace pts
