#include "workloads/gpt.hpp"

#include <cmath>
#include <cstring>
#include <algorithm>
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
      : be_(be), mem_(mem), seed_(seed), tp_(shard.tensor_parallel()), cp_(shard.context_parallel()),
        ep_(shard.expert_parallel()), tp_rank_(shard.tp_rank()), tp_size_(shard.tp_size()), S_(cp_.local_tokens(w.seq)), seq_(w.seq), C_(w.embd) {}
  int64_t numel() const override { return params_.numel(); }
  int64_t canonical_numel() const override { return params_.canonical_numel(); }
  void bind(T* p, T* g) override {
    if (p) p_ = p;
    if (g) g_ = g;
  }
  void init(int64_t begin, int64_t end, T* out) const override { params_.init(seed_, begin, end, out); }
  void segments(int64_t local, int64_t canonical, std::vector<Segment>& out) const override {
    params_.segments(local, canonical, tp_rank_ == 0, out, ep_.rank() == 0);
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

  // The tokens of `all` (token ids or labels, [rows, seq] per batch) this rank computes for
  // microbatch mb: its rows, and under context parallelism only its positions (gathered into
  // `buf`).
  const int32_t* local_tokens(const std::vector<int32_t>& all, const Micro<T>& mb, std::vector<int32_t>& buf) const {
    const int32_t* rows = all.data() + mb.row0 * seq_;
    if (!cp_.active()) return rows;
    cp_.gather(rows, mb.rows, seq_, buf);
    return buf.data();
  }

  // The attention half of a pre-LayerNorm block (the GPT's and the MoE's), with its
  // parameters first: x1 = x + proj(attn(ln1(x))), and ln2(x1) for the block's second half.
  enum { ln1_g, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_g, ln2_b, attention_params };
  struct AttentionSaved {
    Tensor<T> ln1, mean1, rstd1, qkv, att, ao, x1, ln2, mean2, rstd2;
  };
  void attention_forward(const TpLinear<T>& qkv, const TpLinear<T>& proj, int64_t heads, int64_t rows, const T* x,
                         AttentionSaved& s) {
    const int64_t N = rows * S_, C = C_, width = proj.in(), D = width / heads;
    s.ln1 = act({N, C}), s.mean1 = act({N}), s.rstd1 = act({N});
    be_.layernorm_forward(x, p(ln1_g), p(ln1_b), s.ln1.data(), s.mean1.data(), s.rstd1.data(), N, C, kLnEps);
    s.qkv = act({N, 3 * width});
    qkv.forward(s.ln1.data(), p(qkv_w), p(qkv_b), s.qkv.data(), N);
    s.att = act({rows, heads, S_, seq_});  // the local queries' rows of the [S, S] probabilities
    s.ao = act({N, width});
    if (cp_.active()) ring_attention_forward(s.qkv.data(), s.ao.data(), s.att.data(), rows, heads, D);
    else be_.attention_forward(s.qkv.data(), s.ao.data(), s.att.data(), rows, S_, heads, D);
    s.x1 = act({N, C});
    proj.forward(s.ao.data(), p(proj_w), p(proj_b), s.x1.data(), N);
    be_.add(s.x1.data(), x, N * C);
    s.ln2 = act({N, C}), s.mean2 = act({N}), s.rstd2 = act({N});
    be_.layernorm_forward(s.x1.data(), p(ln2_g), p(ln2_b), s.ln2.data(), s.mean2.data(), s.rstd2.data(), N, C, kLnEps);
  }
  // dqkv [N, 3 width] from the attention output's gradient dao [N, width].
  void attention_core_backward(const AttentionSaved& s, const T* dao, T* dqkv, int64_t rows, int64_t heads,
                               int64_t D) {
    if (cp_.active()) ring_attention_backward(s, dao, dqkv, rows, heads, D);
    else be_.attention_backward(s.qkv.data(), s.att.data(), dao, dqkv, rows, S_, heads, D);
  }
  // Context parallelism's attention transfers per microbatch of `rows` rows with `width` local
  // q/k/v columns (context_parallel.hpp): 3 cp - 2 sends and receives of a block.
  void ring_comm(int64_t rows, int64_t width, std::vector<TpCollective>& out) const {
    if (!cp_.active()) return;
    const int64_t n = 3 * cp_.size() - 2, block = bytes(rows * S_ * 2 * width);
    out.push_back({CommOp::send, n, n * block, "cp"});
    out.push_back({CommOp::recv, n, n * block, "cp"});
  }
  // The ring's workspace beyond the block's own: forward every rank's keys and values
  // [rows, S, 2 width] and two ring buffers; backward two ring buffers of keys and values and
  // two of their gradients, one [c, c] gradient block per (row, head) and the row dots.
  int64_t ring_workspace_bytes(int64_t rows, int64_t heads, int64_t width) const {
    if (!cp_.active()) return 0;
    const int64_t block = rows * S_ * 2 * width, c = S_ / 2;
    return bytes(std::max(rows * seq_ * 2 * width + 2 * block, 4 * block + rows * heads * (c * c + S_)));
  }
  // The input gradient through ln1 and the residual: din = dout + ln1'(dln).
  void attention_input_grad(const T* x, const AttentionSaved& s, const T* dout, const T* dln, T* din, int64_t N) {
    if (!din) return;
    be_.copy(din, dout, N * C_);
    be_.layernorm_backward(x, p(ln1_g), s.mean1.data(), s.rstd1.data(), dln, din, g(ln1_g), g(ln1_b), N, C_);
  }

  Backend<T>& be_;
  MemoryTracker& mem_;
  uint64_t seed_;
  const TensorParallel& tp_;
  const ContextParallel& cp_;
  const ExpertParallel& ep_;
  int tp_rank_, tp_size_;
  int64_t S_, seq_, C_;  // tokens per sequence this rank computes (seq / cp), the sequence length, width

 private:
  enum { kKvTag = 1, kKvGradTag = 2 };
  // Per (row, head) and local query chunk qa (0, 1) the [c, S] rows of att sit at
  // att + (((qa * R + r) * H + h) * c) * S (chunk-major, so one chunk's rows are contiguous);
  // a rank's keys and values travel as [R, S/cp, 2 width] (each token's k and v columns).
  void pack_kv(const T* qkv, T* kv, int64_t tokens, int64_t width) {
    for (int64_t t = 0; t < tokens; ++t) be_.copy(kv + t * 2 * width, qkv + t * 3 * width + width, 2 * width);
  }
  template <class P>
  P* att_rows(P* att, int qa, int64_t r, int64_t h, int64_t R, int64_t H) const {
    const int64_t c = S_ / 2;
    return att + (((qa * R + r) * H + h) * c) * seq_;
  }
  // Scores of the local queries against each rank's keys as the ring brings them (blocks
  // wholly above the diagonal skipped), then the causal softmax of whole rows and out = P V over
  // the keys gathered meanwhile.
  void ring_attention_forward(const T* qkv, T* out, T* att, int64_t R, int64_t H, int64_t D) {
    const int64_t w = H * D, Sl = S_, S = seq_, c = Sl / 2, block = R * Sl * 2 * w;
    const int cp = cp_.size(), me = cp_.rank();
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(D)));
    Tensor<T> all = work({R, S, 2 * w});
    Tensor<T> ring[2] = {work({R, Sl, 2 * w}), work({R, Sl, 2 * w})};
    pack_kv(qkv, ring[0].data(), R * Sl, w);
    for (int step = 0; step < cp; ++step) {
      const T* kv = ring[step % 2].data();
      std::vector<RequestPtr> pending;
      if (step + 1 < cp) pending = cp_.shift(kv, ring[(step + 1) % 2].data(), block, dtype_of<T>(), kKvTag);
      const int owner = cp_.owner_at(step);
      for (int kb = 0; kb < 2; ++kb) {
        const int gk = cp_.chunk_of(owner, kb);
        for (int64_t r = 0; r < R; ++r)
          be_.copy(all.data() + (r * S + gk * c) * 2 * w, kv + (r * Sl + kb * c) * 2 * w, c * 2 * w);
        for (int qa = 0; qa < 2; ++qa) {
          if (gk > cp_.chunk_of(me, qa)) continue;  // every key after every query
          for (int64_t r = 0; r < R; ++r)
            for (int64_t h = 0; h < H; ++h)
              be_.gemm(Trans::no, Trans::yes, c, c, D, scale, qkv + (r * Sl + qa * c) * 3 * w + h * D, 3 * w,
                       kv + (r * Sl + kb * c) * 2 * w + h * D, 2 * w, T(0), att_rows(att, qa, r, h, R, H) + gk * c, S);
        }
      }
      for (auto& q : pending) q->wait();
    }
    for (int qa = 0; qa < 2; ++qa) {
      const int64_t gq = cp_.chunk_of(me, qa), keys = (gq + 1) * c;
      be_.causal_softmax(att_rows(att, qa, 0, 0, R, H), R * H * c, S, c, gq * c);
      for (int64_t r = 0; r < R; ++r)
        for (int64_t h = 0; h < H; ++h)
          be_.gemm(Trans::no, Trans::no, c, D, keys, T(1), att_rows(att, qa, r, h, R, H), S,
                   all.data() + r * S * 2 * w + w + h * D, 2 * w, T(0), out + (r * Sl + qa * c) * w + h * D, w);
    }
  }
  // The ring again: with the block of keys and values in hand, dP = dO V^T, dS = P (dP - D)
  // with D = rowsum(dO O) (the row's dot over every block, known before any arrives), then
  // dQ += scale dS K here and dK += scale dS^T Q, dV += P^T dO into the gradient that travels
  // with the block; after cp steps one more hop brings each block's gradient home.
  void ring_attention_backward(const AttentionSaved& s, const T* dao, T* dqkv, int64_t R, int64_t H, int64_t D) {
    const int64_t w = H * D, Sl = S_, S = seq_, c = Sl / 2, block = R * Sl * 2 * w;
    const int cp = cp_.size(), me = cp_.rank();
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(D)));
    const T* qkv = s.qkv.data();
    const T* att = s.att.data();
    Tensor<T> dot = work({2, R, H, c});
    for (int qa = 0; qa < 2; ++qa)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t h = 0; h < H; ++h) {
          const int64_t at = (r * Sl + qa * c) * w + h * D;
          be_.row_dot(dao + at, w, s.ao.data() + at, w, c, D, dot.data() + ((qa * R + r) * H + h) * c);
        }
    be_.fill(dqkv, T(0), R * Sl * 3 * w);
    Tensor<T> kv[2] = {work({R, Sl, 2 * w}), work({R, Sl, 2 * w})};
    Tensor<T> dkv[2] = {work({R, Sl, 2 * w}), work({R, Sl, 2 * w})};
    Tensor<T> ds = work({R, H, c, c});
    pack_kv(qkv, kv[0].data(), R * Sl, w);
    be_.fill(dkv[0].data(), T(0), block);
    std::vector<RequestPtr> grad_pending;
    for (int step = 0; step < cp; ++step) {
      const T* k = kv[step % 2].data();
      std::vector<RequestPtr> pending;
      if (step + 1 < cp) pending = cp_.shift(k, kv[(step + 1) % 2].data(), block, dtype_of<T>(), kKvTag);
      for (auto& q : grad_pending) q->wait();  // the block's gradient so far has arrived
      T* acc = dkv[step % 2].data();
      const int owner = cp_.owner_at(step);
      for (int qa = 0; qa < 2; ++qa)
        for (int kb = 0; kb < 2; ++kb) {
          const int gq = cp_.chunk_of(me, qa), gk = cp_.chunk_of(owner, kb);
          if (gk > gq) continue;
          for (int64_t r = 0; r < R; ++r)
            for (int64_t h = 0; h < H; ++h)
              be_.gemm(Trans::no, Trans::yes, c, c, D, T(1), dao + (r * Sl + qa * c) * w + h * D, w,
                       k + (r * Sl + kb * c) * 2 * w + w + h * D, 2 * w, T(0), ds.data() + (r * H + h) * c * c, c);
          be_.softmax_backward(att_rows(att, qa, 0, 0, R, H) + gk * c, S, ds.data(), c,
                               dot.data() + qa * R * H * c, R * H * c, c, gk == gq ? c : 0, 0);
          for (int64_t r = 0; r < R; ++r)
            for (int64_t h = 0; h < H; ++h) {
              const T* dsb = ds.data() + (r * H + h) * c * c;
              const T* p = att_rows(att, qa, r, h, R, H) + gk * c;
              const int64_t q_at = (r * Sl + qa * c), k_at = (r * Sl + kb * c);
              be_.gemm(Trans::no, Trans::no, c, D, c, scale, dsb, c, k + k_at * 2 * w + h * D, 2 * w, T(1),
                       dqkv + q_at * 3 * w + h * D, 3 * w);
              be_.gemm(Trans::yes, Trans::no, c, D, c, scale, dsb, c, qkv + q_at * 3 * w + h * D, 3 * w, T(1),
                       acc + k_at * 2 * w + h * D, 2 * w);
              be_.gemm(Trans::yes, Trans::no, c, D, c, T(1), p, S, dao + q_at * w + h * D, w, T(1),
                       acc + k_at * 2 * w + w + h * D, 2 * w);
            }
        }
      grad_pending = cp_.shift(acc, dkv[(step + 1) % 2].data(), block, dtype_of<T>(), kKvGradTag);
      for (auto& q : pending) q->wait();
    }
    for (auto& q : grad_pending) q->wait();
    const T* home = dkv[cp % 2].data();  // this rank's own keys' and values' gradient
    for (int64_t t = 0; t < R * Sl; ++t) be_.add(dqkv + t * 3 * w + w, home + t * 2 * w, 2 * w);
  }

 protected:
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
    const int32_t* ids = this->local_tokens(mb.batch->tokens, mb, ids_);
    this->be_.embedding_forward(ids, N, this->p(0), vocab_.begin, vocab_.count, C, out, false);
    this->tp_sum(out, N * C);  // partial rows: each rank looked up only its vocabulary
    this->be_.embedding_forward(positions(N), N, this->p(1), 0, this->seq_, C, out, true);
    return 0;
  }
  void backward(int, const Micro<T>& mb, const T*, T* dout, T*, bool accumulate) override {
    const int64_t N = mb.rows * this->S_, C = this->C_;
    this->start_grads(accumulate);
    const int32_t* ids = this->local_tokens(mb.batch->tokens, mb, ids_);
    this->be_.embedding_backward(ids, N, dout, vocab_.begin, vocab_.count, C, this->g(0));
    this->be_.embedding_backward(positions(N), N, dout, 0, this->seq_, C, this->g(1));
  }
  void tp_comm(int64_t rows, std::vector<TpCollective>& out) const override {
    if (this->tp_on()) out.push_back({CommOp::all_reduce, 1, this->bytes(rows * this->S_ * this->C_)});
  }
  // Two lookups forward, two scatter-adds backward, of N x C each.
  void compute(int64_t rows, ComputeWork& out) const override {
    out.elementwise += 4.0 * static_cast<double>(rows * this->S_ * this->C_);
  }

 private:
  // The position of each of n local tokens (rows of S_ tokens).
  const int32_t* positions(int64_t n) {
    for (int64_t i = static_cast<int64_t>(pos_.size()); i < n; ++i)
      pos_.push_back(static_cast<int32_t>(this->cp_.position(i % this->S_, this->seq_)));
    return pos_.data();
  }
  Split vocab_;
  std::vector<int32_t> pos_, ids_;
};

// One pre-LayerNorm transformer block.
template <class T>
class Transformer final : public GptBlock<T> {
  using GptBlock<T>::ln1_g, GptBlock<T>::ln1_b, GptBlock<T>::qkv_w, GptBlock<T>::qkv_b, GptBlock<T>::proj_w,
      GptBlock<T>::proj_b, GptBlock<T>::ln2_g, GptBlock<T>::ln2_b;
  enum { fc_w = GptBlock<T>::attention_params, fc_b, fc2_w, fc2_b };

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
    return this->bytes(N * (C + 2 + 3 * Cl_ + Cl_ + C + C + 2 + 2 * Fl_) + rows * H_ * this->S_ * this->seq_);
  }

  // Backward: da [N, F/tp] and dln [N, C], then dao [N, C/tp] and dqkv [N, 3C/tp] with dln;
  // under context parallelism the ring's buffers on top.
  int64_t workspace_bytes(int64_t rows) const override {
    const int64_t N = rows * this->S_;
    return this->bytes(N * this->C_ + N * std::max(Fl_, 4 * Cl_)) + this->ring_workspace_bytes(rows, H_, Cl_);
  }

  double forward(int slot, const Micro<T>& mb, const T* x, T* out) override {
    const int64_t R = mb.rows, N = R * this->S_, C = this->C_;
    Saved& s = this->slot_of(saved_, slot);
    auto& be = this->be_;
    this->attention_forward(qkv_, proj_, H_, R, x, s);
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
    this->ring_comm(rows, Cl_, out);
  }
  // The four linear layers; attention per (row, local head): q k^T and p v forward, four
  // products backward (the local queries against all S keys); layernorms, gelu, residual adds
  // and the causal softmax.
  void compute(int64_t rows, ComputeWork& out) const override {
    const int64_t N = rows * this->S_, Sq = this->S_, S = this->seq_, C = this->C_, RH = rows * H_;
    for (const TpLinear<T>* l : {&qkv_, &proj_, &fc_, &fc2_}) l->work(N, true, out);
    out.gemm(Sq, S, D_, 2 * RH);  // q k^T; backward dP = dO V^T
    out.gemm(Sq, D_, S, 4 * RH);  // p v; backward dV = P^T dO, dQ = dS K, dK = dS^T Q
    out.elementwise += static_cast<double>(N) * (12.0 * C + 6.0 * Fl_) + 4.0 * static_cast<double>(RH * Sq * S);
  }

 private:
  struct Saved : GptBlock<T>::AttentionSaved {
    Tensor<T> h, a;
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
    this->attention_core_backward(s, dao.data(), dqkv.data(), R, H_, D_);
    linear(qkv_, qkv_w, qkv_b, s.ln1.data(), dqkv.data(), dln.data(), dqkv);
    this->attention_input_grad(x, s, dout, dln.data(), din, N);
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
    const int32_t* labels = this->local_tokens(mb.batch->labels, mb, labels_);
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
  std::vector<int32_t> labels_;
  std::vector<Saved> saved_;
};


MoeRoutingTap& routing_tap() {
  static MoeRoutingTap tap;
  return tap;
}

// A pre-LayerNorm block whose MLP is E expert MLPs (each fc [C,F] + gelu + fc2 [F,C]) behind a
// top-k router (Switch / GShard style):
//   x1 = x + proj(attn(ln1(x)))                   as the GPT block
//   y  = x1 + sum over kept (t, e) of g[t,e] * expert_e(ln2(x1)[t])
// Router: logits [N,E] = ln2(x1) Wr (Wr [C,E], no bias); each token's k largest logits (ties
// to the lower expert index); gates g = softmax over those k logits. Capacity: an expert takes
// cap = ceil(capacity_factor * S * k / E) tokens of each sequence; a sequence's tokens claim
// their experts in token order, and an assignment beyond cap is dropped (adds nothing; the
// token's residual x1 passes through; the kept gates are not renormalised). The capacity group
// is one sequence, so microbatching and data parallelism never change which tokens drop.
// Expert e runs on a buffer of R*cap rows (sequence r's slots at r*cap), empty slots zero, so
// activations and gemms do not depend on the routing: saved bytes are exact. Under expert
// parallelism (expert_parallel.hpp) only filled slots travel: the rows go out packed by
// destination rank and its local expert, each expert runs on the rows it received (source
// rank by rank, in slot order), and its buffers are sized for the most it can receive (every
// rank's every slot), so saved bytes stay exact there too.
// Routing decisions are host data (like token ids): the router logits are downloaded, and the
// gather and scatter of rows use the backend's embedding lookup and scatter-add.
template <class T>
class MoeTransformer final : public GptBlock<T> {
  using GptBlock<T>::ln1_g, GptBlock<T>::ln1_b, GptBlock<T>::qkv_w, GptBlock<T>::qkv_b, GptBlock<T>::proj_w,
      GptBlock<T>::proj_b, GptBlock<T>::ln2_g, GptBlock<T>::ln2_b;
  enum { router_w = GptBlock<T>::attention_params, expert0 };
  enum { fc_w, fc_b, fc2_w, fc2_b, per_expert };

 public:
  MoeTransformer(int64_t layer, const WorkloadSpec& w, const ModelShard& shard, Backend<T>& be, MemoryTracker& mem,
                 uint64_t seed)
      : GptBlock<T>(w, shard, be, mem, seed), H_(w.heads / shard.tp_size()), D_(w.embd / w.heads),
        F_(4 * w.embd / shard.tp_size()), Cl_(w.embd / shard.tp_size()), E_(w.experts), K_(w.top_k),
        cap_(moe_capacity(w)), aux_(w.aux_loss), qkv_(TpKind::column, w.embd, 3 * Cl_, shard.tensor_parallel(), be),
        proj_(TpKind::row, Cl_, w.embd, shard.tensor_parallel(), be),
        fc_(TpKind::column, w.embd, F_, shard.tensor_parallel(), be),
        fc2_(TpKind::row, F_, w.embd, shard.tensor_parallel(), be) {
    const int64_t C = w.embd, F = 4 * C;
    const uint64_t st = kGptStream + 16 * static_cast<uint64_t>(layer + 1);
    const uint64_t ex = kMoeStream + 256 * static_cast<uint64_t>(layer);
    const double resid_std = kInitStd / std::sqrt(2.0 * static_cast<double>(w.layers));
    // Tensor parallelism as the GPT block's: heads split, each expert's up-projection by
    // columns and down-projection by rows (the router is replicated).
    const Split heads = shard.tensor_parallel().even(C), hidden = shard.tensor_parallel().even(F);
    auto& ps = this->params_;
    ps.add(vec(C, 1));
    ps.add(vec(C, 0));
    ps.add(sharded(mat(C, 3 * C, kInitStd, st + 2), ShardKind::qkv, heads));
    ps.add(sharded(vec(3 * C, 0), ShardKind::qkv, heads));
    ps.add(sharded(mat(C, C, resid_std, st + 4), ShardKind::rows, heads));
    ps.add(vec(C, 0));
    ps.add(vec(C, 1));
    ps.add(vec(C, 0));
    ps.add(mat(C, E_, kInitStd, st + 8));
    // Rank r of ep holds experts r E/ep .. (r+1) E/ep - 1 (the others' tensors are absent).
    const ExpertParallel& ep = this->ep_;
    const int64_t El = ep.local_experts(E_);
    for (int64_t e = 0; e < E_; ++e) {
      const auto place = !ep.active() ? ParamTensor::Ep::replicated
                         : e / El == ep.rank() ? ParamTensor::Ep::mine
                                               : ParamTensor::Ep::absent;
      for (ParamTensor t : {sharded(mat(C, F, kInitStd, ex + 2 * e), ShardKind::columns, hidden),
                            sharded(vec(F, 0), ShardKind::columns, hidden),
                            sharded(mat(F, C, resid_std, ex + 2 * e + 1), ShardKind::rows, hidden), vec(C, 0)}) {
        t.ep = place;
        ps.add(t);
      }
    }
  }
  int64_t out_per_row() const override { return this->S_ * this->C_; }
  int64_t saved_bytes(int64_t rows) const override {
    const int64_t N = rows * this->S_, C = this->C_, slots = rows * cap_;
    // ln1, mean1, rstd1, qkv, att, ao, x1, ln2, mean2, rstd2; per expert xe, h, a, ye
    // (under expert parallelism the local experts' buffers hold ep * slots rows each, as many,
    // and the outputs that came back [E * slots, C] on top)
    return this->bytes(N * (C + 2 + 3 * Cl_ + Cl_ + C + C + 2) + rows * H_ * this->S_ * this->seq_ +
                       E_ * slots * (2 * C + 2 * F_) + (this->ep_.active() ? E_ * slots * C : 0));
  }
  // Forward: the logits [N,E], then one expert's gated output [R*cap, C]. Backward: dln [N,C]
  // throughout with, per expert, its output gradient [R*cap, C], the gate gradients [R*cap],
  // da [R*cap, F] and dxe [R*cap, C]; then the router's dlogits [N,E]; then the attention
  // half's dao [N,C] and dqkv [N,3C].
  // Per microbatch. Tensor parallelism: attention's as the GPT block's, and each expert's
  // row-parallel output and column-parallel input gradient (on its R*cap slots; under expert
  // parallelism on the rows it received, whose bytes the trainer adds from the ledger). Expert
  // parallelism: the counts' all_to_all and its echo (E elements come back each: E/ep from each
  // rank), a one-element all_reduce (agreement that they arrived intact), and four all_to_allv
  // whose bytes follow the routing (the trainer states them from the routing recorded,
  // ExpertParallel::Ledger).
  void tp_comm(int64_t rows, std::vector<TpCollective>& out) const override {
    const int64_t N = rows * this->S_, slots = rows * cap_;
    for (const TpLinear<T>* l : {&qkv_, &proj_}) l->collectives(N, true, out);
    const bool ep = this->ep_.active();
    for (int64_t e = 0; e < (ep ? this->ep_.local_experts(E_) : E_); ++e)
      for (const TpLinear<T>* l : {&fc_, &fc2_}) l->collectives(ep ? 0 : slots, true, out);
    if (!ep) return;
    out.push_back({CommOp::all_to_all, 2, 2 * this->bytes(E_), "ep"});  // the counts and their echo
    out.push_back({CommOp::all_reduce, 1, this->bytes(1), "ep"});       // the group's agreement
    out.push_back({CommOp::all_to_allv, 4, 0, "ep"});
  }
  int64_t ep_replicated() const override { return this->params_.offset(expert0); }
  // Expert parallelism instead: forward the counts (sent, received, echoed; the agreement),
  // then two [E*slots, C] row buffers; backward
  // per local expert dy and dx [ep*slots, C] (2 E slots C in all) with, in turn, two row buffers
  // and the gate gradients, da [ep*slots, F], or two row buffers.
  int64_t workspace_bytes(int64_t rows) const override {
    const int64_t N = rows * this->S_, C = this->C_, slots = rows * cap_;
    if (!this->ep_.active()) return this->bytes(N * C + std::max({slots * (2 * C + 1 + F_), N * E_, 4 * N * C}));
    const int64_t Es = E_ * slots, most = this->ep_.size() * slots;
    return this->bytes(N * C + std::max({2 * Es * C + std::max(2 * Es * C + Es, most * F_), N * E_, 4 * N * C,
                                         3 * E_ + 1 + 2 * Es * C}));
  }

  double forward(int slot, const Micro<T>& mb, const T* x, T* out) override {
    const int64_t R = mb.rows, N = R * this->S_, C = this->C_, slots = R * cap_;
    Saved& s = this->slot_of(saved_, slot);
    auto& be = this->be_;
    this->attention_forward(qkv_, proj_, H_, R, x, s);
    {
      Tensor<T> logits = this->work({N, E_});
      be.gemm(Trans::no, Trans::no, N, E_, C, T(1), s.ln2.data(), C, this->p(router_w), E_, T(0), logits.data(), E_);
      std::vector<T> host(static_cast<size_t>(N * E_));
      be.download(host.data(), logits.data(), N * E_);
      s.route = moe_route(std::vector<double>(host.begin(), host.end()), R, this->S_, E_, K_, cap_);
      if (routing_tap()) routing_tap()(s.route);
    }
    be.copy(out, s.x1.data(), N * C);
    if (this->ep_.active()) {
      expert_parallel_forward(s, N, slots, out);
      return moe_aux_loss(s.route, aux_, mb.norm, nullptr);
    }
    s.xe.resize(E_), s.h.resize(E_), s.a.resize(E_), s.ye.resize(E_);
    for (int64_t e = 0; e < E_; ++e) {
      const int32_t* ids = s.route.token.data() + e * slots;
      s.xe[e] = this->act({slots, C}), s.h[e] = this->act({slots, F_}), s.a[e] = this->act({slots, F_});
      s.ye[e] = this->act({slots, C});
      be.embedding_forward(ids, slots, s.ln2.data(), 0, N, C, s.xe[e].data(), false);  // empty slots: zero
      fc_.forward(s.xe[e].data(), this->pe(e, fc_w), this->pe(e, fc_b), s.h[e].data(), slots);
      be.gelu_forward(s.h[e].data(), s.a[e].data(), slots * F_);
      fc2_.forward(s.a[e].data(), this->pe(e, fc2_w), this->pe(e, fc2_b), s.ye[e].data(), slots);
      Tensor<T> gated = this->work({slots, C});
      be.copy(gated.data(), s.ye[e].data(), slots * C);
      for (int64_t j = 0; j < slots; ++j) be.scale(gated.data() + j * C, T(s.route.gate[e * slots + j]), C);
      be.embedding_backward(ids, slots, gated.data(), 0, N, C, out);  // out[token] += gated row
    }
    return moe_aux_loss(s.route, aux_, mb.norm, nullptr);
  }

  void backward(int slot, const Micro<T>& mb, const T* x, T* dout, T* din, bool accumulate) override {
    backward_held(slot, mb, x, dout, din, accumulate, nullptr);
  }
  // Not split: the whole backward runs in the input pass, and the saved activations are held in
  // `later` until the weight pass, as the zero-bubble schedules' memory statement has them.
  void backward_input(int slot, const Micro<T>& mb, const T* x, T* dout, T* din, bool accumulate,
                      DeferredGrads& later) override {
    backward_held(slot, mb, x, dout, din, accumulate, &later);
  }

 private:
  void backward_held(int slot, const Micro<T>& mb, const T* x, T* dout, T* din, bool accumulate,
                     DeferredGrads* later) {
    const int64_t R = mb.rows, N = R * this->S_, C = this->C_, slots = R * cap_;
    Saved& s = saved_.at(slot);
    auto& be = this->be_;
    this->start_grads(accumulate);
    // Experts: dout is d y; the gated rows' gradient is g * dy[token], the gate's dy[token] . ye.
    Tensor<T> dln = this->work({N, C});
    be.fill(dln.data(), T(0), N * C);
    std::vector<double> dgate(static_cast<size_t>(E_ * slots));
    if (this->ep_.active()) expert_parallel_backward(s, N, dout, dln.data(), dgate, later != nullptr);
    else
      for (int64_t e = 0; e < E_; ++e) {
        const int32_t* ids = s.route.token.data() + e * slots;
        Tensor<T> dye = this->work({slots, C}), dg = this->work({slots});
        be.embedding_forward(ids, slots, dout, 0, N, C, dye.data(), false);
        for (int64_t j = 0; j < slots; ++j)
          be.gemm(Trans::no, Trans::yes, 1, 1, C, T(1), dye.data() + j * C, C, s.ye[e].data() + j * C, C, T(0),
                  dg.data() + j, 1);
        std::vector<T> host(static_cast<size_t>(slots));
        be.download(host.data(), dg.data(), slots);
        for (int64_t j = 0; j < slots; ++j) {
          dgate[e * slots + j] = static_cast<double>(host[j]);
          be.scale(dye.data() + j * C, T(s.route.gate[e * slots + j]), C);
        }
        Tensor<T> da = this->work({slots, F_}), dxe = this->work({slots, C});
        fc2_.backward(s.a[e].data(), this->pe(e, fc2_w), dye.data(), this->ge(e, fc2_w), this->ge(e, fc2_b), da.data(),
                      slots, true);
        be.gelu_backward(s.h[e].data(), da.data(), da.data(), slots * F_);
        fc_.backward(s.xe[e].data(), this->pe(e, fc_w), da.data(), this->ge(e, fc_w), this->ge(e, fc_b), dxe.data(),
                     slots, true);
        be.embedding_backward(ids, slots, dxe.data(), 0, N, C, dln.data());
        if (!later) s.xe[e] = s.h[e] = s.a[e] = s.ye[e] = Tensor<T>();
      }
    // Router: d logit of choice i = g_i (dg_i - sum_j g_j dg_j) over the token's k choices (a
    // dropped choice's dg is 0); unchosen logits get none but the auxiliary loss's.
    {
      std::vector<double> dl(static_cast<size_t>(N * E_), 0.0);
      moe_aux_loss(s.route, aux_, mb.norm, &dl);
      for (int64_t t = 0; t < N; ++t) {
        const int64_t* c = s.route.choice.data() + t * K_;
        auto dg_of = [&](int64_t i) {
          const int64_t at = s.route.slot[t * K_ + i];
          return at < 0 ? 0.0 : dgate[c[i] * slots + at];
        };
        double mean = 0;
        for (int64_t i = 0; i < K_; ++i) mean += s.route.softmax[t * K_ + i] * dg_of(i);
        for (int64_t i = 0; i < K_; ++i) dl[t * E_ + c[i]] += s.route.softmax[t * K_ + i] * (dg_of(i) - mean);
      }
      const std::vector<T> host(dl.begin(), dl.end());
      Tensor<T> dlogits = this->work({N, E_});
      be.upload(dlogits.data(), host.data(), N * E_);
      be.gemm(Trans::yes, Trans::no, C, E_, N, T(1), s.ln2.data(), C, dlogits.data(), E_, T(1), this->g(router_w), E_);
      be.gemm(Trans::no, Trans::yes, N, C, E_, T(1), dlogits.data(), E_, this->p(router_w), E_, T(1), dln.data(), C);
    }
    // dout (d y) gains d x1 through ln2.
    be.layernorm_backward(s.x1.data(), this->p(ln2_g), s.mean2.data(), s.rstd2.data(), dln.data(), dout,
                          this->g(ln2_g), this->g(ln2_b), N, C);
    // Attention half, as the GPT block's unsplit backward.
    Tensor<T> dao = this->work({N, Cl_}), dqkv = this->work({N, 3 * Cl_});
    proj_.backward(s.ao.data(), this->p(proj_w), dout, this->g(proj_w), this->g(proj_b), dao.data(), N, true);
    this->attention_core_backward(s, dao.data(), dqkv.data(), R, H_, D_);
    qkv_.backward(s.ln1.data(), this->p(qkv_w), dqkv.data(), this->g(qkv_w), this->g(qkv_b), dln.data(), N, true);
    this->attention_input_grad(x, s, dout, dln.data(), din, N);
    if (later) later->hold(std::move(s));
    s = Saved{};
  }

 public:
  // qkv, proj, the router and the experts: E of R*cap rows each (every capacity slot, filled
  // or not), or under ep the E/ep local ones on the rows they receive, which follow the
  // routing: counted at balanced routing, N k / E rows from each ep rank (at most its R*cap
  // slots). Per expert row a gate scale forward, a gate dot product and a scale backward;
  // attention as the GPT block.
  void compute(int64_t rows, ComputeWork& out) const override {
    const int64_t N = rows * this->S_, S = this->S_, C = this->C_, RH = rows * H_, slots = rows * cap_;
    const bool ep = this->ep_.active();
    const int64_t experts = ep ? this->ep_.local_experts(E_) : E_;
    const int64_t expert_rows = ep ? this->ep_.size() * std::min(slots, (N * K_ + E_ - 1) / E_) : slots;
    for (const TpLinear<T>* l : {&qkv_, &proj_}) l->work(N, true, out);
    out.gemm(N, E_, C, 3);
    for (int64_t e = 0; e < experts; ++e)
      for (const TpLinear<T>* l : {&fc_, &fc2_}) l->work(expert_rows, true, out);
    out.gemm(1, 1, C, experts * expert_rows);
    out.gemm(S, S, D_, 2 * RH);
    out.gemm(S, D_, S, 4 * RH);
    out.elementwise += static_cast<double>(N) * 12.0 * C + 4.0 * static_cast<double>(RH * S * S) +
                       static_cast<double>(experts * expert_rows) * (6.0 * C + 2.0 * F_);
  }

 private:
  struct Saved : GptBlock<T>::AttentionSaved {
    std::vector<Tensor<T>> xe, h, a, ye;
    MoeRouting route;
    // Expert parallelism: the filled slots in the order they travel (by destination rank, its
    // local expert, slot): each one's slot (e * slots + j) and token; the rows each rank sends
    // each rank's local experts (out: this rank's, in: to this rank's); the outputs that came
    // back [sent rows, C].
    std::vector<int64_t> at;
    std::vector<int32_t> ids;
    std::vector<int64_t> out_counts, in_counts;
    Tensor<T> back;
  };

  // Rows of expert-major buffers to and from the rank-major order they travel in: local expert
  // j's rows are the blocks (p, j) of every rank p, in rank order.
  void rank_to_expert(const Saved& s, T* ranked, const std::vector<T*>& by_expert, bool to_expert) {
    const int P = this->ep_.size();
    const int64_t El = this->ep_.local_experts(E_), C = this->C_;
    int64_t at = 0;
    std::vector<int64_t> filled(static_cast<size_t>(El), 0);
    for (int p = 0; p < P; ++p)
      for (int64_t j = 0; j < El; ++j) {
        const int64_t n = s.in_counts[p * El + j] * C;
        T* mine = by_expert[j] + filled[j];
        if (to_expert) this->be_.copy(mine, ranked + at, n);
        else this->be_.copy(ranked + at, mine, n);
        at += n, filled[j] += n;
      }
  }
  int64_t expert_rows(const Saved& s, int64_t j) const {
    const int64_t El = this->ep_.local_experts(E_);
    int64_t n = 0;
    for (int p = 0; p < this->ep_.size(); ++p) n += s.in_counts[p * El + j];
    return n;
  }
  std::vector<size_t> per_rank(const std::vector<int64_t>& counts) const {
    const int64_t El = this->ep_.local_experts(E_);
    std::vector<size_t> v(static_cast<size_t>(this->ep_.size()), 0);
    for (size_t i = 0; i < counts.size(); ++i) v[i / El] += static_cast<size_t>(counts[i] * this->C_);
    return v;
  }

  // Dispatch (counts, then rows), the local experts on what arrived, combine; out += g * y.
  void expert_parallel_forward(Saved& s, int64_t N, int64_t slots, T* out) {
    auto& be = this->be_;
    const ExpertParallel& ep = this->ep_;
    const int P = ep.size();
    const int64_t El = ep.local_experts(E_), C = this->C_, most = P * slots;
    std::vector<std::vector<int64_t>> bucket(static_cast<size_t>(P * El));
    for (int64_t e = 0; e < E_; ++e)
      for (int64_t j = 0; j < slots; ++j)
        if (ep.travels(s.route.token[e * slots + j]))
          bucket[ep.owner(e, E_) * El + ep.local_index(e, E_)].push_back(e * slots + j);
    s.at.clear(), s.ids.clear(), s.out_counts.assign(P * El, 0);
    for (size_t b = 0; b < bucket.size(); ++b) {
      s.out_counts[b] = static_cast<int64_t>(bucket[b].size());
      for (int64_t a : bucket[b]) s.at.push_back(a), s.ids.push_back(s.route.token[a]);
    }
    const int64_t sent = static_cast<int64_t>(s.at.size());
    {  // the counts, as T (exact: at most R * cap)
      std::vector<T> host(s.out_counts.begin(), s.out_counts.end());
      Tensor<T> c_out = this->work({P * El}), c_in = this->work({P * El}), echo = this->work({P * El});
      be.upload(c_out.data(), host.data(), P * El);
      ep.exchange_counts(c_out.data(), c_in.data(), El, dtype_of<T>());
      // The all_to_allv that follow post these counts on both sides; if the exchange delivered
      // them wrong, the peers would disagree on every message (MPI aborts, NCCL waits forever).
      // So each rank gets back what the others received from it, compares, and the group
      // agrees before any row moves: a broken transport ends the case with this message.
      ep.exchange_counts(c_in.data(), echo.data(), El, dtype_of<T>());
      std::vector<T> back(static_cast<size_t>(P * El));
      be.download(back.data(), echo.data(), P * El);
      be.download(host.data(), c_in.data(), P * El);
      int64_t bad = -1;
      for (int64_t i = 0; i < P * El && bad < 0; ++i)
        if (back[i] != T(s.out_counts[i]) || !(host[i] >= T(0) && host[i] <= T(slots) && host[i] == std::floor(host[i])))
          bad = i;
      T flag = T(bad >= 0 ? 1 : 0);
      Tensor<T> agree = this->work({1});
      be.upload(agree.data(), &flag, 1);
      ep.sum(agree.data(), 1, dtype_of<T>());
      be.download(&flag, agree.data(), 1);
      if (flag != T(0))
        throw Error("expert parallelism: the counts' all_to_all delivered corrupt data (" +
                    (bad >= 0 ? "rank " + std::to_string(ep.rank()) + " announced " + std::to_string(s.out_counts[bad]) +
                                    " rows to rank " + std::to_string(bad / El) + ", which received " +
                                    std::to_string(static_cast<double>(back[bad]))
                              : "on another rank of the ep group") +
                    "); no rows were sent");
      s.in_counts.assign(host.begin(), host.end());
    }
    int64_t received = 0;
    for (int64_t n : s.in_counts) received += n;
    ep.record(received, static_cast<int64_t>(std::count_if(s.route.token.begin(), s.route.token.end(),
                                                           [](int32_t t) { return t >= 0; })));
    s.xe.resize(El), s.h.resize(El), s.a.resize(El), s.ye.resize(El);
    std::vector<T*> xe(El), ye(El);
    for (int64_t j = 0; j < El; ++j) {
      s.xe[j] = this->act({most, C}), s.h[j] = this->act({most, F_}), s.a[j] = this->act({most, F_});
      s.ye[j] = this->act({most, C});
      xe[j] = s.xe[j].data(), ye[j] = s.ye[j].data();
    }
    {
      Tensor<T> rows_out = this->work({E_ * slots, C}), rows_in = this->work({E_ * slots, C});
      be.embedding_forward(s.ids.data(), sent, s.ln2.data(), 0, N, C, rows_out.data(), false);
      ep.exchange(rows_out.data(), per_rank(s.out_counts), rows_in.data(), per_rank(s.in_counts), dtype_of<T>());
      rank_to_expert(s, rows_in.data(), xe, true);
    }
    for (int64_t j = 0; j < El; ++j) {
      const int64_t e = ep.global_expert(j, E_), n = expert_rows(s, j);
      fc_.forward(xe[j], this->pe(e, fc_w), this->pe(e, fc_b), s.h[j].data(), n);
      be.gelu_forward(s.h[j].data(), s.a[j].data(), n * F_);
      fc2_.forward(s.a[j].data(), this->pe(e, fc2_w), this->pe(e, fc2_b), ye[j], n);
    }
    s.back = this->act({E_ * slots, C});
    {
      Tensor<T> rows_in = this->work({E_ * slots, C});
      rank_to_expert(s, rows_in.data(), ye, false);
      ep.exchange(rows_in.data(), per_rank(s.in_counts), s.back.data(), per_rank(s.out_counts), dtype_of<T>());
      Tensor<T> gated = this->work({E_ * slots, C});
      be.copy(gated.data(), s.back.data(), sent * C);
      for (int64_t i = 0; i < sent; ++i) be.scale(gated.data() + i * C, T(s.route.gate[s.at[i]]), C);
      be.embedding_backward(s.ids.data(), sent, gated.data(), 0, N, C, out);  // out[token] += g y
    }
  }

  // The same exchanges backward: the gate's gradient dy[token] . y here, then g dy out to the
  // experts, their backward there (parameter gradients and dx), dx back and into dln.
  void expert_parallel_backward(Saved& s, int64_t N, const T* dout, T* dln, std::vector<double>& dgate, bool hold) {
    auto& be = this->be_;
    const ExpertParallel& ep = this->ep_;
    const int64_t El = ep.local_experts(E_), C = this->C_, slots = static_cast<int64_t>(dgate.size()) / E_;
    const int64_t sent = static_cast<int64_t>(s.at.size()), most = ep.size() * slots;
    std::vector<T*> dye(El), dxe(El);
    std::vector<Tensor<T>> dye_t(El), dxe_t(El);
    for (int64_t j = 0; j < El; ++j) {
      dye_t[j] = this->work({most, C}), dxe_t[j] = this->work({most, C});
      dye[j] = dye_t[j].data(), dxe[j] = dxe_t[j].data();
    }
    {
      Tensor<T> dy = this->work({E_ * slots, C}), dg = this->work({E_ * slots}), rows_in = this->work({E_ * slots, C});
      be.embedding_forward(s.ids.data(), sent, dout, 0, N, C, dy.data(), false);
      be.row_dot(dy.data(), C, s.back.data(), C, sent, C, dg.data());
      std::vector<T> host(static_cast<size_t>(sent));
      be.download(host.data(), dg.data(), sent);
      for (int64_t i = 0; i < sent; ++i) {
        dgate[s.at[i]] = static_cast<double>(host[i]);
        be.scale(dy.data() + i * C, T(s.route.gate[s.at[i]]), C);
      }
      ep.exchange(dy.data(), per_rank(s.out_counts), rows_in.data(), per_rank(s.in_counts), dtype_of<T>());
      rank_to_expert(s, rows_in.data(), dye, true);
    }
    for (int64_t j = 0; j < El; ++j) {
      const int64_t e = ep.global_expert(j, E_), n = expert_rows(s, j);
      Tensor<T> da = this->work({most, F_});
      fc2_.backward(s.a[j].data(), this->pe(e, fc2_w), dye[j], this->ge(e, fc2_w), this->ge(e, fc2_b), da.data(), n,
                    true);
      be.gelu_backward(s.h[j].data(), da.data(), da.data(), n * F_);
      fc_.backward(s.xe[j].data(), this->pe(e, fc_w), da.data(), this->ge(e, fc_w), this->ge(e, fc_b), dxe[j], n, true);
      if (!hold) s.xe[j] = s.h[j] = s.a[j] = s.ye[j] = Tensor<T>();
    }
    Tensor<T> rows_in = this->work({E_ * slots, C}), dx = this->work({E_ * slots, C});
    rank_to_expert(s, rows_in.data(), dxe, false);
    ep.exchange(rows_in.data(), per_rank(s.in_counts), dx.data(), per_rank(s.out_counts), dtype_of<T>());
    be.embedding_backward(s.ids.data(), sent, dx.data(), 0, N, C, dln);
  }
  T* pe(int64_t e, int t) const { return this->p(expert0 + per_expert * e + t); }
  T* ge(int64_t e, int t) const { return this->g(expert0 + per_expert * e + t); }
  int64_t H_, D_, F_, Cl_, E_, K_, cap_;  // local heads, head dim, local MLP width 4C/tp and C/tp,
                                         // experts, experts per token, capacity
  double aux_;                        // the auxiliary loss's coefficient
  TpLinear<T> qkv_, proj_, fc_, fc2_;
  std::vector<Saved> saved_;
};

// Tensor parallelism splits the heads (and with them C and 4C): why tp cannot ("" when it can).
std::string heads_problem(const WorkloadSpec& w, int tp) {
  if (w.heads % tp == 0) return "";
  return "tp " + std::to_string(tp) + " does not divide " + w.name + "'s " + std::to_string(w.heads) +
         " heads; choose a divisor of " + std::to_string(w.heads);
}

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
  std::string tp_problem(const WorkloadSpec& w, int tp) const override { return heads_problem(w, tp); }
  // The load balance cuts every sequence into 2 cp equal chunks.
  std::string cp_problem(const WorkloadSpec& w, int cp) const override {
    if (w.seq % (2 * static_cast<int64_t>(cp)) == 0) return "";
    return "cp " + std::to_string(cp) + " needs " + w.name + "'s sequence length S = " + std::to_string(w.seq) +
           " to split into 2 * cp = " + std::to_string(2 * static_cast<int64_t>(cp)) +
           " equal chunks (the causal load balance); choose cp with 2 cp dividing " + std::to_string(w.seq);
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


// The GPT with MoeTransformer blocks: embedding, L MoE blocks, head.
class MoeKind final : public KindWithBlocks<MoeKind> {
 public:
  std::string name() const override { return "moe"; }
  int64_t num_params(const WorkloadSpec& w) const override {
    const int64_t C = w.embd, F = 4 * C;
    const int64_t block = 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + C * w.experts + w.experts * (2 * C * F + F + C);
    return w.vocab * C + w.seq * C + w.layers * block + 2 * C + w.vocab * C;
  }
  // Per token: 6 FLOPs per weight of qkv and proj (4 C^2), the router (C E) and the head
  // (C V); per sequence and block the experts' E * cap slots at 6 * 2 C F each (empty slots
  // run too), the gate dot products (2 C per slot) and attention as the GPT's.
  double flops_per_sample(const WorkloadSpec& w) const override {
    const double C = static_cast<double>(w.embd), S = static_cast<double>(w.seq), L = static_cast<double>(w.layers),
                 V = static_cast<double>(w.vocab), E = static_cast<double>(w.experts),
                 slots = E * static_cast<double>(moe_capacity(w));
    return S * 6.0 * ((4.0 * C * C + C * E) * L + C * V) + slots * L * (6.0 * 8.0 * C * C + 2.0 * C) +
           12.0 * S * S * C * L;
  }
  int64_t positions(const WorkloadSpec& w) const override { return w.seq; }
  int64_t layers(const WorkloadSpec& w) const override { return w.layers; }
  int lead_blocks() const override { return 1; }
  int64_t max_stages(const WorkloadSpec& w) const override { return w.layers + 2; }
  std::pair<std::string, std::string> spec_problem(const WorkloadSpec& w) const override {
    if (w.experts < 1) return {"experts", w.name + ": experts must be at least 1"};
    if (w.top_k < 1 || w.top_k > w.experts)
      return {"top_k", w.name + ": top_k " + std::to_string(w.top_k) + " must be in [1, experts " +
                           std::to_string(w.experts) + "]"};
    if (!(w.capacity_factor > 0)) return {"capacity_factor", w.name + ": capacity_factor must be positive"};
    if (!(w.aux_loss >= 0)) return {"aux_loss", w.name + ": aux_loss must not be negative"};
    return {};
  }
  std::string tp_problem(const WorkloadSpec& w, int tp) const override { return heads_problem(w, tp); }
  std::string ep_problem(const WorkloadSpec& w, int ep) const override {
    if (w.experts % ep == 0) return "";
    return "ep " + std::to_string(ep) + " does not divide " + w.name + "'s " + std::to_string(w.experts) +
           " experts; choose a divisor of " + std::to_string(w.experts);
  }
  std::string cp_problem(const WorkloadSpec& w, int cp) const override {
    return "cp " + std::to_string(cp) + ": " + w.name +
           "'s capacity group is a whole sequence (which tokens drop depends on all of it), so its "
           "sequences are not split; use cp 1";
  }
  bool reads_tokens() const override { return true; }
  std::string note(const WorkloadSpec& w) const override {
    return std::to_string(w.experts) + " experts, top " + std::to_string(w.top_k) + ", capacity " +
           std::to_string(moe_capacity(w)) + " tokens per sequence" +
           (w.aux_loss > 0 ? ", with the auxiliary loss" : "");
  }
  template <class T>
  static std::vector<std::unique_ptr<Block<T>>> make_blocks(const WorkloadSpec& w, Backend<T>& be, MemoryTracker& mem,
                                                            uint64_t seed, const ModelShard& shard) {
    const auto [key, problem] = singleton<MoeKind>().spec_problem(w);
    if (!key.empty()) throw ConfigError(problem);
    std::vector<std::unique_ptr<Block<T>>> blocks;
    blocks.push_back(std::make_unique<Embedding<T>>(w, shard, be, mem, seed));
    for (int64_t l = 0; l < w.layers; ++l)
      blocks.push_back(std::make_unique<MoeTransformer<T>>(l, w, shard, be, mem, seed));
    blocks.push_back(std::make_unique<Head<T>>(w.layers, w, shard, be, mem, seed));
    return blocks;
  }
};

}  // namespace

const WorkloadKind& gpt_kind() { return singleton<GptKind>(); }
const WorkloadKind& moe_kind() { return singleton<MoeKind>(); }

int64_t moe_capacity(const WorkloadSpec& w) {
  if (w.experts < 1) return 0;
  return static_cast<int64_t>(std::ceil(w.capacity_factor * static_cast<double>(w.seq * w.top_k) /
                                        static_cast<double>(w.experts)));
}

int64_t MoeRouting::dropped() const {
  return static_cast<int64_t>(std::count(slot.begin(), slot.end(), int64_t(-1)));
}

MoeRouting moe_route(std::vector<double> logits, int64_t rows, int64_t seq, int64_t experts, int64_t top_k,
                     int64_t capacity) {
  const int64_t N = rows * seq, E = experts, K = top_k, slots = rows * capacity;
  PTS_REQUIRE(static_cast<int64_t>(logits.size()) == N * E, "moe_route: logits are not [rows * seq, experts]");
  PTS_REQUIRE(1 <= K && K <= E, "moe_route: top_k must be in [1, experts]");
  MoeRouting r;
  r.rows = rows, r.seq = seq, r.experts = E, r.top_k = K, r.capacity = capacity, r.logits = std::move(logits);
  r.choice.resize(N * K), r.slot.assign(N * K, -1), r.softmax.resize(N * K), r.probs.resize(N * E);
  r.token.assign(E * slots, -1), r.gate.assign(E * slots, 0.0);
  std::vector<int64_t> order(E), used(E);
  for (int64_t row = 0; row < rows; ++row) {
    std::fill(used.begin(), used.end(), 0);
    for (int64_t t = row * seq; t < (row + 1) * seq; ++t) {
      const double* l = r.logits.data() + t * E;
      for (int64_t e = 0; e < E; ++e) order[e] = e;
      std::stable_sort(order.begin(), order.end(), [l](int64_t a, int64_t b) { return l[a] > l[b]; });
      double denom = 0, all = 0;
      for (int64_t i = 0; i < K; ++i) denom += std::exp(l[order[i]] - l[order[0]]);
      for (int64_t e = 0; e < E; ++e) all += std::exp(l[e] - l[order[0]]);
      for (int64_t e = 0; e < E; ++e) r.probs[t * E + e] = std::exp(l[e] - l[order[0]]) / all;
      for (int64_t i = 0; i < K; ++i) {
        const int64_t e = order[i], at = t * K + i;
        r.choice[at] = e;
        r.softmax[at] = std::exp(l[e] - l[order[0]]) / denom;
        if (used[e] == capacity) continue;  // the expert is full for this sequence: dropped
        const int64_t j = row * capacity + used[e]++;
        r.slot[at] = j;
        r.token[e * slots + j] = static_cast<int32_t>(t);
        r.gate[e * slots + j] = r.softmax[at];
      }
    }
  }
  return r;
}

double moe_aux_loss(const MoeRouting& r, double coef, double norm, std::vector<double>* dlogits) {
  if (coef == 0) return 0;
  const int64_t S = r.seq, E = r.experts, K = r.top_k;
  std::vector<double> f(E), P(E);
  double sum = 0;
  for (int64_t row = 0; row < r.rows; ++row) {
    std::fill(f.begin(), f.end(), 0.0);
    std::fill(P.begin(), P.end(), 0.0);
    for (int64_t t = row * S; t < (row + 1) * S; ++t) {
      for (int64_t i = 0; i < K; ++i) f[r.choice[t * K + i]] += 1.0 / static_cast<double>(S * K);
      for (int64_t e = 0; e < E; ++e) P[e] += r.probs[t * E + e] / static_cast<double>(S);
    }
    double aux = 0;
    for (int64_t e = 0; e < E; ++e) aux += f[e] * P[e];
    sum += static_cast<double>(E) * aux;
    if (!dlogits) continue;
    // d/d probs[t,e] = coef E f[e] / (S norm); then through the softmax over all E.
    for (int64_t t = row * S; t < (row + 1) * S; ++t) {
      const double* p = r.probs.data() + t * E;
      double mean = 0;
      for (int64_t e = 0; e < E; ++e) mean += p[e] * f[e];
      const double scale = coef * static_cast<double>(E) / (static_cast<double>(S) * norm);
      for (int64_t e = 0; e < E; ++e) (*dlogits)[t * E + e] += scale * p[e] * (f[e] - mean);
    }
  }
  return coef * sum / norm;
}

void set_moe_routing_tap(MoeRoutingTap tap) { routing_tap() = std::move(tap); }

}  // namespace pts
