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
      : be_(be), mem_(mem), seed_(seed), tp_(shard.tensor_parallel()), tp_rank_(shard.tp_rank()),
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
    if (!accumulate) be_.fill(g_, T(0), params_.numel());
  }
  bool tp_on() const { return tp_.active(); }
  void tp_sum(T* x, int64_t n) const { tp_.all_reduce(x, n, dtype_of<T>()); }
  int64_t bytes(int64_t elems) const { return elems * static_cast<int64_t>(sizeof(T)); }
  template <class S>
  S& slot_of(std::vector<S>& v, int slot) {
    if (v.size() <= static_cast<size_t>(slot)) v.resize(slot + 1);
    return v[slot];
  }

  Backend<T>& be_;
  MemoryTracker& mem_;
  uint64_t seed_;
  const TensorParallel& tp_;
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
      : GptBlock<T>(w, shard, be, mem, seed), vocab_(shard.tensor_parallel().vocab(w.vocab)) {
    this->params_.add(sharded(mat(w.vocab, w.embd, kInitStd, kGptStream + 0), ShardKind::rows, vocab_));
    this->params_.add(mat(w.seq, w.embd, kInitStd, kGptStream + 1));
  }
  int64_t out_per_row() const override { return this->S_ * this->C_; }
  int64_t saved_bytes(int64_t) const override { return 0; }
  double forward(int, const Micro<T>& mb, const T*, T* out) override {
    const int64_t N = mb.rows * this->S_, C = this->C_;
    const int32_t* ids = mb.batch->tokens.data() + mb.row0 * this->S_;
    this->be_.embedding_forward(ids, N, this->p(0), vocab_.begin, vocab_.count, C, out, false);
    this->tp_sum(out, N * C);  // partial rows: each rank looked up only its vocabulary
    this->be_.embedding_forward(positions(N), N, this->p(1), 0, this->S_, C, out, true);
    return 0;
  }
  void backward(int, const Micro<T>& mb, const T*, T* dout, T*, bool accumulate) override {
    const int64_t N = mb.rows * this->S_, C = this->C_;
    this->start_grads(accumulate);
    const int32_t* ids = mb.batch->tokens.data() + mb.row0 * this->S_;
    this->be_.embedding_backward(ids, N, dout, vocab_.begin, vocab_.count, C, this->g(0));
    this->be_.embedding_backward(positions(N), N, dout, 0, this->S_, C, this->g(1));
  }
  void tp_comm(int64_t rows, std::vector<TpCollective>& out) const override {
    if (this->tp_on()) out.push_back({CommOp::all_reduce, 1, this->bytes(rows * this->S_ * this->C_)});
  }
  // Two lookups forward, two scatter-adds backward, of N x C each.
  void compute(int64_t rows, ComputeWork& out) const override {
    out.elementwise += 4.0 * static_cast<double>(rows * this->S_ * this->C_);
  }

 private:
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
        Cl_(w.embd / shard.tp_size()), Fl_(4 * w.embd / shard.tp_size()),
        qkv_(TpKind::column, w.embd, 3 * Cl_, shard.tensor_parallel(), be),
        proj_(TpKind::row, Cl_, w.embd, shard.tensor_parallel(), be),
        fc_(TpKind::column, w.embd, Fl_, shard.tensor_parallel(), be),
        fc2_(TpKind::row, Fl_, w.embd, shard.tensor_parallel(), be) {
    const int64_t C = w.embd, F = 4 * C;
    const uint64_t st = kGptStream + 16 * static_cast<uint64_t>(layer + 1);
    const double resid_std = kInitStd / std::sqrt(2.0 * static_cast<double>(w.layers));
    const Split heads = shard.tensor_parallel().even(C);
    const Split hidden = shard.tensor_parallel().even(F);
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
    qkv_.forward(s.ln1.data(), this->p(qkv_w), this->p(qkv_b), s.qkv.data(), N);
    s.att = this->act({R, H_, this->S_, this->S_});
    s.ao = this->act({N, Cl_});
    be.attention_forward(s.qkv.data(), s.ao.data(), s.att.data(), R, this->S_, H_, D_);
    s.x1 = this->act({N, C});
    proj_.forward(s.ao.data(), this->p(proj_w), this->p(proj_b), s.x1.data(), N);
    be.add(s.x1.data(), x, N * C);
    s.ln2 = this->act({N, C}), s.mean2 = this->act({N}), s.rstd2 = this->act({N});
    be.layernorm_forward(s.x1.data(), this->p(ln2_g), this->p(ln2_b), s.ln2.data(), s.mean2.data(), s.rstd2.data(), N,
                         C, kLnEps);
    s.h = this->act({N, Fl_}), s.a = this->act({N, Fl_});
    fc_.forward(s.ln2.data(), this->p(fc_w), this->p(fc_b), s.h.data(), N);
    be.gelu_forward(s.h.data(), s.a.data(), N * Fl_);
    fc2_.forward(s.a.data(), this->p(fc2_w), this->p(fc2_b), out, N);
    be.add(out, s.x1.data(), N * C);
    return 0;
  }

  void backward(int slot, const Micro<T>& mb, const T* x, T* dout, T* din, bool accumulate) override {
    backward_split(slot, mb, x, dout, din, accumulate, nullptr);
  }
  // Split: the four linears' weight gradients go to `later` with their inputs (held in the
  // saved state) and output gradients (fc2's and proj's copied, fc's and qkv's kept); the
  // layernorms' gradients stay in the input pass.
  void backward_input(int slot, const Micro<T>& mb, const T* x, T* dout, T* din, bool accumulate,
                      DeferredGrads& later) override {
    backward_split(slot, mb, x, dout, din, accumulate, &later);
  }
  int64_t deferred_bytes(int64_t rows) const override {
    const int64_t N = rows * this->S_;
    return this->bytes(N * (2 * this->C_ + Fl_ + 3 * Cl_));
  }

  void tp_comm(int64_t rows, std::vector<TpCollective>& out) const override {
    const int64_t N = rows * this->S_;
    for (const TpLinear<T>* l : {&qkv_, &proj_, &fc_, &fc2_}) l->collectives(N, true, out);
  }
  // The four linear layers; attention per (row, local head): q k^T and p v forward, four
  // products backward; layernorms, gelu, residual adds and the causal softmax.
  void compute(int64_t rows, ComputeWork& out) const override {
    const int64_t N = rows * this->S_, S = this->S_, C = this->C_, RH = rows * H_;
    for (const TpLinear<T>* l : {&qkv_, &proj_, &fc_, &fc2_}) l->work(N, true, out);
    out.gemm(S, S, D_, 2 * RH);  // q k^T; backward dP = dO V^T
    out.gemm(S, D_, S, 4 * RH);  // p v; backward dV = P^T dO, dQ = dS K, dK = dS^T Q
    out.elementwise += static_cast<double>(N) * (12.0 * C + 6.0 * Fl_) + 4.0 * static_cast<double>(RH * S * S);
  }

 private:
  struct Saved {
    Tensor<T> ln1, mean1, rstd1, qkv, att, ao, x1, ln2, mean2, rstd2, h, a;
  };
  // The backward, whole (later null) or split. Gradients start from zero (start_grads), so
  // the layers accumulate.
  void backward_split(int slot, const Micro<T>& mb, const T* x, T* dout, T* din, bool accumulate,
                      DeferredGrads* later) {
    const int64_t R = mb.rows, N = R * this->S_, C = this->C_;
    Saved& s = saved_.at(slot);
    auto& be = this->be_;
    this->start_grads(accumulate);
    // A linear's backward now, or its input gradient now and its weight gradient later
    // (dy_keep: a tensor holding dy until then; empty: copy dy, which is scratch).
    auto linear = [&](const TpLinear<T>& l, int w, int b, const T* in, const T* dy, T* dx, Tensor<T> dy_keep) {
      if (!later) return l.backward(in, this->p(w), dy, this->g(w), this->g(b), dx, N, true);
      if (dy_keep.empty()) {
        dy_keep = this->act({N, l.out()});
        be.copy(dy_keep.data(), dy, N * l.out());
      }
      const T* kept = dy_keep.data();
      later->add([this, &l, w, b, in, kept, N] { l.weight_grad(in, kept, this->g(w), this->g(b), N, true); });
      later->hold(std::move(dy_keep));
      l.input_grad(this->p(w), dy, dx, N);
    };
    auto scratch = [&](Shape sh) { return later ? this->act(std::move(sh)) : this->work(std::move(sh)); };
    Tensor<T> da = scratch({N, Fl_}), dln = this->work({N, C});
    // MLP half: dout is d y; afterwards it holds d x1.
    linear(fc2_, fc2_w, fc2_b, s.a.data(), dout, da.data(), {});
    be.gelu_backward(s.h.data(), da.data(), da.data(), N * Fl_);
    linear(fc_, fc_w, fc_b, s.ln2.data(), da.data(), dln.data(), da);
    be.layernorm_backward(s.x1.data(), this->p(ln2_g), s.mean2.data(), s.rstd2.data(), dln.data(), dout,
                          this->g(ln2_g), this->g(ln2_b), N, C);
    if (!later) s.h = s.a = s.ln2 = s.mean2 = s.rstd2 = Tensor<T>();
    da = Tensor<T>();
    // Attention half.
    Tensor<T> dao = this->work({N, Cl_}), dqkv = scratch({N, 3 * Cl_});
    linear(proj_, proj_w, proj_b, s.ao.data(), dout, dao.data(), {});
    be.attention_backward(s.qkv.data(), s.att.data(), dao.data(), dqkv.data(), R, this->S_, H_, D_);
    linear(qkv_, qkv_w, qkv_b, s.ln1.data(), dqkv.data(), dln.data(), dqkv);
    if (din) {
      be.copy(din, dout, N * C);
      be.layernorm_backward(x, this->p(ln1_g), s.mean1.data(), s.rstd1.data(), dln.data(), din, this->g(ln1_g),
                            this->g(ln1_b), N, C);
    }
    if (later) later->hold(std::move(s));
    s = Saved{};
  }
  int64_t H_, D_, Cl_, Fl_;  // local heads, head dim, local width C/tp, local MLP width F/tp
  TpLinear<T> qkv_, proj_, fc_, fc2_;
  std::vector<Saved> saved_;
};

// Final LayerNorm, vocabulary-parallel LM head and cross-entropy.
template <class T>
class Head final : public GptBlock<T> {
 public:
  Head(int64_t layers, const WorkloadSpec& w, const ModelShard& shard, Backend<T>& be, MemoryTracker& mem,
       uint64_t seed)
      : GptBlock<T>(w, shard, be, mem, seed), vocab_(shard.tensor_parallel().vocab(w.vocab)) {
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
      this->tp_.all_gather(local_max.data(), all.data(), N, dtype_of<T>());
      be.max_over_parts(all.data(), this->tp_size_, N, shift.data());
    } else {
      be.copy(shift.data(), local_max.data(), N);
    }
    Tensor<T> sums = this->work({2, N});  // sum of exp, then target logit, reduced together
    const int32_t* labels = mb.batch->labels.data() + mb.row0 * this->S_;
    be.xent_partials(logits, labels, shift.data(), N, Vl, vocab_.begin, sums.data(), sums.data() + N);
    this->tp_sum(sums.data(), 2 * N);
    return be.xent_finish(logits, labels, shift.data(), sums.data(), sums.data() + N, N, Vl, vocab_.begin,
                          mb.norm * static_cast<double>(this->S_), logits);
  }

  void backward(int slot, const Micro<T>& mb, const T* x, T*, T* din, bool accumulate) override {
    backward_split(slot, mb, x, din, accumulate, nullptr);
  }
  // Split: the head's weight gradient (dlogits^T y, both saved) goes to `later`.
  void backward_input(int slot, const Micro<T>& mb, const T* x, T*, T* din, bool accumulate,
                      DeferredGrads& later) override {
    backward_split(slot, mb, x, din, accumulate, &later);
  }

 private:
  void backward_split(int slot, const Micro<T>& mb, const T* x, T* din, bool accumulate, DeferredGrads* later) {
    const int64_t N = mb.rows * this->S_, C = this->C_, Vl = vocab_.count;
    Saved& s = saved_.at(slot);
    auto& be = this->be_;
    this->start_grads(accumulate);
    Tensor<T> dy = this->work({N, C});
    if (Vl > 0) {
      auto weight = [this, N, C, Vl, dl = s.dlogits.data(), y = s.y.data()] {
        this->be_.gemm(Trans::yes, Trans::no, Vl, C, N, T(1), dl, Vl, y, C, T(1), this->g(2), C);
      };
      if (later) later->add(weight);
      else weight();
      be.gemm(Trans::no, Trans::no, N, C, Vl, T(1), s.dlogits.data(), Vl, this->p(2), C, T(0), dy.data(), C);
    }
    this->tp_.reduce_column_input_grad(dy.data(), N * C, dtype_of<T>());  // f: the head is column-parallel over V
    if (din) {
      be.fill(din, T(0), N * C);
      be.layernorm_backward(x, this->p(0), s.mean.data(), s.rstd.data(), dy.data(), din, this->g(0), this->g(1), N, C);
    }
    if (later) later->hold(std::move(s));
    s = Saved{};
  }

 public:

  // The head's gemm forward, its two gemms backward; layernorm and the cross-entropy.
  void compute(int64_t rows, ComputeWork& out) const override {
    const int64_t N = rows * this->S_, Vl = vocab_.count;
    out.gemm(N, Vl, this->C_, 3);
    out.elementwise += static_cast<double>(N) * (6.0 * this->C_ + 4.0 * Vl);
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
  Split vocab_;
  std::vector<Saved> saved_;
};


// Embedding, L transformer blocks, final LayerNorm + untied LM head; next-token loss.
class GptKind final : public KindWithBlocks<GptKind> {
 public:
  std::string name() const override { return "gpt"; }
  int64_t num_params(const WorkloadSpec& w) const override {
    const int64_t C = w.embd;
    const int64_t block = 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C + 4 * C * C + C;
    return w.vocab * C + w.seq * C + w.layers * block + 2 * C + w.vocab * C;
  }
  // Per token: forward 2, backward 4 FLOPs per weight of qkv, proj, fc, fc2 (12 C^2 per
  // block) and the head (C V). Per sequence and block, attention's full S x S products:
  // q k^T and p v forward (4 S^2 C), four products backward (8 S^2 C).
  double flops_per_sample(const WorkloadSpec& w) const override {
    const double C = static_cast<double>(w.embd), S = static_cast<double>(w.seq), L = static_cast<double>(w.layers),
                 V = static_cast<double>(w.vocab);
    return S * 6.0 * (12.0 * C * C * L + C * V) + 12.0 * S * S * C * L;
  }
  int64_t positions(const WorkloadSpec& w) const override { return w.seq; }
  int64_t layers(const WorkloadSpec& w) const override { return w.layers; }
  int lead_blocks() const override { return 1; }
  // The embedding and the head may each be a stage of their own.
  int64_t max_stages(const WorkloadSpec& w) const override { return w.layers + 2; }
  std::string tp_problem(const WorkloadSpec& w, int tp) const override {
    if (w.heads % tp == 0) return "";
    return "tp " + std::to_string(tp) + " does not divide " + w.name + "'s " + std::to_string(w.heads) +
           " heads; choose a divisor of " + std::to_string(w.heads);
  }
  bool reads_tokens() const override { return true; }
  // GPT-2's published counts tie the head to wte; ours is untied and counted.
  std::string note(const WorkloadSpec& w) const override {
    return "untied head " + std::to_string(w.vocab * w.embd) + " of them";
  }
  template <class T>
  static std::vector<std::unique_ptr<Block<T>>> make_blocks(const WorkloadSpec& w, Backend<T>& be, MemoryTracker& mem,
                                                            uint64_t seed, const ModelShard& shard) {
    std::vector<std::unique_ptr<Block<T>>> blocks;
    blocks.push_back(std::make_unique<Embedding<T>>(w, shard, be, mem, seed));
    for (int64_t l = 0; l < w.layers; ++l)
      blocks.push_back(std::make_unique<Transformer<T>>(l, w, shard, be, mem, seed));
    blocks.push_back(std::make_unique<Head<T>>(w.layers, w, shard, be, mem, seed));
    return blocks;
  }
};

}  // namespace

const WorkloadKind& gpt_kind() { return singleton<GptKind>(); }

}  // namespace pts
