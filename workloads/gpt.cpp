#include "workloads/gpt.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "workloads/params.hpp"

namespace pts {

namespace {

constexpr double kInitStd = 0.02, kLnEps = 1e-5;

ParamTensor vec(int64_t n, double value) { return {1, n, ShardKind::whole, {}, 0, value, 0}; }
ParamTensor mat(int64_t rows, int64_t cols, double std, uint64_t stream) {
  return {rows, cols, ShardKind::whole, {}, std, 0, stream};
}
ParamTensor sharded(ParamTensor t, ShardKind kind, Split split) {
  t.shard = kind;
  t.split = split;
  return t;
}

// State every GPT block shares.
template <class T>
class GptBlock : public Block<T> {
 public:
  GptBlock(const WorkloadSpec& w, const ModelShard& shard, Backend<T>& be, MemoryTracker& mem, uint64_t seed)
      : be_(be), mem_(mem), seed_(seed), tp_(shard.tp), faults_(shard.faults), tp_rank_(shard.tp_rank()),
        tp_size_(shard.tp_size()), S_(w.seq), C_(w.embd) {}
  int64_t numel() const override { return params_.numel(); }
  int64_t canonical_numel() const override { return params_.canonical_numel(); }
  void bind(T* p, T* g) override {
    if (p) p_ = p;
    if (g) g_ = g;
  }
  void init(int64_t begin, int64_t end, T* out) const override { params_.init(seed_, begin, end, out); }
  void segments(int64_t local, int64_t canonical, std::vector<Segment>& out) const override {
    params_.segments(local, canonical, tp_rank_ == 0, out);
  }

 protected:
  T* p(size_t i) const { return p_ + params_.offset(i); }
  T* g(size_t i) const { return g_ + params_.offset(i); }
  Tensor<T> act(Shape s) { return Tensor<T>(mem_, MemCategory::activation, std::move(s)); }
  Tensor<T> work(Shape s) { return Tensor<T>(mem_, MemCategory::workspace, std::move(s)); }
  // Without `accumulate` the block's gradients start from zero; every op then adds.
  void start_grads(bool accumulate) {
    if (!accumulate) std::memset(g_, 0, params_.numel() * sizeof(T));
  }
  bool tp_on() const { return tp_ && tp_size_ > 1; }
  int64_t bytes(int64_t elems) const { return elems * static_cast<int64_t>(sizeof(T)); }
  // y[N, out] += x[N, in] W[in, out] (beta 0: overwrite).
  void matmul(const T* x, const T* w, T* y, int64_t n, int64_t in, int64_t out) {
    be_.gemm(Trans::no, Trans::no, n, out, in, T(1), x, in, w, out, T(0), y, out);
  }
  // Backward of y = x W: dW += x^T dy, and dx = dy W^T when dx is not null.
  void matmul_backward(const T* x, const T* w, const T* dy, T* dw, T* dx, int64_t n, int64_t in, int64_t out) {
    be_.gemm(Trans::yes, Trans::no, in, out, n, T(1), x, in, dy, out, T(1), dw, out);
    if (dx) be_.gemm(Trans::no, Trans::yes, n, in, out, T(1), dy, out, w, out, T(0), dx, in);
  }
  template <class S>
  S& slot_of(std::vector<S>& v, int slot) {
    if (v.size() <= static_cast<size_t>(slot)) v.resize(slot + 1);
    return v[slot];
  }

  Backend<T>& be_;
  MemoryTracker& mem_;
  uint64_t seed_;
  Comm* tp_;
  ModelFaults faults_;
  int tp_rank_, tp_size_;
  int64_t S_, C_;
  ParamSet params_;
  T *p_ = nullptr, *g_ = nullptr;
};

// Token (vocabulary-parallel) plus position (replicated) embedding.
template <class T>
class Embedding final : public GptBlock<T> {
 public:
  Embedding(const WorkloadSpec& w, const ModelShard& shard, Backend<T>& be, MemoryTracker& mem, uint64_t seed)
      : GptBlock<T>(w, shard, be, mem, seed), vocab_(vocab_split(w.vocab, shard.tp_size(), shard.tp_rank())) {
    this->params_.add(sharded(mat(w.vocab, w.embd, kInitStd, kGptStream + 0), ShardKind::rows, vocab_));
    this->params_.add(mat(w.seq, w.embd, kInitStd, kGptStream + 1));
  }
  int64_t out_per_row() const override { return this->S_ * this->C_; }
  int64_t saved_bytes(int64_t) const override { return 0; }
  double forward(int, const Micro<T>& mb, const T*, T* out) override {
    const int64_t N = mb.rows * this->S_, C = this->C_;
    const int32_t* ids = mb.batch->tokens.data() + mb.row0 * this->S_;
    this->be_.embedding_forward(ids, N, this->p(0), lookup_begin(), vocab_.count, C, out, false);
    tp_all_reduce(this->tp_, out, N * C);
    this->be_.embedding_forward(positions(N), N, this->p(1), 0, this->S_, C, out, true);
    return 0;
  }
  void backward(int, const Micro<T>& mb, const T*, T* dout, T*, bool accumulate) override {
    const int64_t N = mb.rows * this->S_, C = this->C_;
    this->start_grads(accumulate);
    const int32_t* ids = mb.batch->tokens.data() + mb.row0 * this->S_;
    this->be_.embedding_backward(ids, N, dout, lookup_begin(), vocab_.count, C, this->g(0));
    this->be_.embedding_backward(positions(N), N, dout, 0, this->S_, C, this->g(1));
  }
  void tp_comm(int64_t rows, std::vector<TpCollective>& out) const override {
    if (this->tp_on()) out.push_back({CommOp::all_reduce, 1, this->bytes(rows * this->S_ * this->C_)});
  }

 private:
  int64_t lookup_begin() const { return vocab_.begin + this->faults_.vocab_shift; }
  const int32_t* positions(int64_t n) {
    for (int64_t i = static_cast<int64_t>(pos_.size()); i < n; ++i) pos_.push_back(static_cast<int32_t>(i % this->S_));
    return pos_.data();
  }
  Split vocab_;
  std::vector<int32_t> pos_;
};

// One pre-LayerNorm transformer block.
template <class T>
class Transformer final : public GptBlock<T> {
  enum { ln1_g, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_g, ln2_b, fc_w, fc_b, fc2_w, fc2_b };

 public:
  Transformer(int64_t layer, const WorkloadSpec& w, const ModelShard& shard, Backend<T>& be, MemoryTracker& mem,
              uint64_t seed)
      : GptBlock<T>(w, shard, be, mem, seed), H_(w.heads / shard.tp_size()), D_(w.embd / w.heads),
        Cl_(w.embd / shard.tp_size()), Fl_(4 * w.embd / shard.tp_size()) {
    const int64_t C = w.embd, F = 4 * C;
    const uint64_t st = kGptStream + 16 * static_cast<uint64_t>(layer + 1);
    const double resid_std = kInitStd / std::sqrt(2.0 * static_cast<double>(w.layers));
    const Split heads = even_split(C, shard.tp_size(), shard.tp_rank());
    const Split hidden = even_split(F, shard.tp_size(), shard.tp_rank());
    auto& ps = this->params_;
    ps.add(vec(C, 1));
    ps.add(vec(C, 0));
    ps.add(sharded(mat(C, 3 * C, kInitStd, st + 2), ShardKind::qkv, heads));
    ps.add(sharded(vec(3 * C, 0), ShardKind::qkv, heads));
    ps.add(sharded(mat(C, C, resid_std, st + 4), ShardKind::rows, heads));
    ps.add(vec(C, 0));
    ps.add(vec(C, 1));
    ps.add(vec(C, 0));
    ps.add(sharded(mat(C, F, kInitStd, st + 8), ShardKind::columns, hidden));
    ps.add(sharded(vec(F, 0), ShardKind::columns, hidden));
    ps.add(sharded(mat(F, C, resid_std, st + 10), ShardKind::rows, hidden));
    ps.add(vec(C, 0));
  }
  int64_t out_per_row() const override { return this->S_ * this->C_; }
  int64_t saved_bytes(int64_t rows) const override {
    const int64_t N = rows * this->S_, C = this->C_;
    // ln1, mean1, rstd1, qkv, att, ao, x1, ln2, mean2, rstd2, h, a
    return this->bytes(N * (C + 2 + 3 * Cl_ + Cl_ + C + C + 2 + 2 * Fl_) + rows * H_ * this->S_ * this->S_);
  }

  // Backward: da [N, F/tp] and dln [N, C], then dao [N, C/tp] and dqkv [N, 3C/tp] with dln.
  int64_t workspace_bytes(int64_t rows) const override {
    const int64_t N = rows * this->S_;
    return this->bytes(N * this->C_ + N * std::max(Fl_, 4 * Cl_));
  }

  double forward(int slot, const Micro<T>& mb, const T* x, T* out) override {
    const int64_t R = mb.rows, N = R * this->S_, C = this->C_;
    Saved& s = this->slot_of(saved_, slot);
    auto& be = this->be_;
    s.ln1 = this->act({N, C}), s.mean1 = this->act({N}), s.rstd1 = this->act({N});
    be.layernorm_forward(x, this->p(ln1_g), this->p(ln1_b), s.ln1.data(), s.mean1.data(), s.rstd1.data(), N, C, kLnEps);
    s.qkv = this->act({N, 3 * Cl_});
    this->matmul(s.ln1.data(), this->p(qkv_w), s.qkv.data(), N, C, 3 * Cl_);
    be.add_bias(s.qkv.data(), this->p(qkv_b), N, 3 * Cl_);
    s.att = this->act({R, H_, this->S_, this->S_});
    s.ao = this->act({N, Cl_});
    be.attention_forward(s.qkv.data(), s.ao.data(), s.att.data(), R, this->S_, H_, D_);
    s.x1 = this->act({N, C});
    this->matmul(s.ao.data(), this->p(proj_w), s.x1.data(), N, Cl_, C);
    if (!this->faults_.skip_row_reduce) tp_all_reduce(this->tp_, s.x1.data(), N * C);  // g
    be.add_bias(s.x1.data(), this->p(proj_b), N, C);
    be.add(s.x1.data(), x, N * C);
    s.ln2 = this->act({N, C}), s.mean2 = this->act({N}), s.rstd2 = this->act({N});
    be.layernorm_forward(s.x1.data(), this->p(ln2_g), this->p(ln2_b), s.ln2.data(), s.mean2.data(), s.rstd2.data(), N,
                         C, kLnEps);
    s.h = this->act({N, Fl_}), s.a = this->act({N, Fl_});
    this->matmul(s.ln2.data(), this->p(fc_w), s.h.data(), N, C, Fl_);
    be.add_bias(s.h.data(), this->p(fc_b), N, Fl_);
    be.gelu_forward(s.h.data(), s.a.data(), N * Fl_);
    this->matmul(s.a.data(), this->p(fc2_w), out, N, Fl_, C);
    tp_all_reduce(this->tp_, out, N * C);  // g
    be.add_bias(out, this->p(fc2_b), N, C);
    be.add(out, s.x1.data(), N * C);
    return 0;
  }

  void backward(int slot, const Micro<T>& mb, const T* x, T* dout, T* din, bool accumulate) override {
    const int64_t R = mb.rows, N = R * this->S_, C = this->C_;
    Saved& s = saved_.at(slot);
    auto& be = this->be_;
    this->start_grads(accumulate);
    Tensor<T> da = this->work({N, Fl_}), dln = this->work({N, C});
    // MLP half: dout is d y; afterwards it holds d x1.
    be.bias_grad(dout, this->g(fc2_b), N, C);
    this->matmul_backward(s.a.data(), this->p(fc2_w), dout, this->g(fc2_w), da.data(), N, Fl_, C);
    be.gelu_backward(s.h.data(), da.data(), da.data(), N * Fl_);
    be.bias_grad(da.data(), this->g(fc_b), N, Fl_);
    this->matmul_backward(s.ln2.data(), this->p(fc_w), da.data(), this->g(fc_w), dln.data(), N, C, Fl_);
    tp_all_reduce(this->tp_, dln.data(), N * C);  // f
    be.layernorm_backward(s.x1.data(), this->p(ln2_g), s.mean2.data(), s.rstd2.data(), dln.data(), dout,
                          this->g(ln2_g), this->g(ln2_b), N, C);
    s.h = s.a = s.ln2 = s.mean2 = s.rstd2 = Tensor<T>();
    da = Tensor<T>();
    // Attention half.
    Tensor<T> dao = this->work({N, Cl_}), dqkv = this->work({N, 3 * Cl_});
    be.bias_grad(dout, this->g(proj_b), N, C);
    this->matmul_backward(s.ao.data(), this->p(proj_w), dout, this->g(proj_w), dao.data(), N, Cl_, C);
    be.attention_backward(s.qkv.data(), s.att.data(), dao.data(), dqkv.data(), R, this->S_, H_, D_);
    be.bias_grad(dqkv.data(), this->g(qkv_b), N, 3 * Cl_);
    this->matmul_backward(s.ln1.data(), this->p(qkv_w), dqkv.data(), this->g(qkv_w), dln.data(), N, C, 3 * Cl_);
    tp_all_reduce(this->tp_, dln.data(), N * C);  // f
    if (din) {
      std::memcpy(din, dout, N * C * sizeof(T));
      be.layernorm_backward(x, this->p(ln1_g), s.mean1.data(), s.rstd1.data(), dln.data(), din, this->g(ln1_g),
                            this->g(ln1_b), N, C);
    }
    s = Saved{};
  }

  void tp_comm(int64_t rows, std::vector<TpCollective>& out) const override {
    if (this->tp_on()) out.push_back({CommOp::all_reduce, 4, 4 * this->bytes(rows * this->S_ * this->C_)});
  }

 private:
  struct Saved {
    Tensor<T> ln1, mean1, rstd1, qkv, att, ao, x1, ln2, mean2, rstd2, h, a;
  };
  int64_t H_, D_, Cl_, Fl_;  // local heads, head dim, local width C/tp, local MLP width F/tp
  std::vector<Saved> saved_;
};

// Final LayerNorm, vocabulary-parallel LM head and cross-entropy.
template <class T>
class Head final : public GptBlock<T> {
 public:
  Head(int64_t layers, const WorkloadSpec& w, const ModelShard& shard, Backend<T>& be, MemoryTracker& mem,
       uint64_t seed)
      : GptBlock<T>(w, shard, be, mem, seed), vocab_(vocab_split(w.vocab, shard.tp_size(), shard.tp_rank())) {
    this->params_.add(vec(w.embd, 1));
    this->params_.add(vec(w.embd, 0));
    this->params_.add(sharded(mat(w.vocab, w.embd, kInitStd, kGptStream + 16 * static_cast<uint64_t>(layers + 1) + 2),
                              ShardKind::rows, vocab_));
  }
  int64_t out_per_row() const override { return 0; }
  int64_t saved_bytes(int64_t rows) const override {
    const int64_t N = rows * this->S_;
    return this->bytes(N * (this->C_ + 2 + vocab_.count));  // y, mean, rstd, dlogits
  }

  // Forward: row maxima and shifts [N] each with the gathered maxima [tp, N] or the sums
  // [2, N]; backward: dy [N, C].
  int64_t workspace_bytes(int64_t rows) const override {
    const int64_t N = rows * this->S_;
    return this->bytes(std::max(N * (2 + std::max<int64_t>(this->tp_size_, 2)), N * this->C_));
  }

  double forward(int slot, const Micro<T>& mb, const T* x, T*) override {
    const int64_t N = mb.rows * this->S_, C = this->C_, Vl = vocab_.count;
    Saved& s = this->slot_of(saved_, slot);
    auto& be = this->be_;
    s.y = this->act({N, C}), s.mean = this->act({N}), s.rstd = this->act({N});
    be.layernorm_forward(x, this->p(0), this->p(1), s.y.data(), s.mean.data(), s.rstd.data(), N, C, kLnEps);
    s.dlogits = this->act({N, Vl});
    T* logits = s.dlogits.data();  // dlogits is written over the logits
    if (Vl > 0) be.gemm(Trans::no, Trans::yes, N, Vl, C, T(1), s.y.data(), C, this->p(2), C, T(0), logits, Vl);
    // Global row maxima: every rank's maxima gathered, then the max of each column.
    Tensor<T> local_max = this->work({N}), shift = this->work({N});
    be.row_max(logits, local_max.data(), N, Vl);
    if (this->tp_on()) {
      Tensor<T> all = this->work({this->tp_size_, N});
      this->tp_->all_gather(local_max.data(), all.data(), N, dtype_of<T>());
      for (int64_t i = 0; i < N; ++i) {
        T m = all[i];
        for (int r = 1; r < this->tp_size_; ++r) m = std::max(m, all[r * N + i]);
        shift[i] = m;
      }
    } else {
      std::memcpy(shift.data(), local_max.data(), N * sizeof(T));
    }
    Tensor<T> sums = this->work({2, N});  // sum of exp, then target logit, reduced together
    const int32_t* labels = mb.batch->labels.data() + mb.row0 * this->S_;
    be.xent_partials(logits, labels, shift.data(), N, Vl, lookup_begin(), sums.data(), sums.data() + N);
    tp_all_reduce(this->tp_, sums.data(), 2 * N);
    return be.xent_finish(logits, labels, shift.data(), sums.data(), sums.data() + N, N, Vl, lookup_begin(),
                          mb.norm * static_cast<double>(this->S_), logits);
  }

  void backward(int slot, const Micro<T>& mb, const T* x, T*, T* din, bool accumulate) override {
    const int64_t N = mb.rows * this->S_, C = this->C_, Vl = vocab_.count;
    Saved& s = saved_.at(slot);
    auto& be = this->be_;
    this->start_grads(accumulate);
    Tensor<T> dy = this->work({N, C});
    if (Vl > 0) {
      be.gemm(Trans::yes, Trans::no, Vl, C, N, T(1), s.dlogits.data(), Vl, s.y.data(), C, T(1), this->g(2), C);
      be.gemm(Trans::no, Trans::no, N, C, Vl, T(1), s.dlogits.data(), Vl, this->p(2), C, T(0), dy.data(), C);
    }
    tp_all_reduce(this->tp_, dy.data(), N * C);  // f
    if (din) {
      std::memset(din, 0, N * C * sizeof(T));
      be.layernorm_backward(x, this->p(0), s.mean.data(), s.rstd.data(), dy.data(), din, this->g(0), this->g(1), N, C);
    }
    s = Saved{};
  }

  void tp_comm(int64_t rows, std::vector<TpCollective>& out) const override {
    if (!this->tp_on()) return;
    const int64_t N = rows * this->S_;
    out.push_back({CommOp::all_gather, 1, this->bytes(this->tp_size_ * N)});
    out.push_back({CommOp::all_reduce, 2, this->bytes(2 * N + N * this->C_)});
  }

 private:
  struct Saved {
    Tensor<T> y, mean, rstd, dlogits;
  };
  int64_t lookup_begin() const { return vocab_.begin + this->faults_.vocab_shift; }
  Split vocab_;
  std::vector<Saved> saved_;
};

}  // namespace

int64_t gpt_num_params(const WorkloadSpec& w) {
  const int64_t C = w.embd;
  const int64_t block = 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C + 4 * C * C + C;
  return w.vocab * C + w.seq * C + w.layers * block + 2 * C + w.vocab * C;
}

double gpt_flops_per_sample(const WorkloadSpec& w) {
  const double C = static_cast<double>(w.embd), S = static_cast<double>(w.seq), L = static_cast<double>(w.layers),
               V = static_cast<double>(w.vocab);
  // Per token: forward 2, backward 4 FLOPs per weight of qkv, proj, fc, fc2 (12 C^2 per
  // block) and the head (C V). Per sequence and block, attention's full S x S products:
  // q k^T and p v forward (4 S^2 C), four products backward (8 S^2 C).
  return S * 6.0 * (12.0 * C * C * L + C * V) + 12.0 * S * S * C * L;
}

template <class T>
std::vector<std::unique_ptr<Block<T>>> gpt_blocks(const WorkloadSpec& spec, Backend<T>& backend, MemoryTracker& mem,
                                                  uint64_t seed, const ModelShard& shard) {
  std::vector<std::unique_ptr<Block<T>>> blocks;
  blocks.push_back(std::make_unique<Embedding<T>>(spec, shard, backend, mem, seed));
  for (int64_t l = 0; l < spec.layers; ++l)
    blocks.push_back(std::make_unique<Transformer<T>>(l, spec, shard, backend, mem, seed));
  blocks.push_back(std::make_unique<Head<T>>(spec.layers, spec, shard, backend, mem, seed));
  return blocks;
}

template std::vector<std::unique_ptr<Block<float>>> gpt_blocks(const WorkloadSpec&, Backend<float>&, MemoryTracker&,
                                                               uint64_t, const ModelShard&);
template std::vector<std::unique_ptr<Block<double>>> gpt_blocks(const WorkloadSpec&, Backend<double>&, MemoryTracker&,
                                                                uint64_t, const ModelShard&);

}  // namespace pts
